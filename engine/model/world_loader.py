"""Which generator a `world.pt` holds: the token transformer or the convolutional model."""

from __future__ import annotations

from pathlib import Path

from .checkpoint import load_checkpoint, load_payload
from .conv_world import ConvWorldConfig, ConvWorldModel
from .world import WorldModel, WorldModelConfig

Generator = WorldModel | ConvWorldModel


def load_world_model(path: str | Path) -> Generator:
    """The generator stored in `path`, rebuilt from its config (`arch` names the conv model;
    files without it are the transformer)."""
    ckpt = load_payload(path)
    if ckpt["config"].get("arch") == "conv":
        return load_checkpoint(None, ConvWorldModel, ConvWorldConfig, ckpt=ckpt)
    return load_checkpoint(None, WorldModel, WorldModelConfig, ckpt=ckpt)
