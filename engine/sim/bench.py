"""Single-threaded throughput of SimWorld.step (render + audio + labels)."""

from __future__ import annotations

import os
import time

import numpy as np

from .showcase import showcase_script
from .world import SimWorld


def bench(
    resolution: int = 128,
    frames: int = 400,
    repeats: int = 5,
    seed: int = 0,
    theme: str = "ember_forest",
) -> dict:
    script = showcase_script(seed, theme, frames)
    inputs = script.frame_inputs()
    world = SimWorld(script.world_spec(resolution))
    runs, frame_ms = [], []
    for _ in range(repeats):
        world.reset()
        times = np.empty(frames)
        start = time.perf_counter()
        for i, frame_input in enumerate(inputs):
            t0 = time.perf_counter()
            world.step(frame_input)
            times[i] = time.perf_counter() - t0
        runs.append(frames / (time.perf_counter() - start))
        frame_ms.append(times * 1000)
    all_ms = np.concatenate(frame_ms)
    return {
        "fps": round(float(np.median(runs)), 1),
        "resolution": resolution,
        "fps_runs": [round(r, 1) for r in runs],
        "frame_ms_p50": round(float(np.percentile(all_ms, 50)), 3),
        "frame_ms_p95": round(float(np.percentile(all_ms, 95)), 3),
        "frames": frames,
        "repeats": repeats,
        "includes": "render+audio+labels via SimWorld.step, showcase script",
        "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
        "cpu_affinity": sorted(os.sched_getaffinity(0))
        if hasattr(os, "sched_getaffinity")
        else None,
    }
