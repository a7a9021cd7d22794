"""The transformer generator's training configuration: what to train on and how; the model's
own shape is its `WorldModelConfig`, carried whole (the checkpoint stores that config)."""

from __future__ import annotations

from dataclasses import dataclass, field

from engine.model.world import WorldModelConfig


@dataclass
class GeneratorTrainConfig:
    data: str = "data/wm_train"
    tokenizers: str = "runs/tokenizers"
    out: str = "runs/generator"
    minutes: float = 40.0
    batch: int = 8
    window: int = 6  # frames per training window; every frame is a target
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
    # The shape of the model (its context is the runtime's rolling KV window); latent sizes
    # come from the tokenizers it is trained on.
    model: WorldModelConfig = field(default_factory=WorldModelConfig)
