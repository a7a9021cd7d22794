"""Dataset generation: shards of episodes, in parallel, with progress, resumable."""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import shutil
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from tqdm import tqdm

from .agent import DEFAULT_IMAGE_RATE, DEFAULT_PROMPT_RATE
from .layout import MANIFEST, TMP_SUFFIX, finished_shards, shard_name
from .shards import write_shard


@dataclass(frozen=True)
class GenerateConfig:
    episodes: int = 300
    frames: int = 200
    resolution: int = 128
    episodes_per_shard: int = 10
    base_seed: int = 0
    themes: tuple[str, ...] | None = None  # None: every theme
    prompt_rate: float = DEFAULT_PROMPT_RATE  # sentences the agent types per frame
    image_rate: float = DEFAULT_IMAGE_RATE  # episodes where a reference image arrives mid-way

    @property
    def shards(self) -> int:
        return -(-self.episodes // self.episodes_per_shard)

    def shard_seeds(self, index: int) -> list[int]:
        first = index * self.episodes_per_shard
        last = min(first + self.episodes_per_shard, self.episodes)
        return [self.base_seed + i for i in range(first, last)]


class ManifestMismatch(RuntimeError):
    """The output folder holds a dataset generated with different settings."""


def _write(args: tuple[Path, int, GenerateConfig]) -> int:
    root, index, config = args
    seeds = config.shard_seeds(index)
    write_shard(root, index, seeds, config.frames, config.resolution, config.themes,
                config.prompt_rate, config.image_rate)
    return len(seeds)


def generate(root: Path, config: GenerateConfig, workers: int = 1,
             progress: bool = True) -> dict:
    """Generate (or finish generating) a dataset; already finished shards are skipped."""
    root.mkdir(parents=True, exist_ok=True)
    manifest = {**asdict(config), "themes": list(config.themes) if config.themes else None}
    manifest_path = root / MANIFEST
    if manifest_path.exists():
        existing = json.loads(manifest_path.read_text())
        existing.setdefault("prompt_rate", DEFAULT_PROMPT_RATE)  # folders made before the options
        existing.setdefault("image_rate", DEFAULT_IMAGE_RATE)
        if existing != manifest:
            raise ManifestMismatch(
                f"{root} was generated with {existing}; refusing to mix in {manifest}")
    else:
        manifest_path.write_text(json.dumps(manifest, indent=2))
    for stale in root.glob(f"*{TMP_SUFFIX}"):  # half-written shards from an interrupted run
        shutil.rmtree(stale)
    done = {p.name for p in finished_shards(root)}
    todo = [i for i in range(config.shards) if shard_name(i) not in done]
    skipped_episodes = sum(len(config.shard_seeds(i)) for i in range(config.shards)
                           if shard_name(i) in done)
    bar = tqdm(total=config.episodes, initial=skipped_episodes, unit="ep", disable=not progress,
               desc="generate")
    start = time.perf_counter()
    new_episodes = 0
    tasks = [(root, i, config) for i in todo]
    if workers <= 1 or len(todo) <= 1:
        for task in tasks:
            new_episodes += _write(task)
            bar.update(len(config.shard_seeds(task[1])))
    else:
        context = mp.get_context("fork" if hasattr(os, "fork") else "spawn")
        with context.Pool(min(workers, len(todo))) as pool:
            for count in pool.imap_unordered(_write, tasks):
                new_episodes += count
                bar.update(count)
    bar.close()
    seconds = time.perf_counter() - start
    frames = new_episodes * config.frames
    return {"shards_written": len(todo), "shards_skipped": len(done & {shard_name(i) for i in
                                                                       range(config.shards)}),
            "episodes_written": new_episodes, "frames_written": frames,
            "seconds": round(seconds, 2),
            "frames_per_second": round(frames / seconds, 1) if seconds and frames else 0.0}
