"""`python -m engine.bench --json`: real-time throughput of one runtime session on this machine.

Frame time is measured through the public API (push + next_chunk, decode included) with
a scripted mix of walking, turning and camera moves. Action latency is the wall time from
`push(action)` to the end of the `next_chunk` that answers it (the frame showing it).
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time

import numpy as np
import torch

from engine.runtime import Action, Prompt, World
from engine.sim.constants import FPS


def bench(world: World, frames: int = 200, warmup: int = 10, prompt: str | None = None) -> dict:
    """With `prompt` the sentence is typed first and the warm-up lasts past its text guidance,
    so the figures are a session in the world it asked for (`--prompt "make it rain"`: every
    frame draws the particle layer)."""
    session = world.start({"seed": 1, "theme": "ember_forest"})
    if prompt is not None:
        session.push(Prompt(prompt))
        warmup += getattr(world.model.config, "text_guidance_frames", 0)
    for _ in range(warmup):
        session.next_chunk()
    frame_ms, latency_ms = [], []
    rng = np.random.default_rng(0)
    pattern = [("W",), ("W", "LEFT"), ("A",), ("RIGHT",), (), ("S",)]
    t_all = time.perf_counter()
    for i in range(frames):
        pushed_at = None
        if i % 5 == 0:
            keys = pattern[(i // 5) % len(pattern)]
            pushed_at = time.perf_counter()
            session.push(Action(keys=keys, yaw=float(rng.normal(0, 0.03))))
        t = time.perf_counter()
        chunk = session.next_chunk()
        end = time.perf_counter()
        frame_ms.append((end - t) * 1000 / len(chunk.pts))
        if pushed_at is not None and chunk.answered:
            latency_ms.append((end - pushed_at) * 1000)
    total = time.perf_counter() - t_all
    fps = frames / total
    return {
        "fps": round(fps, 2),
        "frame_ms_p50": round(float(np.percentile(frame_ms, 50)), 2),
        "frame_ms_p95": round(float(np.percentile(frame_ms, 95)), 2),
        "action_latency_ms_p50": round(float(np.percentile(latency_ms, 50)), 2),
        "action_latency_ms_p95": round(float(np.percentile(latency_ms, 95)), 2),
        "realtime_factor": round((total / frames) * FPS, 3),
        "resolution": world.resolution,
        "device": f"cpu ({platform.processor() or platform.machine()}, "
        f"{torch.get_num_threads()} threads, fp32)",
        "params": world.params,
        "sampler_steps": world.model.config.sampler_steps,
        "frames": frames,
        "prompt": prompt,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m engine.bench")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--frames", type=int, default=200)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--weights", default=None)
    parser.add_argument("--prompt", default=None, help="a sentence typed before the warm-up")
    args = parser.parse_args(argv)
    world = World.load(args.weights, threads=args.threads)
    result = bench(world, args.frames, prompt=args.prompt)
    print(json.dumps(result) if args.json else "\n".join(f"{k:24s} {v}" for k, v in result.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
