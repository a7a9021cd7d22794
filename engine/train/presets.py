"""Training presets: `cpu` fits this 2-core machine in about an hour; `gpu` is larger."""

from __future__ import annotations

from dataclasses import dataclass

from .generator_config import GeneratorTrainConfig
from .tokenizers import TokenizerTrainConfig


@dataclass(frozen=True)
class Preset:
    tokenizers: TokenizerTrainConfig
    generator: GeneratorTrainConfig


PRESETS: dict[str, Preset] = {
    "cpu": Preset(
        TokenizerTrainConfig(minutes=14, batch=16, crop=64, audio_minutes=5),
        GeneratorTrainConfig(minutes=50, batch=8, window=6, width=160, depth=6, heads=5),
    ),
    "gpu": Preset(
        TokenizerTrainConfig(out="runs/tokenizers_gpu", minutes=60, batch=64, crop=128,
                             adv_weight=0.05, audio_minutes=20, audio_batch=256),
        GeneratorTrainConfig(out="runs/generator_gpu", tokenizers="runs/tokenizers_gpu",
                             minutes=240, batch=64, window=16, width=384, depth=12, heads=6),
    ),
}
