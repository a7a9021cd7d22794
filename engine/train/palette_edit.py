"""Train the palette edit (engine/model/palette_edit.py) on pairs the simulator renders.

    python -m engine.train palette-edit --out runs/palette_edit --episodes 60 --minutes 10 \
        --threads 1 [--init engine/weights/palette_edit.pt]

The scene edit's moments (`scene_edit.pair_moments`: random play, a moment every
`PAIR_EVERY` frames, in every weather and time of day, a quarter of the worlds already
recoloured); each moment is copied once per drawn palette (`random_palette`, the data's
reference images), recoloured (`SimWorld.apply_reference`) and both seen from the same place.
Trained as the scene edit is (`edit_loss` on code-snapped latents). Resumable; the pairs are
cached in `out/pairs.pt`; part of the inputs are partly or wholly recoloured already
(`partly_recoloured`). The result is `out/palette_edit.pt` (fp16), `out/loss.png` and
`out/report.json`: on held-out episodes, the share of the cells the recolouring changes that
the edit gets right and of those it leaves that it leaves (per theme too, and on frames
already recoloured).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import torch

from engine.data.agent import random_palette
from engine.model.checkpoint import load_checkpoint
from engine.model.palette_edit import PaletteEdit, PaletteEditConfig, picture_palette
from engine.sim.reference import load_reference_image
from engine.spec import THEME_NAMES

from .common import HeadTrainConfig, RowFit, fit_rows, save_head
from .scene_edit import (
    code_agreement,
    code_world,
    edit_loss,
    open_pair_run,
    pair_moments,
    snapped_latents,
)

PALETTES_PER_MOMENT = 2
PATCH_CELLS = 4  # a partly recoloured input is recoloured in blocks of 4x4 cells


def partly_recoloured(
    before: torch.Tensor, after: torch.Tensor, share: float, gen: torch.Generator | None = None
) -> torch.Tensor:
    """The edit's inputs for a batch of pairs: of a `share` of the rows, half show the world
    already recoloured (nothing is left to change) and half a patchwork of blocks of
    `PATCH_CELLS` cells either way, the rest the world before. Why: a session keeps the edit
    on while the picture is shown (`ConvRollout.hold_change`) and puts every new frame
    through it, which is the network's frame, recoloured where it kept the picture's colours
    and not where it painted the theme's own."""
    b, _, h, w = before.shape
    kind = torch.rand(b, generator=gen)
    coarse = (h // PATCH_CELLS, w // PATCH_CELLS)
    patches = torch.rand(b, 1, *coarse, generator=gen) < torch.rand(b, 1, 1, 1, generator=gen)
    patches = patches.repeat_interleave(PATCH_CELLS, 2).repeat_interleave(PATCH_CELLS, 3)
    done = torch.where((kind < share / 2)[:, None, None, None], True, patches)
    done &= (kind < share)[:, None, None, None]
    return torch.where(done, after, before)


@dataclass
class PaletteEditTrainConfig(HeadTrainConfig):
    out: str = "runs/palette_edit"
    episodes: int = 60
    frames: int = 200
    minutes: float = 10.0
    recoloured_share: float = 0.5  # of the inputs, partly or wholly recoloured already


def simulate_pairs(episodes: int, frames: int, resolution: int) -> dict[str, np.ndarray]:
    """(before, after) pictures (N, H, W, 3) uint8, the palette (N, 9) in [0, 1] and theme
    index (N,) of each pair, and its episode (N,)."""
    rows: dict[str, list] = {"before": [], "after": [], "palette": [], "theme": [], "episode": []}
    for e, sim, rng in pair_moments(episodes, frames, resolution, "palette edit: pairs"):
        now = sim.look(0)
        for _ in range(PALETTES_PER_MOMENT):
            picture = load_reference_image(random_palette(rng))
            changed = copy.deepcopy(sim)
            changed.apply_reference(picture)
            rows["before"].append(now)
            rows["after"].append(changed.look(0))
            rows["palette"].append(picture_palette(picture).numpy())
            rows["theme"].append(THEME_NAMES.index(sim.base_theme.name))
            rows["episode"].append(e)
    return {name: np.stack(values) for name, values in rows.items()}


@torch.no_grad()
def encode_pairs(cfg: PaletteEditTrainConfig) -> dict[str, torch.Tensor]:
    """The pairs as code-snapped latents (as the scene edit's are), with what they were told."""
    world, model = code_world(cfg.weights)
    pairs = simulate_pairs(cfg.episodes, cfg.frames, world.resolution)
    codebook: torch.Tensor = model.codebook  # type: ignore[assignment]
    return {
        "before": snapped_latents(world, model, pairs["before"], "palette edit: before"),
        "after": snapped_latents(world, model, pairs["after"], "palette edit: after"),
        "palette": torch.from_numpy(pairs["palette"]),
        "theme": torch.from_numpy(pairs["theme"]),
        "episode": torch.from_numpy(pairs["episode"]),
        "codebook": codebook.clone(),
    }


def train_palette_edit(cfg: PaletteEditTrainConfig) -> Path:
    out, pairs, held = open_pair_run(cfg, lambda: encode_pairs(cfg))
    holds = cfg.recoloured_share > 0
    channels = pairs["codebook"].shape[1]
    model = PaletteEdit(PaletteEditConfig(latent_channels=channels, holds=holds))
    if cfg.init:  # warm start (a fresh run; a resumed one loads its own state below)
        init = load_checkpoint(cfg.init, PaletteEdit, PaletteEditConfig)
        model = PaletteEdit(replace(init.config, holds=holds))
        model.load_state_dict(init.state_dict())

    def loss_of(rows: torch.Tensor) -> torch.Tensor:
        after = pairs["after"][rows].float()
        was = partly_recoloured(pairs["before"][rows].float(), after, cfg.recoloured_share)
        edited = model(was, pairs["palette"][rows].float(), pairs["theme"][rows])
        return edit_loss(edited, was, after)

    train_rows = torch.nonzero(~held)[:, 0]
    step = fit_rows(model, train_rows, loss_of, RowFit.of(cfg, "edit", "palette edit"))
    report = {"steps": step, "pairs": int(len(train_rows)), "heldout": held_out(model, pairs, held)}
    return save_head(out, "palette_edit.pt", model, cfg, step, report)


@torch.no_grad()
def held_out(model: PaletteEdit, pairs: dict[str, torch.Tensor], held: torch.Tensor) -> dict:
    """`code_agreement` of the edit with the held-out episodes' pairs: from the world before
    (all of them and per theme), and from the world already recoloured (what a session's
    every new frame is, where the network kept the picture's colours)."""
    rows = torch.nonzero(held)[:, 0]
    before, after = pairs["before"][rows].float(), pairs["after"][rows].float()
    palette, theme = pairs["palette"][rows].float(), pairs["theme"][rows]
    edited = model(before, palette, theme)
    book = pairs["codebook"]
    report = code_agreement(before, after, edited, book)
    report["by_theme"] = {
        name: code_agreement(before[mine], after[mine], edited[mine], book)
        for k, name in enumerate(THEME_NAMES)
        if (mine := theme == k).any()
    }
    report["recoloured"] = code_agreement(after, after, model(after, palette, theme), book)
    return report
