"""Does the model read what is typed? A judge-free figure for a code model.

The prompt test asks a judge whether the world looks changed 2 s after a sentence; it needs
the judges (45 minutes to build) and mixes reading the sentence with drawing the change well.
This asks the network alone: teacher-forced on the prompt test's episodes (the true history
each frame, as the simulator made it), how much lower is its code cross-entropy on the true
frames after the sentence when it is told the sentence than when nothing was typed? Only the
cells whose true code differs from the frame before the sentence count: what stays as it was
is copied either way and would dilute the figure.

`text_reading_nats` (held-out wording) and `text_reading_training_nats` (training wording, the
same events): > 0 means the sentence helps predict what it changes; 0 means ignored. The
sentence goes through `World.encode_sentence` as a session's would (the sentence snap
included).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch
import torch.nn.functional as F

from engine.model.audio_ae import int16_to_float
from engine.model.conv_world import ConvWorldModel
from engine.model.inputs import input_features
from engine.model.latent_codes import nearest_codes
from engine.model.video_ae import frames_to_tensor
from engine.runtime.conv_rollout import ConvRollout
from engine.runtime.session import World
from engine.sim.themes import THEME_NAMES

from . import metrics as M
from .episodes import PRIME_FRAMES, SimEpisode
from .protocols import PromptCase, default_prompt_cases, prompt_episode, training_wording_cases

Log = Callable[[str], None]


def reads_text(world: World) -> bool:
    return isinstance(world.model, ConvWorldModel) and bool(world.model.config.codes)


def _codebook(world: World) -> torch.Tensor:
    codebook = world.model.codebook
    assert isinstance(codebook, torch.Tensor), "text reading needs a code model"
    return codebook


def _frame_inputs(ep: SimEpisode) -> list[np.ndarray]:
    """Each frame's input features as a session builds them from the episode's events."""
    feats = []
    for inp, label in zip(ep.inputs, ep.labels, strict=True):
        loud = min(float(label["audio_loudness"]), 1.0)
        onset = bool(label["audio_onset"])
        feats.append(input_features(inp.keys, inp.yaw, inp.pitch, loud, onset, False))
    return feats


def teacher_forced_losses(
    world: World, ep: SimEpisode, told: bool, seed: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """((F, S, S) code cross-entropy of every frame from the sentence's on, teacher-forced,
    told the episode's sentence or (told=False) with nothing typed; (T, S, S) true codes)."""
    z = world.video_ae.encode(frames_to_tensor(ep.frames))
    audio = world.audio_ae.encode(int16_to_float(ep.audio))
    codes = nearest_codes(z, _codebook(world))
    feats = _frame_inputs(ep)
    roll = world.new_rollout(THEME_NAMES.index(ep.spec.theme), seed=seed)
    assert isinstance(roll, ConvRollout), "text reading needs a code model"
    for t in range(PRIME_FRAMES):
        roll.observe(z[t], audio[t], feats[t], t)
    losses = []
    for t in range(PRIME_FRAMES, len(ep.frames)):
        text = None
        if told and t in ep.model_text:
            text = world.encode_sentence(ep.model_text[t])
        logits = roll.teacher_logits(z[t], audio[t], feats[t], t, text)
        losses.append(F.cross_entropy(logits, codes[t][None], reduction="none")[0])
    return torch.stack(losses), codes


@torch.inference_mode()
def case_gain(world: World, case: PromptCase, index: int) -> tuple[float, float, float] | None:
    """(nats gained by the sentence, cross-entropy told, share of cells changed) over the
    cells that change after the sentence; None where none change."""
    ep = prompt_episode(case, index)
    told, codes = teacher_forced_losses(world, ep, True, index)
    changed = codes[PRIME_FRAMES:] != codes[PRIME_FRAMES - 1]
    if not bool(changed.any()):
        return None
    untold, _ = teacher_forced_losses(world, ep, False, index)
    gain = (untold[changed] - told[changed]).mean()
    return float(gain), float(told[changed].mean()), float(changed.float().mean())


def _wording_figures(world: World, cases: list[PromptCase], progress: Log) -> dict:
    gains, told, shares, events = [], [], [], []
    for i, case in enumerate(cases):
        result = case_gain(world, case, i)
        if result is None:
            continue
        gains.append(result[0])
        told.append(result[1])
        shares.append(result[2])
        events.append(case.event)
        if (i + 1) % 8 == 0:
            progress(f"  text reading case {i + 1}/{len(cases)}")
    by_event = {
        e: float(np.mean([g for g, ev in zip(gains, events, strict=True) if ev == e]))
        for e in dict.fromkeys(events)
    }
    return {
        "nats": float(np.mean(gains)) if gains else None,
        "ci": M.bootstrap_ci(np.array(gains)),
        "ce_told": float(np.mean(told)) if told else None,
        "changed_share": float(np.mean(shares)) if shares else None,
        "by_event": by_event,
        "cases": len(gains),
    }


@torch.inference_mode()
def text_reading(world: World, progress: Log, per_event: int = 2) -> dict:
    """The text-reading figures (module docstring); empty for a model without codes."""
    if not reads_text(world):
        progress("text reading: skipped (not a code model)")
        return {}
    progress("text reading: teacher-forced prompt episodes, told vs nothing typed")
    heldout = _wording_figures(world, default_prompt_cases(per_event), progress)
    training = _wording_figures(world, training_wording_cases(per_event), progress)
    return {
        "text_reading_nats": heldout["nats"],
        "text_reading_ci": heldout["ci"],
        "text_reading_ce_told": heldout["ce_told"],
        "text_reading_changed_share": heldout["changed_share"],
        "text_reading_by_event": heldout["by_event"],
        "text_reading_cases": heldout["cases"],
        "text_reading_training_nats": training["nats"],
        "text_reading_training_ci": training["ci"],
        "text_reading_training_by_event": training["by_event"],
    }
