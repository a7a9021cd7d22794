"""Training presets.

`cpu` fits this 2-core machine in about an hour. `gpu` is the recipe for one short GPU lease
(engine/train/gpu_recipe.sh: data, both tokenizers and the generator inside ~8 minutes); give it
more `--minutes` where a GPU is yours for longer. Both train the same generator size: the
shipped model must still generate faster than real time on one CPU thread.
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.model.world import WorldModelConfig

from .generator_config import GeneratorTrainConfig
from .tokenizers import TokenizerTrainConfig

# The shipped generator's shape: real time on one CPU thread beside the VP8 encoder.
SHIPPED_SHAPE = WorldModelConfig(width=160, depth=6, heads=5, context=5)


@dataclass(frozen=True)
class Preset:
    tokenizers: TokenizerTrainConfig
    generator: GeneratorTrainConfig


PRESETS: dict[str, Preset] = {
    "cpu": Preset(
        TokenizerTrainConfig(minutes=14, batch=16, crop=64, audio_minutes=5),
        GeneratorTrainConfig(minutes=50, batch=8, window=6, model=SHIPPED_SHAPE),
    ),
    "gpu": Preset(
        TokenizerTrainConfig(
            data="data/wm_gpu",
            out="runs/tokenizers_gpu",
            minutes=2.5,
            batch=64,
            crop=128,
            lr=2e-3,
            adv_weight=0.05,
            adv_start=0.6,
            audio_minutes=2.5,
            audio_batch=512,
            checkpoint_every_s=60,
        ),
        GeneratorTrainConfig(
            out="runs/generator_gpu",
            tokenizers="runs/tokenizers_gpu",
            data="data/wm_gpu",
            minutes=3.5,
            batch=256,
            window=8,
            model=SHIPPED_SHAPE,
            lr=1e-3,
            own_share=0.5,
            first_frame_share=0.1,
            checkpoint_every_s=60,
            sample_every_s=1e9,
        ),
    ),
}
