"""On-disk layout of a generated dataset (all arrays are plain .npy, memory-mappable).

    data/sim/
      manifest.json            generation settings; `generate` refuses to mix settings
      shard_00000/             one finished shard (written as shard_00000.tmp, then renamed)
        frames.npy             (N, H, W, 3) uint8   N = episodes_in_shard * frames_per_episode
        audio.npy              (N, 800) int16       frame i's audio covers [i/20, (i+1)/20) s
        labels.npy             (N,) LABEL_DTYPE     ground truth + actions, see engine/sim/labels
        references.npy         (K, 64, 64, 3) uint8 reference images in effect from some frame
        meta.json              episodes (seed, theme, first row, frames, script), prompts
                               (row, text, event, heldout), references (row)
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

MANIFEST = "manifest.json"
SHARD_PREFIX = "shard_"
TMP_SUFFIX = ".tmp"
EPISODE_SEED_STRIDE = 1  # training episode i uses seed base_seed + i
HELDOUT_SEED_BASE = 1_000_000  # evaluation seeds start here; training never reaches them


def shard_name(index: int) -> str:
    return f"{SHARD_PREFIX}{index:05d}"


def finished_shards(root: Path) -> list[Path]:
    return sorted(p for p in root.glob(f"{SHARD_PREFIX}*")
                  if p.is_dir() and not p.name.endswith(TMP_SUFFIX))


def read_manifest(root: Path) -> dict[str, Any]:
    return json.loads((root / MANIFEST).read_text())


def directory_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
