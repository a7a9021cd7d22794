"""Depth head: how far away each cell of a latent frame is, so a step moves it the right amount.

The walk warp (`conv_world.walk_flow`) moves a session's history as a step moves the view. On
flat ground the depth of a cell follows from its row alone, and that is all the warp knew:
trees, rocks and hills stood still while the player walked toward them, and the judges read
seven forward steps in ten as standing still (MODEL.md v27). The simulator knows the depth of
every pixel (`engine.sim.visibility.pixel_depth`), so this small network learns it from the
latents a session holds (codes, as its history stores them): each cell's mean inverse depth,
the quantity a step's move is proportional to. Trained by `python -m engine.train depth`.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

DEPTH_FILE = "depth.pt"  # beside the other weights; a folder without it warps flat ground


@dataclass
class DepthHeadConfig:
    latent_channels: int = 8
    latent_size: int = 16
    width: int = 48
    blocks: int = 4


class DepthHead(nn.Module):
    def __init__(self, config: DepthHeadConfig):
        super().__init__()
        self.config = config
        w = config.width
        # + 2 planes: where the cell is (a cell's row says much of its depth on open ground)
        self.stem = nn.Conv2d(config.latent_channels + 2, w, 3, padding=1)
        self.blocks = nn.ModuleList(
            nn.Sequential(nn.GroupNorm(8, w), nn.SiLU(), nn.Conv2d(w, w, 3, padding=1))
            for _ in range(config.blocks)
        )
        self.out = nn.Conv2d(w, 1, 1)

    def forward(self, latents: torch.Tensor) -> torch.Tensor:
        """(B, C, S, S) latents -> (B, S, S) inverse depth (1 / world units, 0 on the sky)."""
        b, _, s, _ = latents.shape
        n = (torch.arange(s, dtype=latents.dtype, device=latents.device) + 0.5) / s - 0.5
        rows = n.view(1, 1, s, 1).expand(b, 1, s, s)
        cols = n.view(1, 1, 1, s).expand(b, 1, s, s)
        h = self.stem(torch.cat([latents, rows, cols], dim=1))
        for block in self.blocks:
            h = h + block(h)
        return F.softplus(self.out(h)[:, 0] - 2.0)  # starts near 0.13, the ground's median


def cell_inverse_depth(depth: torch.Tensor, cell: int) -> torch.Tensor:
    """(B, H, W) per-pixel depth (inf on the sky) -> (B, H / cell, W / cell): each cell's
    mean inverse depth, what `DepthHead` learns."""
    return F.avg_pool2d((1.0 / depth)[:, None], cell)[:, 0]
