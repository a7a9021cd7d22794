"""Picture-quality measurements of a world model against the simulator, for deciding by numbers.

    python -m engine.train measure --weights DIR --out runs/measure/NAME [--project]

The eval's picture figures without its judges, from the eval's own episodes and player
(`engine.eval.episodes.ModelPlayer`, the product's runtime API), so a figure here is the
eval's figure on the same cases. Fidelity: the eval's long open-loop rollouts (held-out seeds
from 1,000,000, random play, primed with the truth, then 64 frames of the model's own
output): pooled PSNR at h1/h16/h64 next to copy-last-frame, sharpness (Laplacian variance
ratio) and the tile-seam ratio at h16/h64. Long play: the eval's 2,000-frame walks for
brightness_drift, flicker (frame-to-frame change against the simulator's) and for how
sharpness and seams evolve at 0/10/30/60/90 s, with a contact
sheet (simulator row above model row) and the generation time per frame. Turns: the eval's
full turns in place (loop closure, and the half-turn view against the simulator's).
"""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path

import numpy as np

from engine.data.layout import HELDOUT_SEED_BASE
from engine.eval.episodes import PRIME_FRAMES, ModelPlayer, SimEpisode, agent_episode
from engine.eval.metrics import (
    brightness_drift,
    colour_spread_ratio,
    flicker_ratio,
    pooled_psnr,
    seam_ratio,
    sharpness_ratio,
)
from engine.eval.protocols import walk_episode
from engine.eval.run import FIDELITY_FRAMES, FIDELITY_START, HORIZONS, loop_closure
from engine.runtime.session import World
from engine.sim import FrameInputs, WorldSpec
from engine.sim.themes import THEME_NAMES
from engine.spec import KEY_BITS, WALK_SPEED

from .plots import image_grid

SHEET_SEED_BASE = HELDOUT_SEED_BASE + 900
STOPPED_STEP = 0.8  # a forward step that moved the player less than this share of a step stopped
LONG_MARKS_S = (0, 10, 30, 60, 90)  # where the long rollouts are sampled (seconds)


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


def fidelity(player: ModelPlayer, episodes: int = 10) -> dict:
    """The eval's long open-loop rollouts: psnr/sharpness/seams at h1, h16, h64."""
    max_h = max(HORIZONS)
    gen: dict[int, list[np.ndarray]] = {h: [] for h in HORIZONS}
    true: dict[int, list[np.ndarray]] = {h: [] for h in HORIZONS}
    copy: dict[int, list[np.ndarray]] = {h: [] for h in HORIZONS}
    for i in range(episodes):
        ep = agent_episode(HELDOUT_SEED_BASE + i, FIDELITY_FRAMES)
        frames, _ = player.rollout(ep, FIDELITY_START, max_h, seed=i)
        for h in HORIZONS:
            gen[h].append(frames[h - 1])
            true[h].append(ep.frames[FIDELITY_START + h - 1])
            copy[h].append(ep.frames[FIDELITY_START - 1])
    out: dict = {}
    for h in HORIZONS:
        g, t, c = np.stack(gen[h]), np.stack(true[h]), np.stack(copy[h])
        out[f"psnr_h{h}"] = pooled_psnr(g, t)
        out[f"copy_last_psnr_h{h}"] = pooled_psnr(c, t)
        out[f"sharpness_h{h}"] = sharpness_ratio(g, t)
        out[f"seam_ratio_h{h}"] = seam_ratio(g)
    out["seam_ratio_sim"] = seam_ratio(np.stack(true[64]))
    return out


def long_play(
    player: ModelPlayer, runs: int = 2, frames: int = 2000, sheet: Path | None = None
) -> dict:
    """The eval's walks of `frames` frames: brightness drift, sharpness and seams over time."""
    drift, flicker, ms, rows = [], [], [], []
    marks: dict[int, dict[str, list]] = {s: {"gen": [], "sim": []} for s in LONG_MARKS_S}
    for k in range(runs):
        ep = walk_episode(k, PRIME_FRAMES + frames)
        t0 = time.perf_counter()
        gen, _ = player.rollout(ep, PRIME_FRAMES, frames, seed=k)
        ms.append((time.perf_counter() - t0) * 1000 / frames)
        truth = ep.frames[PRIME_FRAMES:]
        drift.append(brightness_drift(gen, truth))
        flicker.append(flicker_ratio(gen, truth))
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
        "flicker_ratio": float(np.mean(flicker)),
        "gen_ms_per_frame": float(np.mean(ms)),
    }
    for s in LONG_MARKS_S:
        g, t = np.concatenate(marks[s]["gen"]), np.concatenate(marks[s]["sim"])
        out[f"long_sharpness_{s}s"] = sharpness_ratio(g, t)
        out[f"long_seam_{s}s"] = seam_ratio(g)
    if sheet is not None:
        image_grid(sheet, rows)
    return out


def stopped_share(ep: SimEpisode, start: int = 0) -> float:
    """Of the frames from `start` whose keys step forward, the share in which the simulator's
    player was stopped by a tree or the water (or slid along it): moved less than
    `STOPPED_STEP` of a step. A session knows nothing of collisions and walks on there."""
    lab = ep.labels[max(start - 1, 0) :]
    forward = (lab["keys"][1:] & KEY_BITS["W"]) > 0
    if not forward.any():
        return 0.0

    def moved(axis: str) -> np.ndarray:
        d = np.diff(lab[axis].astype(np.float64))
        return (d + 128.0) % 256.0 - 128.0  # the map wraps every 256 cells

    step = np.hypot(moved("pose_x"), moved("pose_y"))
    return float((step[forward] < STOPPED_STEP * WALK_SPEED).mean())


def sheet_figures(gen: np.ndarray, truth: np.ndarray, ep: SimEpisode, start: int) -> dict:
    """A contact-sheet session in numbers, every frame, not only the sheet's: its brightness
    drift against the simulator, and over its second half the colour spread and sharpness
    ratios (toward 0 when the picture dissolves into one colour), next to the share of
    forward steps the simulator's player was stopped at."""
    late = slice(len(gen) // 2, None)
    return {
        "brightness_drift": round(brightness_drift(gen, truth), 4),
        "colour_spread_late": round(colour_spread_ratio(gen[late], truth[late]), 3),
        "sharpness_late": round(sharpness_ratio(gen[late], truth[late]), 3),
        "sim_stopped_share": round(stopped_share(ep, start), 3),
    }


def theme_sheets(
    world: World,
    out: Path,
    seconds: int = 60,
    every_s: int = 10,
    prompts: dict[int, str] | None = None,
    around: bool = False,
) -> list[Path]:
    """Per theme, a scripted session (walk, turn, idle, repeated): one frame every `every_s`
    seconds, simulator row above model row. With `prompts` (frame of the session: sentence)
    the player also types those, and the sheets are named prompts_60s_THEME.png. With
    `around` the session also knows the rest of a full turn from its start (`ModelPlayer`).
    The sessions' `sheet_figures`, per theme and their means, go to NAME_figures.json, the
    last path returned."""
    player = ModelPlayer(world, around)
    frames = seconds * 20 + 1
    typed = {PRIME_FRAMES + t: text for t, text in (prompts or {}).items()}
    name = "prompts_60s" if prompts else "contact_60s"
    paths, figures = [], {}
    for k, theme in enumerate(THEME_NAMES):
        spec = WorldSpec(SHEET_SEED_BASE + k, theme, 128)
        ep = SimEpisode(spec, scripted_inputs(PRIME_FRAMES + frames, typed)).simulate()
        gen, _ = player.rollout(ep, PRIME_FRAMES, frames)
        truth = ep.frames[PRIME_FRAMES:]
        picks = np.arange(0, frames, every_s * 20)
        path = out / f"{name}_{theme}.png"
        image_grid(path, [truth[picks], gen[picks]])
        paths.append(path)
        figures[theme] = sheet_figures(gen, truth, ep, PRIME_FRAMES)
    keys = next(iter(figures.values())).keys()
    mean = {key: round(float(np.mean([f[key] for f in figures.values()])), 4) for key in keys}
    path = out / f"{name}_figures.json"
    path.write_text(json.dumps({"mean": mean, "themes": figures}, indent=1))
    return [*paths, path]


def measure(
    weights: str | Path | None,
    out: str | Path,
    project: bool | None = None,
    episodes: int = 10,
    long_runs: int = 2,
    long_frames: int = 2000,
    text_table: str | Path | None = None,
    around: bool = False,
    turns: int = 6,
) -> dict:
    """All of the above for one set of weights (episodes=0: the long rollouts only); writes
    measure.json and long_play.png. With `around` every session also knows the rest of a
    full turn from where its priming ends, as a session opened from its theme's keyframes
    does."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    world = World.load(weights)
    if text_table is not None:  # the agent types training paraphrases only: all in the table
        from .latents import TableText

        world.text = TableText(text_table)
    if project is not None:
        world.model.config.project_context = project
    player = ModelPlayer(world, around)
    t0 = time.time()
    result = {
        "weights": str(weights or "engine/weights"),
        "project_context": world.model.config.project_context,
        "around": around,
        **(fidelity(player, episodes) if episodes else {}),
        **long_play(player, long_runs, long_frames, out / "long_play.png"),
        **(loop_closure(player, turns, lambda _: None) if turns else {}),
    }
    result["seconds"] = round(time.time() - t0, 1)
    result = {k: round(v, 4) if isinstance(v, float) else v for k, v in result.items()}
    (out / "measure.json").write_text(json.dumps(result, indent=1))
    return result
