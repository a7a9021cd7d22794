"""Train the scene edit (engine/model/scene_edit.py) on pairs the simulator renders.

    python -m engine.train scene-edit --out runs/scene_edit --episodes 200 --minutes 20 \
        --threads 1 [--init engine/weights/scene_edit.pt]

Pairs: the random agent plays simulator episodes (sentences more often than in the data
sets, so the moments come in every weather, time and with objects about); every
`PAIR_EVERY` frames the moment is copied once per drawn event, the event applied to the copy,
and both seen from the same place (`SimWorld.look`). The shipped video tokenizer encodes
both; from the before latent as the session's history holds it (snapped to the world model's
codes) the network learns the latent after the event, snapped the same way (squared error,
the cells the event changed weighted up). Resumable (`out/state.pt`); the pairs
are cached in `out/pairs.pt`. The result is `out/scene_edit.pt` (fp16), `out/loss.png` and
`out/report.json`: for each event, on held-out episodes, the share of the cells it changes
that the edit gets right and of those it leaves that the edit leaves.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tqdm import tqdm

from engine.data.agent import RandomAgent, plan_episode
from engine.model.checkpoint import load_checkpoint
from engine.model.conv_world import ConvWorldModel
from engine.model.latent_codes import nearest_codes
from engine.model.scene_edit import SCENE_EVENTS, SceneEdit, SceneEditConfig
from engine.model.video_ae import frames_to_tensor
from engine.sim.world import SimWorld, WorldSpec

from .common import HeadTrainConfig, RowFit, cached, fit_rows, save_head

PAIR_SEED_BASE = 70_000  # the pair episodes' world seeds: apart from data sets and the eval's
PAIR_EVERY = 10  # frames between two copied moments
EVENTS_PER_MOMENT = 3
PAIR_PROMPT_RATE = 1 / 30
CHANGED_WEIGHT = 4.0
HELDOUT_EVERY = 10  # every 10th episode's pairs are held out for the report


@dataclass
class SceneEditTrainConfig(HeadTrainConfig):
    out: str = "runs/scene_edit"
    episodes: int = 200
    frames: int = 200
    minutes: float = 20.0


def pair_moments(
    episodes: int, frames: int, resolution: int, desc: str
) -> Iterator[tuple[int, SimWorld, np.random.Generator]]:
    """Every `PAIR_EVERY` frames of random-agent play in `episodes` simulator episodes: the
    episode's index, its world at that moment (copy it before changing it) and a generator
    seeded by the episode for what the pair draws."""
    for e in tqdm(range(episodes), desc=desc, unit="episode", mininterval=10):
        seed = PAIR_SEED_BASE + e
        plan = plan_episode(seed, frames)
        sim = SimWorld(WorldSpec(seed, plan.theme, resolution, plan.reference_image))
        agent = RandomAgent(np.random.default_rng([seed, 2]), prompt_rate=PAIR_PROMPT_RATE)
        rng = np.random.default_rng([seed, 9])
        labels = None
        for t in range(frames):
            labels = sim.step(agent.act(t, labels)).labels
            if t % PAIR_EVERY == PAIR_EVERY - 1:
                yield e, sim, rng


def simulate_pairs(
    episodes: int, frames: int, resolution: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(before, after) pictures (N, H, W, 3) uint8, each pair's event (N,) as a `SCENE_EVENTS`
    index and its episode (N,)."""
    before, after, events, episode = [], [], [], []
    for e, sim, rng in pair_moments(episodes, frames, resolution, "scene edit: pairs"):
        now = sim.look(0)
        for k in rng.choice(len(SCENE_EVENTS), EVENTS_PER_MOMENT, replace=False):
            changed = copy.deepcopy(sim)
            changed.apply_event(SCENE_EVENTS[k])
            before.append(now)
            after.append(changed.look(0))
            events.append(k)
            episode.append(e)
    return np.stack(before), np.stack(after), np.array(events), np.array(episode)


def code_world(weights: str) -> tuple[Any, ConvWorldModel]:
    """The shipped world whose history an edit rewrites, and its code model."""
    from engine.runtime.session import World

    world = World.load(weights)
    model = world.model
    assert isinstance(model, ConvWorldModel), "an edit is for a code model's history"
    assert model.residual_book is None, "an edit targets one code per cell"
    return world, model


def snapped_latents(world: Any, model: ConvWorldModel, pictures: np.ndarray, name: str):
    """(N, H, W, 3) pictures as the session's history holds them: encoded by the tokenizer,
    each cell snapped to its nearest code's vector."""
    starts = tqdm(range(0, len(pictures), 256), desc=f"{name}: encode")
    return model.snap(
        torch.cat([world.video_ae.encode(frames_to_tensor(pictures[i : i + 256])) for i in starts])
    )


@torch.no_grad()
def encode_pairs(cfg: SceneEditTrainConfig) -> dict[str, torch.Tensor]:
    """The pairs as latents, both snapped to the world model's codes (each cell its nearest
    code's vector): what a session's history holds, and what the edit's result becomes.
    Against the tokenizer's own latent the target would carry the codebook's rounding (a mean
    squared 0.11, more than a lantern changes), which nothing can predict."""
    world, model = code_world(cfg.weights)
    before, after, events, episode = simulate_pairs(cfg.episodes, cfg.frames, world.resolution)
    codebook: torch.Tensor = model.codebook  # type: ignore[assignment]
    return {
        "before": snapped_latents(world, model, before, "scene edit: before"),
        "after": snapped_latents(world, model, after, "scene edit: after"),
        "event": torch.from_numpy(events),
        "episode": torch.from_numpy(episode),
        "codebook": codebook.clone(),
    }


def open_pair_run(
    cfg: HeadTrainConfig, encode: Callable[[], dict[str, torch.Tensor]]
) -> tuple[Path, dict[str, torch.Tensor], torch.Tensor]:
    """An edit's run folder, its pairs (encoded once, then cached in `out/pairs.pt`) and which
    of them are held out for the report (every `HELDOUT_EVERY`th episode's)."""
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(cfg.seed)
    pairs = cached(out / "pairs.pt", encode)
    return out, pairs, (pairs["episode"] % HELDOUT_EVERY) == 0


def train_scene_edit(cfg: SceneEditTrainConfig) -> Path:
    out, pairs, held = open_pair_run(cfg, lambda: encode_pairs(cfg))
    train_rows = torch.nonzero(~held)[:, 0]
    book = pairs["codebook"]
    model = SceneEdit(SceneEditConfig(latent_channels=book.shape[1]))
    if cfg.init:  # warm start (a fresh run; a resumed one loads its own state below)
        model.load_state_dict(load_checkpoint(cfg.init, SceneEdit, SceneEditConfig).state_dict())
    before, after, event = pairs["before"], pairs["after"], pairs["event"]

    def loss_of(rows: torch.Tensor) -> torch.Tensor:
        was, wanted = before[rows].float(), after[rows].float()
        return edit_loss(model(was, event[rows]), was, wanted)

    step = fit_rows(model, train_rows, loss_of, RowFit.of(cfg, "edit", "scene edit"))
    report = {
        "steps": step,
        "pairs": int(len(train_rows)),
        "heldout": held_out_report(model, pairs, held),
    }
    return save_head(out, "scene_edit.pt", model, cfg, step, report)


def edit_loss(edited: torch.Tensor, before: torch.Tensor, after: torch.Tensor) -> torch.Tensor:
    """Squared error to the snapped latent after the event, the cells the event changed
    weighted up: a lantern changes 1 % of them. (A cross-entropy over the codes, tried at
    stop 41, kept fewer of the cells the event leaves and got no more of the changed ones.)"""
    changed = (before != after).any(dim=1, keepdim=True)
    return ((edited - after).pow(2) * (1 + CHANGED_WEIGHT * changed.float())).mean()


@torch.no_grad()
def held_out_report(model: SceneEdit, pairs: dict[str, torch.Tensor], held: torch.Tensor) -> dict:
    """For each event on the held-out episodes, `code_agreement` of the edit with the pairs."""
    out = {}
    for k, name in enumerate(SCENE_EVENTS):
        rows = torch.nonzero(held & (pairs["event"] == k))[:, 0]
        if not len(rows):
            continue
        before = pairs["before"][rows].float()
        edited = model(before, pairs["event"][rows])
        out[name] = code_agreement(before, pairs["after"][rows].float(), edited, pairs["codebook"])
    return out


def code_agreement(
    before: torch.Tensor, after: torch.Tensor, edited: torch.Tensor, book: torch.Tensor
) -> dict:
    """Of the cells the change turns to another code, the share whose code the edit gets
    right (leaving them as they were gets none); of the cells it leaves, the share the edit
    leaves too."""
    was, wanted, got = (nearest_codes(z, book) for z in (before, after, edited))
    changed = was != wanted
    right = got == wanted
    return {
        "pairs": int(len(before)),
        "changed_cells": round(float(changed.float().mean()), 4),
        "changed_right": round(float(right[changed].float().mean()), 3) if changed.any() else None,
        "kept_right": round(float(right[~changed].float().mean()), 3),
    }
