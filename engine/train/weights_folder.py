"""A training run's output: a complete weights folder, usable as `--weights` anywhere."""

from __future__ import annotations

import copy
import dataclasses
import shutil
from pathlib import Path

import torch

from engine.model.checkpoint import save_checkpoint
from engine.model.conv_world import ConvWorldModel
from engine.model.depth_head import DEPTH_FILE
from engine.model.palette_edit import PALETTE_EDIT_FILE
from engine.model.particles import PARTICLES_FILE
from engine.model.scene_edit import SCENE_EDIT_FILE
from engine.model.sentence_snap import SNAP_FILE
from engine.model.video_ae import VideoAE
from engine.model.world import WorldModel
from engine.runtime.openings import OPENINGS_FILE

# the run-time parts a run does not train travel with it, so its folder plays as shipped
WEIGHT_PARTS = (
    "video_ae.pt",
    "audio_ae.pt",
    "world.pt",
    OPENINGS_FILE,
    SNAP_FILE,
    PARTICLES_FILE,
    SCENE_EDIT_FILE,
    DEPTH_FILE,
    PALETTE_EDIT_FILE,
)


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
    tuned: dict[str, torch.nn.Module | None] = {"world.pt": world, "video_ae.pt": video_ae}
    for name, part in tuned.items():
        if part is not None:
            tuned_copy = copy.deepcopy(part).float().cpu().eval()
            save_checkpoint(dest / name, tuned_copy, {"step": step, "train": train}, half=True)
    return dest
