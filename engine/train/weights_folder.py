"""A training run's output: a complete weights folder, usable as `--weights` anywhere."""

from __future__ import annotations

import copy
import dataclasses
import shutil
from pathlib import Path

from engine.model.checkpoint import save_checkpoint
from engine.model.conv_world import ConvWorldModel
from engine.model.video_ae import VideoAE
from engine.model.world import WorldModel
from engine.runtime.openings import OPENINGS_FILE

WEIGHT_PARTS = ("video_ae.pt", "audio_ae.pt", "world.pt", OPENINGS_FILE)


def write_weights(
    cfg,
    out: Path,
    world: WorldModel | ConvWorldModel | None = None,
    video_ae: VideoAE | None = None,
    step: int = 0,
) -> Path:
    """A complete weights folder: the tuned parts as fp16 (copies: training goes on), the rest
    copied from the warm start."""
    dest = out / "weights"
    dest.mkdir(parents=True, exist_ok=True)
    for name in WEIGHT_PARTS:
        if (Path(cfg.weights) / name).exists():
            shutil.copy(Path(cfg.weights) / name, dest / name)
    train = {"warm_start": cfg.weights, **dataclasses.asdict(cfg)}
    if world is not None:
        save_checkpoint(
            dest / "world.pt",
            copy.deepcopy(world).float().cpu().eval(),
            {"step": step, "train": train},
            half=True,
        )
    if video_ae is not None:
        save_checkpoint(
            dest / "video_ae.pt",
            copy.deepcopy(video_ae).float().cpu().eval(),
            {"step": step, "train": train},
            half=True,
        )
    return dest
