"""Opening keyframes: the few frames a session starts from, so its first picture is a world.

The generator draws a frame from an empty history only as a patchwork of its 4x4 latent tiles
(it has rarely been trained to), and a rollout keeps whatever it starts from. So a session
opens the way GameNGen-style models do, from known context: `context` simulator frames of its
theme, encoded once by the shipped tokenizers and stored beside the weights
(`engine/weights/openings.pt`, written by `python -m engine.train openings`). The seed picks
one of several spawn points per theme; everything after those frames is generated.
Each spawn point also stores the rest of a full turn seen from where it ends (`around`):
a session's view memory starts knowing its surroundings, so its first turn shows the place
instead of the bands the network paints for directions it has never seen.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import torch

from engine.model.checkpoint import atomic_save

OPENINGS_FILE = "openings.pt"
OPENING_SEED_BASE = 3_000_000  # simulator seeds of the spawn points (training never uses them)


@dataclass
class Openings:
    video: dict[str, torch.Tensor]  # theme -> (K, context, C, S, S) normalised latents
    audio: dict[str, torch.Tensor]  # theme -> (K, context, A)
    # theme -> (K, views, C, S, S): the rest of a full turn from the last keyframe, in
    # views + 1 equal steps to the right (empty in files written before stop 32)
    around: dict[str, torch.Tensor] = field(default_factory=dict)

    def pick(self, theme: str, seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        """The opening for a world seed: (context, C, S, S) video, (context, A) audio and the
        (views, C, S, S) views around it (None where the file has none)."""
        k = seed % len(self.video[theme])
        around = self.around[theme][k].float() if theme in self.around else None
        return self.video[theme][k].float(), self.audio[theme][k].float(), around

    @classmethod
    def load(cls, path: str | Path) -> Openings:
        saved = torch.load(path, map_location="cpu", weights_only=True)
        return cls(saved["video"], saved["audio"], saved.get("around", {}))

    def save(self, path: str | Path) -> None:
        atomic_save(
            {
                part: {k: v.half() for k, v in getattr(self, part).items()}
                for part in ("video", "audio", "around")
            },
            path,
        )
