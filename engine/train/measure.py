"""Picture-quality measurements of a world model against the simulator, for deciding by numbers.

    python -m engine.train measure --weights DIR --out runs/measure/NAME [--project]

Fidelity: the eval's open-loop protocol (held-out seeds from 1,000,000, random play, `context`
true frames, then 64 generated frames from the model's own output): pooled PSNR at h1/h16/h64
next to copy-last-frame, sharpness (Laplacian variance ratio) and the tile-seam ratio at h16/h64.
Long play: 2,000-frame walking rollouts (W held, a turn every few seconds) for brightness_drift
and for how sharpness and seams evolve at 0/10/30/60/90 s, with a contact sheet (simulator row
above model row) and the generation time per frame. Metric definitions are DESIGN.md's; the
shared ones come from engine.eval.metrics so the figures match the eval's.
"""

from __future__ import annotations

import dataclasses
import json
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from engine.data.agent import RandomAgent, plan_episode
from engine.data.layout import HELDOUT_SEED_BASE
from engine.eval.metrics import brightness_drift, luminance, pooled_psnr, sharpness_ratio
from engine.model.audio_ae import int16_to_float
from engine.model.inputs import input_features_from_label
from engine.model.video_ae import frames_to_tensor, image_token, tensor_to_frames
from engine.runtime.session import World
from engine.sim import FrameInputs, SimWorld, WorldSpec
from engine.sim.reference import load_reference_image
from engine.sim.themes import THEME_NAMES

from .plots import image_grid

SEAM_TILE = 32  # the generator's 4x4 latent patch is a 32x32 pixel tile
HORIZONS = (1, 16, 64)
LONG_SEED_BASE = HELDOUT_SEED_BASE + 800
LONG_MARKS_S = (0, 10, 30, 60, 90)  # where the long rollouts are sampled (seconds)


def seam_ratio(frames: np.ndarray, tile: int = SEAM_TILE) -> float:
    """Mean luminance gradient magnitude across every `tile`-th pixel border over that across
    all other borders (simulator frames about 1.2; a mosaic of latent tiles > 2)."""
    y = luminance(frames)
    gx = np.abs(np.diff(y, axis=2))  # gx[..., j]: the border between columns j and j + 1
    gy = np.abs(np.diff(y, axis=1))
    cols = (np.arange(gx.shape[2]) % tile) == tile - 1
    rows = (np.arange(gy.shape[1]) % tile) == tile - 1
    on = np.concatenate([gx[:, :, cols].ravel(), gy[:, rows, :].ravel()])
    off = np.concatenate([gx[:, :, ~cols].ravel(), gy[:, ~rows, :].ravel()])
    return float(on.mean() / max(off.mean(), 1e-12))


@dataclass
class Episode:
    spec: WorldSpec
    inputs: list[FrameInputs]
    frames: np.ndarray  # (N, H, W, 3) uint8
    audio: np.ndarray  # (N, 800) int16
    labels: np.ndarray  # (N,) LABEL_DTYPE

    def features(self, t: int) -> np.ndarray:
        return input_features_from_label(self.labels[t])

    @classmethod
    def from_steps(cls, spec: WorldSpec, inputs: list[FrameInputs], steps: list) -> Episode:
        """The episode of simulator steps taken under `inputs`."""
        return cls(
            spec,
            inputs,
            np.stack([s.rgb for s in steps]),
            np.stack([s.audio for s in steps]),
            np.stack([s.labels for s in steps]),
        )


def simulate(spec: WorldSpec, inputs: list[FrameInputs]) -> Episode:
    world = SimWorld(spec)
    steps = [world.step(inp) for inp in inputs]
    return Episode.from_steps(spec, inputs, steps)


def agent_episode(seed: int, frames: int) -> Episode:
    """Closed-loop random play exactly as the eval's fidelity episodes (same seeds, same agent)."""
    plan = plan_episode(seed, frames)
    spec = WorldSpec(seed, plan.theme, 128, plan.reference_image)
    world = SimWorld(spec)
    agent = RandomAgent(np.random.default_rng([seed, 2]))
    inputs, steps, last = [], [], None
    for t in range(frames):
        inp = agent.act(t, last)
        step = world.step(inp)
        inputs.append(inp)
        steps.append(step)
        last = step.labels
    return Episode.from_steps(spec, inputs, steps)


def walking_inputs(frames: int, seed: int) -> list[FrameInputs]:
    """Walking play: W held throughout, a 10-25 frame turn (either way) every 3-6 s."""
    rng = np.random.default_rng(seed)
    out: list[FrameInputs] = []
    while len(out) < frames:
        out += [FrameInputs.hold("W") for _ in range(int(rng.integers(60, 120)))]
        turn = ("W", "LEFT") if rng.random() < 0.5 else ("W", "RIGHT")
        out += [FrameInputs.hold(*turn) for _ in range(int(rng.integers(10, 25)))]
    return out[:frames]


# The sentences issue 11 names, typed into the prompt sheets' session (frame: sentence).
SHEET_PROMPTS: dict[int, str] = {100: "make it rain", 500: "make it night", 900: "cast fire magic"}


def scripted_inputs(frames: int, prompts: dict[int, str] | None = None) -> list[FrameInputs]:
    """The contact-sheet session: walk 3 s, turn 1 s, stand 1 s, repeated; `prompts` types
    each sentence at its frame."""
    cycle = [FrameInputs.hold("W")] * 60 + [FrameInputs.hold("LEFT")] * 20 + [FrameInputs()] * 20
    out = [cycle[t % len(cycle)] for t in range(frames)]
    for t, text in (prompts or {}).items():
        if t < frames:
            out[t] = dataclasses.replace(out[t], prompts=(text,))
    return out


@torch.inference_mode()
def rollout(
    world: World, ep: Episode, start: int, horizon: int, seed: int = 0
) -> tuple[np.ndarray, float]:
    """Prime with the true frames [start - context, start), generate [start, start + horizon)
    from the model's own output under the episode's inputs. Returns (frames, ms per frame)."""
    ctx = world.model.config.context
    image = None
    if ep.spec.reference_image is not None:
        image = image_token(world.video_ae, load_reference_image(ep.spec.reference_image))
    roll = world.new_rollout(THEME_NAMES.index(ep.spec.theme), image, seed=seed)
    texts = {
        t: world.text.encode([inp.prompts[0]])[0]
        for t, inp in enumerate(ep.inputs[: start + horizon])
        if inp.prompts
    }
    lo = max(0, start - ctx)
    for t in sorted(texts):
        if t < lo:
            roll.add_text(texts[t])
    z = world.video_ae.encode(frames_to_tensor(ep.frames[lo:start]))
    a = world.audio_ae.encode(int16_to_float(ep.audio[lo:start]))
    for i, t in enumerate(range(lo, start)):
        if t in texts:
            roll.add_text(texts[t])
        roll.observe(z[i], a[i], ep.features(t), t, texts.get(t))
    pictures = []
    t0 = time.perf_counter()
    for t in range(start, start + horizon):
        zt, _ = roll.generate(ep.features(t), t, texts.get(t))
        pictures.append(
            roll.last_frame if roll.last_frame is not None else world.video_ae.decode(zt[None])
        )
    ms = (time.perf_counter() - t0) * 1000 / horizon
    return tensor_to_frames(torch.cat(pictures)), ms


def fidelity(world: World, episodes: int = 10) -> dict:
    """The eval's open-loop fidelity protocol: psnr/sharpness/seams at h1, h16, h64."""
    ctx = world.model.config.context
    start, max_h = ctx + 20, max(HORIZONS)
    gen: dict[int, list[np.ndarray]] = {h: [] for h in HORIZONS}
    true: dict[int, list[np.ndarray]] = {h: [] for h in HORIZONS}
    copy: dict[int, list[np.ndarray]] = {h: [] for h in HORIZONS}
    for i in range(episodes):
        ep = agent_episode(HELDOUT_SEED_BASE + i, start + max_h)
        frames, _ = rollout(world, ep, start, max_h)
        for h in HORIZONS:
            gen[h].append(frames[h - 1])
            true[h].append(ep.frames[start + h - 1])
            copy[h].append(ep.frames[start - 1])
    out: dict = {}
    for h in HORIZONS:
        g, t, c = np.stack(gen[h]), np.stack(true[h]), np.stack(copy[h])
        out[f"psnr_h{h}"] = pooled_psnr(g, t)
        out[f"copy_last_psnr_h{h}"] = pooled_psnr(c, t)
        out[f"sharpness_h{h}"] = sharpness_ratio(g, t)
        out[f"seam_ratio_h{h}"] = seam_ratio(g)
    out["seam_ratio_sim"] = seam_ratio(np.stack(true[64]))
    return out


def long_play(world: World, runs: int = 2, frames: int = 2000, sheet: Path | None = None) -> dict:
    """Walking rollouts of `frames` frames: brightness drift, sharpness and seams over time."""
    ctx = world.model.config.context
    drift, ms, rows = [], [], []
    marks: dict[int, dict[str, list]] = {s: {"gen": [], "sim": []} for s in LONG_MARKS_S}
    for k in range(runs):
        seed = LONG_SEED_BASE + k
        spec = WorldSpec(seed, THEME_NAMES[k % len(THEME_NAMES)], 128)
        ep = simulate(spec, walking_inputs(ctx + frames, seed))
        gen, frame_ms = rollout(world, ep, ctx, frames)
        truth = ep.frames[ctx:]
        drift.append(brightness_drift(gen, truth))
        ms.append(frame_ms)
        picks = []
        for s in LONG_MARKS_S:
            lo = min(s * 20, frames - 20)
            marks[s]["gen"].append(gen[lo : lo + 20])
            marks[s]["sim"].append(truth[lo : lo + 20])
            picks.append(lo)
        rows += [truth[picks], gen[picks]]
    out: dict = {
        "brightness_drift": float(np.mean(drift)),
        "brightness_drift_runs": [round(d, 4) for d in drift],
        "gen_ms_per_frame": float(np.mean(ms)),
    }
    for s in LONG_MARKS_S:
        g, t = np.concatenate(marks[s]["gen"]), np.concatenate(marks[s]["sim"])
        out[f"long_sharpness_{s}s"] = sharpness_ratio(g, t)
        out[f"long_seam_{s}s"] = seam_ratio(g)
    if sheet is not None:
        image_grid(sheet, rows)
    return out


def theme_sheets(
    world: World,
    out: Path,
    seconds: int = 60,
    every_s: int = 10,
    prompts: dict[int, str] | None = None,
) -> list[Path]:
    """Per theme, a scripted session (walk, turn, idle, repeated): one frame every `every_s`
    seconds, simulator row above model row. With `prompts` (frame of the session: sentence)
    the player also types those, and the sheets are named prompts_60s_THEME.png."""
    ctx = world.model.config.context
    frames = seconds * 20 + 1
    typed = {ctx + t: text for t, text in (prompts or {}).items()}
    name = "prompts_60s" if prompts else "contact_60s"
    paths = []
    for k, theme in enumerate(THEME_NAMES):
        spec = WorldSpec(LONG_SEED_BASE + 100 + k, theme, 128)
        ep = simulate(spec, scripted_inputs(ctx + frames, typed))
        gen, _ = rollout(world, ep, ctx, frames)
        picks = np.arange(0, frames, every_s * 20)
        path = out / f"{name}_{theme}.png"
        image_grid(path, [ep.frames[ctx:][picks], gen[picks]])
        paths.append(path)
    return paths


def measure(
    weights: str | Path | None,
    out: str | Path,
    project: bool | None = None,
    episodes: int = 10,
    long_runs: int = 2,
    long_frames: int = 2000,
    text_table: str | Path | None = None,
) -> dict:
    """All of the above for one set of weights (episodes=0: the long rollouts only); writes
    measure.json and long_play.png."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    world = World.load(weights)
    if text_table is not None:  # the agent types training paraphrases only: all in the table
        from .latents import TableText

        world.text = TableText(text_table)
    if project is not None:
        world.model.config.project_context = project
    t0 = time.time()
    result = {
        "weights": str(weights or "engine/weights"),
        "project_context": world.model.config.project_context,
        **(fidelity(world, episodes) if episodes else {}),
        **long_play(world, long_runs, long_frames, out / "long_play.png"),
    }
    result["seconds"] = round(time.time() - t0, 1)
    result = {k: round(v, 4) if isinstance(v, float) else v for k, v in result.items()}
    (out / "measure.json").write_text(json.dumps(result, indent=1))
    return result
