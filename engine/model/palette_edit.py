"""Palette edit: the world recoloured at once by a reference picture, on the session's latents.

The simulator recolours its sky, foliage and ground the moment a reference picture arrives
(`engine/sim/themes.apply_palette`); the world network, told the picture, moved the bands only
0.6 of the simulator's way (MODEL.md v31). Like the scene edit (`scene_edit.py`), this net
rewrites every history frame's latent into the recoloured world, told the picture's palette (the
mean colour of its sky, foliage and ground bands, `palette_from_image`) and the session's theme
(the simulator mixes the palette into the theme's own colours, not the picture shown now).
Trained on simulator (before, after) pairs of one moment (`engine/train/palette_edit.py`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from engine.spec import REFERENCE_BANDS, THEME_NAMES, band_colours

from .scene_edit import LatentEdit, SceneEditConfig

PALETTE_EDIT_FILE = "palette_edit.pt"  # beside the other weights; without it nothing is edited
PALETTE_NUMBERS = 3 * len(REFERENCE_BANDS)


@dataclass
class PaletteEditConfig(SceneEditConfig):
    themes: int = len(THEME_NAMES)
    width: int = 48
    # trained on frames already recoloured too (engine/train/palette_edit.partly_recoloured):
    # a session keeps it on for every new frame, not only the history the picture finds
    holds: bool = False


def picture_palette(picture: np.ndarray) -> torch.Tensor:
    """(PALETTE_NUMBERS,) in [0, 1]: the mean colour of each band of an (H, W, 3) uint8
    picture, the way the simulator reads a reference image (`band_colours`)."""
    colours = np.array(list(band_colours(picture).values()), np.float32)
    return torch.from_numpy(colours.reshape(-1) / 255.0)


class PaletteEdit(LatentEdit):
    config: PaletteEditConfig

    def __init__(self, config: PaletteEditConfig):
        super().__init__(config)
        self.theme_embedding = nn.Embedding(config.themes, config.event_dim)
        self.palette_in = nn.Linear(PALETTE_NUMBERS, config.event_dim)
        self.palette_mix = nn.Linear(config.event_dim, config.event_dim)

    def forward(
        self, latents: torch.Tensor, palette: torch.Tensor, theme: torch.Tensor
    ) -> torch.Tensor:
        """(B, C, S, S) latents, (B, PALETTE_NUMBERS) palettes and (B,) theme indices -> the
        latents of the world recoloured by that palette."""
        told = self.palette_mix(F.silu(self.palette_in(palette))) + self.theme_embedding(theme)
        return self.edit(latents, told)

    def recolour(self, latents: torch.Tensor, picture: np.ndarray, theme: int) -> torch.Tensor:
        """(n, C, S, S) latents, every one of them recoloured by the (H, W, 3) uint8 picture."""
        n = len(latents)
        palette = picture_palette(picture)[None].expand(n, -1)
        return self(latents.float(), palette, torch.full((n,), theme, dtype=torch.long))
