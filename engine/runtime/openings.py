"""Opening keyframes: the few frames a session starts from, so its first picture is a world.

The generator draws a frame from an empty history only as a patchwork of its 4x4 latent tiles
(it has rarely been trained to), and a rollout keeps whatever it starts from. So a session
opens the way GameNGen-style models do, from known context: `context` simulator frames of its
theme, encoded once by the shipped tokenizers and stored beside the weights
(`engine/weights/openings.pt`, written by `python -m engine.train openings`). The seed picks
one of several spawn points per theme; everything after those frames is generated.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from engine.model.checkpoint import atomic_save

OPENINGS_FILE = "openings.pt"
OPENING_SEED_BASE = 3_000_000  # simulator seeds of the spawn points (training never uses them)


@dataclass
class Openings:
    video: dict[str, torch.Tensor]  # theme -> (K, context, C, S, S) normalised latents
    audio: dict[str, torch.Tensor]  # theme -> (K, context, A)

    def pick(self, theme: str, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
        """The opening for a world seed: (context, C, S, S) video and (context, A) audio."""
        k = seed % len(self.video[theme])
        return self.video[theme][k].float(), self.audio[theme][k].float()

    @classmethod
    def load(cls, path: str | Path) -> Openings:
        saved = torch.load(path, map_location="cpu", weights_only=True)
        return cls(saved["video"], saved["audio"])

    def save(self, path: str | Path) -> None:
        atomic_save(
            {
                "video": {k: v.half() for k, v in self.video.items()},
                "audio": {k: v.half() for k, v in self.audio.items()},
            },
            path,
        )
