"""Train the depth head (engine/model/depth_head.py) on depth the simulator renders.

    python -m engine.train depth --out runs/depth --episodes 60 --minutes 10 --threads 1 \
        [--init engine/weights/depth.pt]

The random agent plays simulator episodes (`play_episode`, seeds apart from the data sets'
and the eval's) and every `KEEP_EVERY`-th frame keeps its picture and the renderer's depth of
every pixel (`engine.sim.visibility.pixel_depth`). The shipped video tokenizer encodes the
pictures and the world model's codes snap them, as a session's history holds them; the head
learns each cell's mean inverse depth (L1). Resumable (`out/state.pt`); the frames are cached
in `out/frames.pt`. The result is `out/depth.pt` (fp16), `out/loss.png` and `out/report.json`:
on held-out episodes the head's mean error against the flat-ground guess the walk warp made
before, over all cells and over the cells that stand above the ground (trees, rocks, hills).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from tqdm import tqdm

from engine.data.episode import PlayedFrame, play_episode
from engine.model.checkpoint import load_checkpoint
from engine.model.conv_world import ConvWorldModel, flat_ground_inverse_depth
from engine.model.depth_head import DepthHead, DepthHeadConfig, cell_inverse_depth
from engine.model.video_ae import frames_to_tensor

from .common import HeadTrainConfig, RowFit, cached, fit_rows, save_head

DEPTH_SEED_BASE = 90_000  # apart from the data sets', the eval's and the scene edit's seeds
KEEP_EVERY = 3  # frames between two kept ones: neighbours are nearly the same picture
HELDOUT_EVERY = 10  # every 10th episode is held out for the report
RAISED = 0.05  # a cell this much nearer than flat ground stands above it (1 / world units)


@dataclass
class DepthTrainConfig(HeadTrainConfig):
    out: str = "runs/depth"


def simulate(episodes: int, frames: int, resolution: int, cell: int) -> dict[str, np.ndarray]:
    """Pictures (N, H, W, 3) uint8, the inverse depth of their `cell`-pixel cells (N, S, S),
    the camera's pitch (N,) radians and each row's episode (N,)."""
    parts: dict[str, list] = {"pictures": [], "target": [], "pitch": [], "episode": []}
    for e in tqdm(range(episodes), desc="depth: episodes", unit="episode", mininterval=10):
        for t, played in enumerate(
            play_episode(DEPTH_SEED_BASE + e, frames, resolution, with_depth=True)
        ):
            if not isinstance(played, PlayedFrame) or t % KEEP_EVERY:
                continue
            assert played.depth is not None
            depth = torch.from_numpy(played.depth)[None]
            parts["pictures"].append(played.frame.rgb)
            parts["target"].append(cell_inverse_depth(depth, cell)[0].numpy())
            parts["pitch"].append(float(played.frame.labels["pose_pitch"]))
            parts["episode"].append(e)
    return {k: np.stack(v) for k, v in parts.items()}


@torch.no_grad()
def encode_frames(cfg: DepthTrainConfig) -> dict[str, torch.Tensor]:
    from engine.runtime.session import World

    world = World.load(cfg.weights)
    model = world.model
    assert isinstance(model, ConvWorldModel), "the depth head is for a conv model's walk warp"
    cell = world.resolution // model.config.latent_size
    sim = simulate(cfg.episodes, cfg.frames, world.resolution, cell)
    pictures = sim["pictures"]
    starts = tqdm(range(0, len(pictures), 256), desc="depth: encode")
    latents = torch.cat(
        [world.video_ae.encode(frames_to_tensor(pictures[i : i + 256])) for i in starts]
    )
    if model.config.codes:
        latents = model.snap(latents)
    return {
        "latents": latents.half(),
        "target": torch.from_numpy(sim["target"]),
        "pitch": torch.from_numpy(sim["pitch"]).float(),
        "episode": torch.from_numpy(sim["episode"]),
    }


def train_depth(cfg: DepthTrainConfig) -> Path:
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(cfg.seed)
    data = cached(out / "frames.pt", lambda: encode_frames(cfg))
    held = (data["episode"] % HELDOUT_EVERY) == 0
    train_rows = torch.nonzero(~held)[:, 0]
    c, s = data["latents"].shape[1], data["latents"].shape[-1]
    model = DepthHead(DepthHeadConfig(latent_channels=c, latent_size=s))
    if cfg.init:  # warm start (a fresh run; a resumed one loads its own state below)
        model.load_state_dict(load_checkpoint(cfg.init, DepthHead, DepthHeadConfig).state_dict())
    latents, target = data["latents"], data["target"]

    def loss_of(rows: torch.Tensor) -> torch.Tensor:
        return (model(latents[rows].float()) - target[rows]).abs().mean()

    step = fit_rows(model, train_rows, loss_of, RowFit.of(cfg, "l1", "depth head"))
    report = {
        "steps": step,
        "frames": int(len(train_rows)),
        "heldout": held_out_report(model, data, held),
    }
    return save_head(out, "depth.pt", model, cfg, step, report)


@torch.no_grad()
def held_out_report(model: DepthHead, data: dict[str, torch.Tensor], held: torch.Tensor) -> dict:
    """Mean |error| of the head and of the flat ground (at each frame's true horizon) on the
    held-out frames: over every cell, and over the cells nearer than flat ground (what a
    step must bring closer and flat ground leaves standing)."""
    rows = torch.nonzero(held)[:, 0]
    latents, truth = data["latents"][rows].float(), data["target"][rows]
    s = latents.shape[-1]
    guess = torch.cat([model(latents[i : i + 256]) for i in range(0, len(rows), 256)])
    flat = flat_ground_inverse_depth(_below_horizon(data["pitch"][rows], s), s)
    raised = truth > flat + RAISED

    def error(x: torch.Tensor, where: torch.Tensor | None = None) -> float:
        e = (x - truth).abs()
        return round(float(e.mean() if where is None else e[where].mean()), 4)

    return {
        "frames": int(len(rows)),
        "head_l1": error(guess),
        "flat_ground_l1": error(flat),
        "raised_share": round(float(raised.float().mean()), 4),
        "head_l1_raised": error(guess, raised),
        "flat_ground_l1_raised": error(flat, raised),
        "truth_mean": round(float(truth.mean()), 4),
    }


def _below_horizon(pitch: torch.Tensor, size: int) -> torch.Tensor:
    """(N,) camera pitch -> (N, S, S): how many cells each cell's row is below the horizon."""
    horizon = torch.tan(pitch) * size / 2  # cells below the middle (positive pitch looks up)
    n = torch.arange(size, dtype=torch.float32) + 0.5 - size / 2
    return (n[None, :] - horizon[:, None])[:, :, None].expand(-1, size, size)
