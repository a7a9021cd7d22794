"""Scene edit: the world changed at once by a sentence, on the latents the session holds.

The world network keeps a state its history shows (a night sky, a tree ahead: MODEL.md v23,
`prompt_following_kept_from_truth`), but from a sentence alone it does not draw it. The
simulator changes its state the moment a sentence arrives, so the change is a function of
the picture now and the event: that is what this network learns, on (before, after) pairs
the simulator renders of the same moment (`engine/train/scene_edit.py`). A session routes a
typed sentence to one of `SCENE_EVENTS` (`SentenceSnap.event_of`) and edits every
frame of its history with it; the world network then carries the edited world on.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

SCENE_EDIT_FILE = "scene_edit.pt"  # beside the other weights; a folder without it edits nothing
# The events that change what the picture shows (the creature's gifts and looks do not).
SCENE_EVENTS = (
    "rain",
    "snow",
    "fog",
    "clear",
    "day",
    "dusk",
    "night",
    "rainbow",
    "fire",
    "spawn_dragon",
    "spawn_tree",
    "spawn_lantern",
    "spawn_crystal",
    "spawn_mushroom",
    "spawn_statue",
)

# The events whose change stays where it happens (ahead of the camera); every other one
# changes the whole world, every direction the session remembers included.
LOCAL_EVENTS = frozenset(e for e in SCENE_EVENTS if e == "fire" or e.startswith("spawn_"))


@dataclass
class SceneEditConfig:
    latent_channels: int = 8
    latent_size: int = 16
    events: int = len(SCENE_EVENTS)
    width: int = 64
    blocks: int = 4
    event_dim: int = 32


class EditBlock(nn.Module):
    """A residual block told the event (a scale and shift of its features) and the whole
    frame (its mean features added back: night or fog changes every cell alike)."""

    def __init__(self, width: int, event_dim: int):
        super().__init__()
        self.norm = nn.GroupNorm(8, width)
        self.film = nn.Linear(event_dim, 2 * width)
        self.frame = nn.Linear(width, width)
        self.conv1 = nn.Conv2d(width, width, 3, padding=1)
        self.conv2 = nn.Conv2d(width, width, 3, padding=1)

    def forward(self, h: torch.Tensor, event: torch.Tensor) -> torch.Tensor:
        scale, shift = self.film(event)[:, :, None, None].chunk(2, dim=1)
        x = self.norm(h) * (1 + scale) + shift
        x = x + self.frame(x.mean(dim=(2, 3)))[:, :, None, None]
        return h + self.conv2(F.silu(self.conv1(F.silu(x))))


class LatentEdit(nn.Module):
    """The edit's trunk: latents in, latents out, every block told one condition vector
    (`event_dim` numbers); the output starts as "nothing changed"."""

    def __init__(self, config: SceneEditConfig):
        super().__init__()
        self.config = config
        c, w = config.latent_channels, config.width
        self.inp = nn.Conv2d(c + 2, w, 3, padding=1)  # + where each cell sits in the frame
        self.body = nn.ModuleList(EditBlock(w, config.event_dim) for _ in range(config.blocks))
        self.out = nn.Conv2d(w, c, 3, padding=1)
        nn.init.zeros_(self.out.weight)  # starts as "nothing changed"
        nn.init.zeros_(self.out.bias)  # type: ignore[arg-type]
        s = config.latent_size
        ys, xs = torch.meshgrid(torch.linspace(-1, 1, s), torch.linspace(-1, 1, s), indexing="ij")
        self.where: torch.Tensor
        self.register_buffer("where", torch.stack([xs, ys])[None], persistent=False)

    def edit(self, latents: torch.Tensor, condition: torch.Tensor) -> torch.Tensor:
        b = len(latents)
        h = self.inp(torch.cat([latents, self.where.expand(b, -1, -1, -1)], dim=1))
        for block in self.body:
            h = block(h, condition)
        return latents + self.out(F.silu(h))


class SceneEdit(LatentEdit):
    def __init__(self, config: SceneEditConfig):
        super().__init__(config)
        self.event_embedding = nn.Embedding(config.events, config.event_dim)

    def forward(self, latents: torch.Tensor, event: torch.Tensor) -> torch.Tensor:
        """(B, C, S, S) latents and (B,) `SCENE_EVENTS` indices -> the latents after it."""
        return self.edit(latents, self.event_embedding(event))

    def change(self, latents: torch.Tensor, event: str) -> torch.Tensor:
        """(n, C, S, S) latents, every one of them changed by the event named `event`."""
        index = torch.full((len(latents),), SCENE_EVENTS.index(event), dtype=torch.long)
        return self(latents.float(), index)
