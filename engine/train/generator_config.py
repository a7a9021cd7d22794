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
    context: int = 5  # clean frames a block attends to (the runtime's rolling KV window)
    width: int = 192
    depth: int = 6
    heads: int = 6
    lr: float = 6e-4
    audio_weight: float = 0.5
    first_frame_share: float = 0.1  # windows that open an episode (the cold start)
    own_share: float = 0.0  # windows whose context is the model's own predictions
    own_start: float = 0.3  # fraction of the budget before that starts (early guesses are noise)
    own_rounds: int = 2
    own_steps: int = 2
    text_table: str | None = None  # precomputed sentence embeddings (no text encoder needed)
    checkpoint_every_s: float = 180.0
    sample_every_s: float = 600.0
    device: str = "auto"
