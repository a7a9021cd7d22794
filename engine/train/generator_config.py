"""The generator's training configuration (kept apart so presets import nothing heavy)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class GeneratorTrainConfig:
    data: str = "data/wm_train"
    tokenizers: str = "runs/tokenizers"
    out: str = "runs/generator"
    minutes: float = 40.0
    batch: int = 8
    window: int = 6  # frames per training window; every frame is a target
    width: int = 192
    depth: int = 6
    heads: int = 6
    lr: float = 6e-4
    audio_weight: float = 0.5
    checkpoint_every_s: float = 180.0
    sample_every_s: float = 600.0
    device: str = "auto"
