"""Evaluate the world model against the simulator on held-out seeds and prompts.

Open-loop: the model is primed with `context` true frames (through our encoder), then
generates every later frame from its own output with the same inputs the simulator got.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from engine.data.agent import RandomAgent, plan_episode
from engine.data.layout import HELDOUT_SEED_BASE
from engine.model.audio_ae import float_to_int16, int16_to_float
from engine.model.inputs import input_features
from engine.model.video_ae import frames_to_tensor, image_token, tensor_to_frames
from engine.runtime.rollout import LatentRollout
from engine.runtime.session import World
from engine.sim import FrameInputs, SimWorld, WorldSpec
from engine.sim.constants import CREATURE_MOODS, OBJECT_KINDS, TIMES_OF_DAY, WEATHERS
from engine.sim.prompts import heldout_paraphrases, sample_training_text
from engine.sim.reference import load_reference_image
from engine.sim.script import EpisodeScript
from engine.sim.themes import THEME_NAMES

from . import metrics as M
from .classifiers import (
    ACTIONS,
    AUDIO_EVENTS,
    JUDGES_VERSION,
    STATE_HEADS,
    Judges,
    action_class,
    audio_targets,
    load_judges,
    save_judges,
    to_input,
    train_judges,
)

CACHE = Path("artifacts/eval_cache")
HORIZONS = (1, 16, 64)
JUDGE_SEED_BASE = 2_000_000  # judges train on their own seeds: neither training nor eval ones
PROMPT_EVENTS = ("rain", "snow", "fog", "night", "dusk", "fire", "rainbow", "spawn_dragon",
                 "spawn_lantern", "spawn_tree")


@dataclass
class SimEpisode:
    spec: WorldSpec
    inputs: list[FrameInputs]
    frames: np.ndarray = field(default=None)  # (N, H, W, 3)
    audio: np.ndarray = field(default=None)  # (N, 800)
    labels: np.ndarray = field(default=None)

    def simulate(self) -> SimEpisode:
        world = SimWorld(self.spec)
        out = [world.step(inp) for inp in self.inputs]
        self.frames = np.stack([f.rgb for f in out])
        self.audio = np.stack([f.audio for f in out])
        self.labels = np.stack([f.labels for f in out])
        return self


# -- episodes ------------------------------------------------------------------------------------
def agent_episode(seed: int, frames: int, prompt: tuple[int, str] | None = None) -> SimEpisode:
    """Closed-loop random play (the data pipeline's agent); optionally a sentence (t, text)."""
    plan = plan_episode(seed, frames)
    spec = WorldSpec(seed, plan.theme, 128, plan.reference_image)
    world = SimWorld(spec)
    agent = RandomAgent(np.random.default_rng([seed, 2]))
    inputs, rgb, audio, labels = [], [], [], []
    last = None
    for t in range(frames):
        inp = agent.act(t, last)
        if prompt is not None and t == prompt[0]:
            inp.prompts = (prompt[1],)
        f = world.step(inp)
        inputs.append(inp)
        rgb.append(f.rgb)
        audio.append(f.audio)
        labels.append(f.labels)
        last = f.labels
    return SimEpisode(spec, inputs, np.stack(rgb), np.stack(audio), np.stack(labels))


def script_episode(script: EpisodeScript) -> SimEpisode:
    return SimEpisode(script.world_spec(128), script.frame_inputs()).simulate()


def prompt_episode(index: int, event: str, text: str, context: int, after: int) -> SimEpisode:
    seed = HELDOUT_SEED_BASE + 500 + index
    inputs = [FrameInputs() for _ in range(context + after)]
    inputs[context] = FrameInputs(prompts=(text,))
    return SimEpisode(WorldSpec(seed, THEME_NAMES[index % len(THEME_NAMES)]), inputs).simulate()


TURN_FRAMES = 105  # LEFT turns 0.06 rad a frame: 105 frames = 360 degrees and 1 more


def turn_episode(index: int, context: int) -> SimEpisode:
    """Stand still for the context and one more frame, turn a full circle in place, stand."""
    seed = HELDOUT_SEED_BASE + 700 + index
    inputs = [FrameInputs() for _ in range(context + 1)]
    inputs += [FrameInputs.hold("LEFT") for _ in range(TURN_FRAMES)] + [FrameInputs()]
    return SimEpisode(WorldSpec(seed, THEME_NAMES[index % len(THEME_NAMES)]), inputs).simulate()


def gift_episode(index: int, gift: str, text: str, after: int, wait: int = 300) -> SimEpisode:
    """Stand still until the creature asks (curious and close), give the gift, keep standing."""
    seed = HELDOUT_SEED_BASE + 900 + index
    spec = WorldSpec(seed, THEME_NAMES[index % len(THEME_NAMES)])
    world = SimWorld(spec)
    asked = wait - 1
    for t in range(wait):
        labels = world.step(FrameInputs()).labels
        if CREATURE_MOODS[labels["creature_mood"]] == "curious" and labels[
                "creature_distance"] < 6:
            asked = t
            break
    inputs = [FrameInputs() for _ in range(asked + 1)]
    inputs += [FrameInputs(prompts=(text,))] + [FrameInputs() for _ in range(after - 1)]
    return SimEpisode(spec, inputs).simulate()


# -- model rollouts ----------------------------------------------------------------------------
def frame_features(ep: SimEpisode, t: int) -> np.ndarray:
    r = ep.labels[t]
    return input_features(r["keys"], r["yaw_delta"], r["pitch_delta"], r["audio_loudness"],
                          r["audio_onset"], r["image_event"])


class Roller:
    def __init__(self, world: World, seed: int = 0):
        self.world = world
        self.seed = seed
        self.context = world.model.config.context

    @torch.inference_mode()
    def rollout(self, ep: SimEpisode, start: int, horizon: int) -> tuple[np.ndarray, np.ndarray]:
        """Prime with frames [start - context, start), generate [start, start + horizon)."""
        w = self.world
        image = None
        if ep.spec.reference_image is not None:
            image = image_token(w.video_ae, load_reference_image(ep.spec.reference_image))
        roll = LatentRollout(w.model, THEME_NAMES.index(ep.spec.theme), image, seed=self.seed)
        texts = self._texts(ep)
        for t in range(start):  # sentences typed before the rollout are in memory
            if t in texts and t < start - self.context:
                roll.add_text(texts[t])
        lo = max(0, start - self.context)
        z = w.video_ae.encode(frames_to_tensor(ep.frames[lo:start]))
        a = w.audio_ae.encode(int16_to_float(ep.audio[lo:start]))
        for i, t in enumerate(range(lo, start)):
            if t in texts:
                roll.add_text(texts[t])
            roll.observe(z[i], a[i], frame_features(ep, t), t, texts.get(t))
        zs, auds = [], []
        for t in range(start, start + horizon):
            zt, at = roll.generate(frame_features(ep, t), t, texts.get(t))
            zs.append(zt)
            auds.append(at)
        frames = np.concatenate([tensor_to_frames(w.video_ae.decode(torch.stack(zs[i:i + 32])))
                                 for i in range(0, len(zs), 32)])
        audio = float_to_int16(w.audio_ae.decode(torch.stack(auds)).reshape(-1))
        return frames, audio

    def _texts(self, ep: SimEpisode) -> dict[int, np.ndarray]:
        out = {}
        for t, inp in enumerate(ep.inputs):
            if inp.prompts:
                out[t] = self.world.text.encode([inp.prompts[0]])[0]
        return out


# -- judges ------------------------------------------------------------------------------------
def get_judges(cache: Path = CACHE, episodes: int = 24, frames: int = 200,
               log=print) -> Judges:
    path = cache / f"judges_v{JUDGES_VERSION}.pt"
    if path.exists():
        return load_judges(path)
    log("training the eval judges on sim data (once; cached in artifacts/eval_cache)")
    eps = [agent_episode(JUDGE_SEED_BASE + i, frames) for i in range(episodes)]
    # Events are rare in random play: add short episodes that each start with one event, so
    # every class the eval asks about (dusk, fire, rainbow, spawned objects, moods) is seen.
    events = (*PROMPT_EVENTS, "gift_leaf", "gift_dragon", "clear", "day", "spawn_crystal",
              "spawn_mushroom", "spawn_statue")
    for k in range(2 * len(events)):
        event = events[k % len(events)]
        text = sample_training_text(event, np.random.default_rng(k))
        eps.append(agent_episode(JUDGE_SEED_BASE + 1000 + k, frames // 2, (3, text)))
    starts = np.concatenate([np.arange(len(e.frames)) == 0 for e in eps])
    judges = train_judges(np.concatenate([e.frames for e in eps]),
                          np.concatenate([e.audio for e in eps]),
                          np.concatenate([e.labels for e in eps]), starts)
    save_judges(path, judges)
    return judges


# -- the evaluation ----------------------------------------------------------------------------
def evaluate(world: World, episodes: list[SimEpisode] | None = None, fidelity_episodes: int = 10,
             gift_after: int = 400, log=print) -> dict:
    t0 = time.time()
    judges = get_judges(log=log)  # trains (with autograd) on the first run only
    with torch.inference_mode():
        out = _evaluate(world, judges, episodes, fidelity_episodes, gift_after, log)
    out["seconds"] = round(time.time() - t0, 1)
    return out


def _evaluate(world: World, judges: Judges, episodes: list[SimEpisode] | None,
              fidelity_episodes: int, gift_after: int, log) -> dict:
    roller = Roller(world)
    ctx = roller.context
    max_h = max(HORIZONS)
    if episodes is None:
        episodes = [agent_episode(HELDOUT_SEED_BASE + i, ctx + 20 + max_h)
                    for i in range(fidelity_episodes)]
    out: dict = {}

    # Fidelity: open-loop rollouts from `start` for up to 64 frames.
    log(f"fidelity rollouts on {len(episodes)} episodes")
    gen_h = {h: [] for h in HORIZONS}
    true_h = {h: [] for h in HORIZONS}
    copy_h = {h: [] for h in HORIZONS}
    idm_gen = idm_sim = idm_n = 0
    audio_gen_acc, audio_sim_acc, offsets = [], [], []
    onset_at_step = onset_elsewhere = n_step = n_other = 0
    gen16, true16 = [], []
    for ep in episodes:
        start = min(ctx + 20, len(ep.frames) - 1)
        horizon = min(max_h, len(ep.frames) - start)
        frames, audio = roller.rollout(ep, start, horizon)
        truth = ep.frames[start:start + horizon]
        last_context = ep.frames[start - 1]
        for h in HORIZONS:
            if h <= horizon:
                gen_h[h].append(frames[h - 1])
                true_h[h].append(truth[h - 1])
                copy_h[h].append(last_context)
        if horizon >= 16:
            gen16.append(frames[15])
            true16.append(truth[15])
        # Action following on the first 16 generated frames.
        n = min(16, horizon)
        labels = ep.labels[start:start + n]
        target = torch.from_numpy(action_class(labels["keys"], labels["yaw_delta"]))
        before_gen = np.concatenate([ep.frames[start - 1:start], frames[:n - 1]])
        before_sim = ep.frames[start - 1:start + n - 1]
        idm_gen += int((judges.idm(to_input(before_gen), to_input(frames[:n])).argmax(1)
                        == target).sum())
        idm_sim += int((judges.idm(to_input(before_sim), to_input(truth[:n])).argmax(1)
                        == target).sum())
        idm_n += n
        # Audio events and A/V sync on the whole rollout.
        lab = ep.labels[start:start + horizon]
        tgt = torch.from_numpy(audio_targets(lab))
        gen_a = int16_to_float(audio.reshape(horizon, -1))
        sim_a = int16_to_float(ep.audio[start:start + horizon])
        audio_gen_acc.append(((judges.audio(gen_a) > 0).numpy(), tgt.numpy()))
        audio_sim_acc.append(((judges.audio(sim_a) > 0).numpy(), tgt.numpy()))
        offsets += M.av_offsets_ms(audio, np.nonzero(lab["step_onset"])[0])
        onset_frames = M.onset_samples(audio) // 800
        has_onset = np.zeros(horizon, bool)
        has_onset[onset_frames[onset_frames < horizon]] = True
        onset_at_step += int(has_onset[lab["step_onset"]].sum())
        onset_elsewhere += int(has_onset[~lab["step_onset"]].sum())
        n_step += int(lab["step_onset"].sum())
        n_other += int((~lab["step_onset"]).sum())
    for h in HORIZONS:
        if gen_h[h]:
            out[f"psnr_h{h}"] = M.pooled_psnr(np.stack(gen_h[h]), np.stack(true_h[h]))
            out[f"copy_last_psnr_h{h}"] = M.pooled_psnr(np.stack(copy_h[h]), np.stack(true_h[h]))
    if gen16:
        g16, t16 = np.stack(gen16), np.stack(true16)
        c16 = np.stack(copy_h[16])
        out["ssim_h16"] = M.ssim(g16, t16)
        out["copy_last_ssim_h16"] = M.ssim(c16, t16)
        out["sharpness_h16"] = M.sharpness_ratio(g16, t16)
        fg = judges.state.features(to_input(g16)).numpy()
        ft = judges.state.features(to_input(t16)).numpy()
        out["fd_h16"] = M.frechet_distance(fg, ft)
    all_true = np.concatenate([e.frames for e in episodes])
    recon = np.concatenate([tensor_to_frames(world.video_ae(frames_to_tensor(all_true[i:i + 64])))
                            for i in range(0, len(all_true), 64)])
    out["ae_recon_psnr"] = M.pooled_psnr(recon, all_true)
    out["ae_sharpness"] = M.sharpness_ratio(recon, all_true)  # the tokenizer's own blur
    all_audio = np.concatenate([e.audio for e in episodes])
    rec_a = world.audio_ae(int16_to_float(all_audio)).numpy()
    ref_a = int16_to_float(all_audio).numpy()
    out["audio_ae_snr_db"] = float(10 * np.log10(np.mean(ref_a ** 2)
                                                 / max(np.mean((rec_a - ref_a) ** 2), 1e-12)))
    out["action_following"] = (idm_gen / idm_n) / max(idm_sim / idm_n, 1e-9)
    out["action_acc_generated"] = idm_gen / idm_n
    out["action_acc_sim"] = idm_sim / idm_n
    gen_acc = M.balanced_accuracy(*(np.concatenate(x) for x in zip(*audio_gen_acc, strict=True)))
    sim_acc = M.balanced_accuracy(*(np.concatenate(x) for x in zip(*audio_sim_acc, strict=True)))
    out["audio_event_acc"] = _mean_present(gen_acc)
    out["audio_event_acc_sim"] = _mean_present(sim_acc)
    out["audio_event_acc_by_class"] = dict(zip(AUDIO_EVENTS, gen_acc, strict=True))
    out["audio_event_acc_sim_by_class"] = dict(zip(AUDIO_EVENTS, sim_acc, strict=True))
    out["av_sync_ms"] = float(np.median(offsets)) if offsets else None
    out["av_sync_pairs"] = len(offsets)
    # Control for av_sync: if onsets are as common on non-step frames, the sync is meaningless.
    out["onset_rate_step_frames"] = onset_at_step / max(n_step, 1)
    out["onset_rate_other_frames"] = onset_elsewhere / max(n_other, 1)

    # Prompt following on held-out paraphrases, judged 2 s after the prompt.
    log("prompt following (held-out paraphrases)")
    after = 40
    hits = sim_hits = n_prompts = 0
    per_event: dict[str, list[int]] = {}
    for i, event in enumerate(PROMPT_EVENTS):
        for j, text in enumerate(heldout_paraphrases(event)[:2]):
            ep = prompt_episode(i * 2 + j, event, text, ctx, after + 1)
            frames, _ = roller.rollout(ep, ctx, after + 1)
            got = _attribute_correct(judges, event, frames[-1], ep.labels[-1])
            sim_ok = _attribute_correct(judges, event, ep.frames[-1], ep.labels[-1])
            hits += got
            sim_hits += sim_ok
            n_prompts += 1
            per_event.setdefault(event, []).append(got)
    out["prompt_following"] = hits / n_prompts
    out["prompt_following_judge_on_sim"] = sim_hits / n_prompts
    out["prompt_following_by_event"] = {k: float(np.mean(v)) for k, v in per_event.items()}

    # Loop closure: the view before and after a full turn in place (the world must not forget
    # what is behind the player). The simulator's own score is the ceiling (a creature or a
    # flame may have moved meanwhile).
    log("loop closure: a full turn in place")
    closure, closure_sim = [], []
    for i in range(4):
        ep = turn_episode(i, ctx)
        frames, _ = roller.rollout(ep, ctx, len(ep.inputs) - ctx)
        closure.append(M.pooled_psnr(frames[-1:], frames[:1]))
        closure_sim.append(M.pooled_psnr(ep.frames[-1:], ep.frames[ctx:ctx + 1]))
    out["loop_closure_psnr"] = float(np.mean(closure))
    out["loop_closure_psnr_sim"] = float(np.mean(closure_sim))

    # Memory: the creature's mood 20 s after a leaf or a dragon.
    log("memory: creature reaction 20 s after a gift")
    mem_hits = mem_sim = 0
    drift = []
    gifts = [("gift_leaf", 0), ("gift_dragon", 0), ("gift_leaf", 1), ("gift_dragon", 1)]
    for i, (gift, k) in enumerate(gifts):
        text = heldout_paraphrases(gift)[k % len(heldout_paraphrases(gift))]
        ep = gift_episode(i, gift, text, gift_after)
        start = len(ep.inputs) - gift_after
        frames, _ = roller.rollout(ep, start, gift_after)
        truth_mood = int(ep.labels[-1]["creature_mood"])
        pred = int(judges.state(to_input(frames[-1:]))["creature_mood"].argmax(1))
        pred_sim = int(judges.state(to_input(ep.frames[-1:]))["creature_mood"].argmax(1))
        mem_hits += pred == truth_mood
        mem_sim += pred_sim == truth_mood
        drift.append(M.brightness_drift(frames, ep.frames[start:]))
    out["memory_gift"] = mem_hits / len(gifts)
    out["memory_gift_judge_on_sim"] = mem_sim / len(gifts)
    out[f"brightness_drift_{gift_after}"] = float(np.mean(drift))

    out["judge_accuracy_on_sim"] = judges.accuracy
    out["episodes"] = {"fidelity": len(episodes), "prompts": n_prompts, "gifts": len(gifts),
                       "seeds_from": HELDOUT_SEED_BASE}
    out["sampler_steps"] = world.model.config.sampler_steps
    return out


def _mean_present(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return float(np.mean(present)) if present else None


def _attribute_correct(judges: Judges, event: str, frame: np.ndarray, labels: np.void) -> int:
    """Does the judge read the attribute this event changes the same as the sim's label?"""
    out = judges.state(to_input(frame[None]))
    if event in WEATHERS:
        return int(int(out["weather"].argmax(1)) == int(labels["weather"]))
    if event in TIMES_OF_DAY:
        return int(int(out["time_of_day"].argmax(1)) == int(labels["time_of_day"]))
    if event in ("fire", "rainbow"):
        key = "fire_present" if event == "fire" else "rainbow"
        return int(int(out[key].argmax(1)) == int(labels[key]))
    kind = OBJECT_KINDS.index(event.removeprefix("spawn_"))
    truth = bool((int(labels["objects_in_view"]) >> kind) & 1)
    return int(bool(out["objects"][0, kind] > 0) == truth)


__all__ = ["ACTIONS", "STATE_HEADS", "evaluate", "get_judges"]
