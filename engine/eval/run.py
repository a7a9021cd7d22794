"""Evaluate a world model against the simulator (DESIGN.md "Metrics"), section by section.

Every rollout goes through the public runtime API (episodes.ModelPlayer); every judged figure
comes with the same test on the simulator's own frames (`*_judge_on_sim`) and a bootstrap 95 %
interval over cases (`*_ci`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

from engine.data.layout import HELDOUT_SEED_BASE
from engine.model.audio_ae import int16_to_float
from engine.model.conv_world import ConvWorldModel
from engine.model.video_ae import frames_to_tensor, tensor_to_frames
from engine.runtime.session import World

from . import metrics as M
from .classifiers import (
    AUDIO_EVENTS,
    MOODS,
    STATE_HEADS,
    Judges,
    action_targets,
    audio_targets,
    cached_judges,
    judge_report,
    mood_targets,
)
from .episodes import PRIME_FRAMES, ModelPlayer, SimEpisode, agent_episode
from .judge_data import JUDGE_EVENTS, episode_events, judge_data
from .protocols import (
    GIFT_CHECKS,
    GIFT_REACT,
    TURN_KEY_FRAMES,
    PromptCase,
    default_prompt_cases,
    gift_cases,
    prompt_episode,
    prompt_target,
    recolour_moves,
    reference_cases,
    reference_walk,
    turn_episode,
    walk_episode,
    with_reference,
)
from .text_reading import text_reading

CACHE = Path("artifacts/eval_cache")
HORIZONS = (1, 16, 64)
FIDELITY_START = 28  # long rollouts start here (after PRIME_FRAMES of truth)
SHORT_STARTS = (100, 130, 160)  # three more 16-frame rollouts per episode (fd_h16's frames)
FIDELITY_FRAMES = 200
REVEAL_LEAD = 10  # gift test: the model generates from this many frames before the creature shows

Log = Callable[[str], None]


class Progress:
    def __init__(self, log: Log):
        self.log, self.t0 = log, time.time()

    def __call__(self, msg: str) -> None:
        self.log(f"[{time.time() - self.t0:6.1f} s] {msg}")


def evaluate(
    world: World,
    episodes: list[SimEpisode] | None = None,
    fidelity_episodes: int = 16,
    prompt_cases: list[PromptCase] | None = None,
    gifts_per_kind: int = 10,
    walks: int = 2,
    walk_frames: int = 2000,
    turns: int = 6,
    log: Log = print,
    on_section: Callable[[dict], None] | None = None,
) -> dict:
    """The full eval; `prompt_cases` replaces the built-in held-out paraphrases."""
    t0 = time.time()
    progress = Progress(log)
    judges = cached_judges(CACHE, progress)  # builds (with autograd) on the first run only
    out: dict = {}
    player = ModelPlayer(world)
    with torch.inference_mode():
        if episodes is None:
            progress(f"simulating {fidelity_episodes} held-out random-play episodes")
            episodes = [
                agent_episode(HELDOUT_SEED_BASE + i, FIDELITY_FRAMES)
                for i in range(fidelity_episodes)
            ]
        sections = (
            lambda: fidelity(player, judges, episodes, progress),
            lambda: prompt_following(
                player, judges, prompt_cases or default_prompt_cases(), progress
            ),
            lambda: memory_gift(player, judges, gifts_per_kind, progress),
            lambda: loop_closure(player, turns, progress),
            lambda: brightness(player, walks, walk_frames, progress),
            lambda: reference_recolour(player, progress),
            lambda: text_reading(world, progress),
            lambda: judge_accuracy(world, judges, progress),
        )
        for section in sections:
            out.update(section())
            if on_section is not None:  # e.g. keep what is measured if a long run is cut
                on_section(out)
    out["episodes"] = {
        "fidelity": len(episodes),
        "seeds_from": HELDOUT_SEED_BASE,
        "generated_frames": player.generated_frames,
    }
    out["seconds"] = round(time.time() - t0, 1)
    return out


def evaluate_prompts(world: World, cases: list[PromptCase], log: Log = print) -> dict:
    """Only the prompt test, on exactly `cases` (`--prompts FILE`)."""
    t0 = time.time()
    progress = Progress(log)
    judges = cached_judges(CACHE, progress)
    with torch.inference_mode():
        out = prompt_following(ModelPlayer(world), judges, cases, progress)
    out["judge_accuracy_on_sim"] = judges.accuracy
    out["seconds"] = round(time.time() - t0, 1)
    return out


def evaluate_reference(world: World, log: Log = print) -> dict:
    """Only the reference-image test (`--reference`; it needs no judges)."""
    t0 = time.time()
    with torch.inference_mode():
        out = reference_recolour(ModelPlayer(world), Progress(log))
    out["seconds"] = round(time.time() - t0, 1)
    return out


# -- fidelity, sharpness, FD, actions, audio ---------------------------------------------------
def fidelity(
    player: ModelPlayer, judges: Judges, episodes: list[SimEpisode], progress: Log
) -> dict:
    progress(f"fidelity: open-loop rollouts on {len(episodes)} episodes")
    by_h: dict[int, list] = {h: [] for h in HORIZONS}  # (generated, truth, last context)
    first16_gen, first16_true, long_gen, long_true = [], [], [], []
    idm_hits: list[tuple[int, int, int]] = []  # per rollout: generated hits, sim hits, scored
    audio_pred, audio_sim, audio_truth, sync_tracks, sync_sim = [], [], [], [], []
    for n, ep in enumerate(episodes):
        starts = [(FIDELITY_START, 64)] + [(s, 16) for s in SHORT_STARTS]
        for start, length in starts:
            horizon = min(length, len(ep.frames) - start)
            if horizon <= 0 or start < 1:
                continue
            frames, audio = player.rollout(ep, start, horizon, seed=n)
            truth = ep.frames[start : start + horizon]
            for h in HORIZONS:
                if h <= horizon:
                    by_h[h].append((frames[h - 1], truth[h - 1], ep.frames[start - 1]))
            first16_gen.append(frames[:16])
            first16_true.append(truth[:16])
            if length < 64:
                continue
            long_gen.append(frames)
            long_true.append(truth)
            labels, view = ep.labels[start : start + horizon], ep.view[start : start + horizon]
            first = np.zeros(horizon, bool)
            act = action_targets(labels, first)
            keep = act >= 0
            before_gen = np.concatenate([ep.frames[start - 1 : start], frames[:-1]])
            gen_read = judges.read_actions(before_gen, frames)
            sim_read = judges.read_actions(ep.frames[start - 1 : start + horizon - 1], truth)
            idm_hits.append(
                (
                    int((gen_read == act)[keep].sum()),
                    int((sim_read == act)[keep].sum()),
                    int(keep.sum()),
                )
            )
            audio_truth.append(audio_targets(labels, view["fire_gain"]))
            audio_pred.append(judges.read_audio(audio.reshape(horizon, -1)))
            audio_sim.append(judges.read_audio(ep.audio[start : start + horizon]))
            steps = np.nonzero(labels["step_onset"])[0]
            sync_tracks.append((int16_to_float(audio).numpy(), steps))
            sync_sim.append(
                (int16_to_float(ep.audio[start : start + horizon].reshape(-1)).numpy(), steps)
            )
        progress(f"  fidelity episode {n + 1}/{len(episodes)}")
    out = tokenizers(player.world, episodes)
    for h in HORIZONS:
        if by_h[h]:
            gen, true, copy = (np.stack(x) for x in zip(*by_h[h], strict=True))
            out[f"psnr_h{h}"] = M.pooled_psnr(gen, true)
            out[f"copy_last_psnr_h{h}"] = M.pooled_psnr(copy, true)
            if h == 16:
                out["ssim_h16"] = M.ssim(gen, true)
                out["copy_last_ssim_h16"] = M.ssim(copy, true)
                out["sharpness_h16"] = M.sharpness_ratio(gen, true)
            if h == 64:
                out["sharpness_h64"] = M.sharpness_ratio(gen, true)
                out["seam_ratio_h64"] = M.seam_ratio(gen)
                out["seam_ratio_sim"] = M.seam_ratio(true)
    g16, t16 = np.concatenate(first16_gen), np.concatenate(first16_true)
    out["fd_h16"] = M.frechet_distance(judges.features(g16), judges.features(t16))
    out["fd_h16_frames"] = len(g16)
    if long_gen:
        g64, t64 = np.concatenate(long_gen), np.concatenate(long_true)
        true_features = judges.features(t64)
        out["fd_h64"] = M.frechet_distance(judges.features(g64), true_features)
        out["fd_h64_frames"] = len(g64)
        half = len(t64) // 2  # the same distance between two halves of the truth: its noise
        out["fd_sim_halves"] = M.frechet_distance(true_features[:half], true_features[half:])
    if idm_hits:
        hits = np.array(idm_hits, np.float64)
        out.update(_action_following(hits))
        truth = np.concatenate(audio_truth)
        gen_acc = M.balanced_accuracy_masked(np.concatenate(audio_pred), truth)
        sim_acc = M.balanced_accuracy_masked(np.concatenate(audio_sim), truth)
        out["audio_event_acc"] = _mean_present(gen_acc)
        out["audio_event_acc_judge_on_sim"] = _mean_present(sim_acc)
        out["audio_event_acc_by_class"] = dict(zip(AUDIO_EVENTS, gen_acc, strict=True))
        out["audio_event_acc_judge_on_sim_by_class"] = dict(zip(AUDIO_EVENTS, sim_acc, strict=True))
        per = [(p, t) for p, t in zip(audio_pred, audio_truth, strict=True)]
        out["audio_event_acc_ci"] = M.bootstrap_ci(
            np.arange(len(per)),
            lambda idx: _mean_present(
                M.balanced_accuracy_masked(
                    np.concatenate([per[i][0] for i in idx]),
                    np.concatenate([per[i][1] for i in idx]),
                )
            ),
        )
        sync = M.av_sync(sync_tracks)
        sync_truth = M.av_sync(sync_sim)
        out["av_sync_ms"] = sync["lag_ms"]
        out["av_sync"] = sync
        out["av_sync_sim"] = sync_truth
    return out


def through_tokenizer(world: World, frames: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
    """(N, H, W, 3) true frames encoded and decoded: (continuous latents, latents snapped to
    the codebook, or None for a model without codes), with the particle layer's rain or snow
    drawn over both where the weights have one. The coded frames are the most a perfect code
    prediction could show."""
    model = world.model
    coder = model if isinstance(model, ConvWorldModel) and model.config.codes else None
    recon, coded = [], []
    noise = torch.Generator().manual_seed(0)
    for i in range(0, len(frames), 64):
        pictures = frames_to_tensor(frames[i : i + 64])
        z = world.video_ae.encode(pictures)
        shown = [world.video_ae.decode(z)] + (
            [world.video_ae.decode(coder.snap(z))] if coder else []
        )
        if world.particles is not None:  # the particle layer carries what the latent cannot
            codes = world.particles.nearest(world.particles.read(pictures))
            shown = [world.particles.composite(p, codes, noise) for p in shown]
        recon.append(tensor_to_frames(shown[0]))
        if coder is not None:
            coded.append(tensor_to_frames(shown[1]))
    return np.concatenate(recon), (np.concatenate(coded) if coded else None)


def tokenizers(world: World, episodes: list[SimEpisode]) -> dict:
    """The autoencoders alone on the episodes' true frames: the ceiling any rollout inherits.
    For a code model also `code_recon_psnr` (psnr_h1 reads against it)."""
    truth = np.concatenate([e.frames for e in episodes])[::2]
    recon, coded = through_tokenizer(world, truth)
    sound = int16_to_float(np.concatenate([e.audio for e in episodes]))
    heard = world.audio_ae(sound).numpy()
    ref = sound.numpy()
    out = {
        "ae_recon_psnr": M.pooled_psnr(recon, truth),
        "ae_sharpness": M.sharpness_ratio(recon, truth),
        "ae_seam_ratio": M.seam_ratio(recon),
        "audio_ae_snr_db": float(
            10 * np.log10(np.mean(ref**2) / max(np.mean((heard - ref) ** 2), 1e-12))
        ),
    }
    if coded is not None:
        out["code_recon_psnr"] = M.pooled_psnr(coded, truth)
        out["code_sharpness"] = M.sharpness_ratio(coded, truth)
    return out


def _action_following(hits: np.ndarray) -> dict:
    def ratio(rows: np.ndarray) -> float:
        gen, sim, n = hits[rows].sum(0)
        return float((gen / max(n, 1)) / max(sim / max(n, 1), 1e-9))

    gen, sim, n = hits.sum(0)
    rows = np.arange(len(hits))
    return {
        "action_following": ratio(rows),
        "action_following_ci": M.bootstrap_ci(rows, ratio),
        "action_acc_generated": gen / max(n, 1),
        "action_acc_judge_on_sim": sim / max(n, 1),
        "action_pairs": int(n),
    }


def _mean_present(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return float(np.mean(present)) if present else None


# -- prompts ---------------------------------------------------------------------------------
TRUSTED_JUDGE = 0.9  # held-out balanced accuracy a head needs for its cases to be scored


def untrusted_heads(judges: Judges) -> set[str]:
    """State heads whose held-out balanced accuracy is below TRUSTED_JUDGE (or unknown)."""
    return {
        head
        for head in STATE_HEADS
        if (judges.accuracy.get(f"state_{head}", {}).get("balanced_accuracy") or 0.0)
        < TRUSTED_JUDGE
    }


def prompt_following(
    player: ModelPlayer, judges: Judges, cases: list[PromptCase], progress: Log
) -> dict:
    """`prompt_following_kept_from_truth` asks the other half of the question: once the
    picture shows the state (the simulator's frames up to the sentence), does the model keep
    it for the 2 s? Cases whose event is read by an untrusted head (a coin flip on the
    simulator's own frames) are run for nobody: they are listed in `prompt_cases_unjudged`
    and left out of every figure, so a figure never averages in a judge that cannot see what
    it scores."""
    untrusted = untrusted_heads(judges)
    skipped = [case for case in cases if prompt_target(case.event)[0] in untrusted]
    cases = [case for case in cases if case not in skipped]
    progress(f"prompt following: {len(cases)} cases, judged 2 s after the sentence")
    hit_list: list[bool] = []
    sim_list: list[bool] = []
    control_hits: list[bool] = []
    kept_list: list[bool] = []
    events: list[str] = []
    judged_truth: list[np.ndarray] = []
    targets: list[tuple[str, int]] = []
    for i, case in enumerate(cases):
        ep = prompt_episode(case, i)
        control = prompt_episode(case, i, with_prompt=False)
        head, target = prompt_target(case.event)
        frames, _ = player.rollout(ep, PRIME_FRAMES, len(ep.inputs) - PRIME_FRAMES, seed=i)
        hit_list.append(judges.read_state(frames[-1:])[head][0] == target)
        sim_list.append(judges.read_state(ep.frames[-1:])[head][0] == target)
        judged_truth.append(ep.frames[-1])
        targets.append((head, target))
        control_hits.append(judges.read_state(control.frames[-1:])[head][0] == target)
        # the same frame when the history already shows the state (primed with the truth up
        # to the sentence's own frame) and the model is never told the sentence
        kept, _ = player.rollout(ep, PRIME_FRAMES + 1, len(ep.inputs) - PRIME_FRAMES - 1, seed=i)
        kept_list.append(judges.read_state(kept[-1:])[head][0] == target)
        events.append(case.event)
        if (i + 1) % 5 == 0:
            progress(f"  prompt case {i + 1}/{len(cases)}")
    hits, sim_hits = np.array(hit_list, float), np.array(sim_list, float)
    kept_hits = np.array(kept_list, float)

    def by_event(values: np.ndarray) -> dict[str, float]:
        return {
            e: float(np.mean([v for v, ev in zip(values, events, strict=True) if ev == e]))
            for e in dict.fromkeys(events)
        }

    ceilings = (
        _prompt_ceilings(player.world, judges, judged_truth, targets, by_event) if cases else {}
    )
    unjudged: dict[str, int] = {}
    for case in skipped:
        unjudged[case.event] = unjudged.get(case.event, 0) + 1
    return {
        "prompt_following": float(hits.mean()) if len(hits) else None,
        "prompt_following_ci": M.bootstrap_ci(hits),
        "prompt_following_judge_on_sim": float(sim_hits.mean()) if len(sim_hits) else None,
        "prompt_following_judge_on_sim_ci": M.bootstrap_ci(sim_hits),
        "prompt_following_no_prompt_control_on_sim": (
            float(np.mean(control_hits)) if control_hits else None
        ),
        "prompt_following_kept_from_truth": float(kept_hits.mean()) if len(kept_hits) else None,
        "prompt_following_kept_from_truth_ci": M.bootstrap_ci(kept_hits),
        "prompt_following_by_event": by_event(hits),
        "prompt_following_judge_on_sim_by_event": by_event(sim_hits),
        **ceilings,
        "prompt_cases": len(cases),
        "prompt_cases_unjudged": unjudged,
    }


def _prompt_ceilings(
    world: World,
    judges: Judges,
    truth: list[np.ndarray],
    targets: list[tuple[str, int]],
    by_event: Callable[[np.ndarray], dict[str, float]],
) -> dict:
    """The judge on the simulator's judged frames after the tokenizer (`_judge_on_ae`) and
    through the codebook (`_judge_on_codes`): how much of each asked-for state the picture
    can show at all, before any generator is involved."""
    recon, coded = through_tokenizer(world, np.stack(truth))
    out: dict[str, float | dict[str, float]] = {}
    for name, frames in (("ae", recon), ("codes", coded)):
        if frames is None:
            continue
        reads = judges.read_state(frames)
        hits = np.array([reads[h][i] == t for i, (h, t) in enumerate(targets)], float)
        out[f"prompt_following_judge_on_{name}"] = float(hits.mean())
        out[f"prompt_following_judge_on_{name}_by_event"] = by_event(hits)
    return out


# -- memory ----------------------------------------------------------------------------------
def memory_gift(player: ModelPlayer, judges: Judges, per_kind: int, progress: Log) -> dict:
    progress(f"memory: {per_kind} leaf and {per_kind} dragon gifts, judged at 20 s and 60 s")
    cases = gift_cases(per_kind)
    hits: dict[int, list] = {a: [] for a in GIFT_CHECKS}
    sim_hits: dict[int, list] = {a: [] for a in GIFT_CHECKS}
    for n, (_, g) in enumerate(cases):
        ep = g.episode
        session = player.start(ep, g.gift_frame, seed=n)
        player.play(session, ep, g.gift_frame, g.gift_frame + GIFT_REACT)
        truth = mood_targets(ep.labels, ep.view)
        for after, check, back, views in zip(
            GIFT_CHECKS, g.checks, g.returns, g.views, strict=True
        ):
            # The wait and the first part of the way back are the simulator's frames, with the
            # creature out of view; the model draws from REVEAL_LEAD frames before it shows.
            shown = np.nonzero(ep.view["creature_px"][back : check + 1] > 0)[0]
            begin = max(back, back + int(shown[0]) - REVEAL_LEAD) if len(shown) else back
            player.prime(session, ep, begin)
            frames, _ = player.play(session, ep, begin, check + 1)
            boxes = ep.view["creature_box"][views]
            hits[after].append(
                judges.vote_mood(frames[np.array(views) - begin], boxes) == truth[check]
            )
            sim_hits[after].append(judges.vote_mood(ep.frames[views], boxes) == truth[check])
        progress(f"  gift case {n + 1}/{len(cases)}")
    out: dict = {"memory_gift_cases": len(cases), "memory_gift_moods": list(MOODS)}
    for after in GIFT_CHECKS:
        name = f"memory_gift_{after // 20}s"
        h, s = np.array(hits[after], float), np.array(sim_hits[after], float)
        out[name] = float(h.mean()) if len(h) else None
        out[f"{name}_ci"] = M.bootstrap_ci(h)
        out[f"{name}_judge_on_sim"] = float(s.mean()) if len(s) else None
        out[f"{name}_judge_on_sim_ci"] = M.bootstrap_ci(s)
    both = np.concatenate([sim_hits[a] for a in GIFT_CHECKS]).astype(float)
    out["memory_gift_judge_on_sim"] = float(both.mean()) if len(both) else None
    return out


# -- loop closure ----------------------------------------------------------------------------
def loop_closure(player: ModelPlayer, turns: int, progress: Log) -> dict:
    progress(f"loop closure: {turns} exact full turns in place")
    rows = []
    for i in range(turns):
        ep = turn_episode(i)
        frames, _ = player.rollout(ep, PRIME_FRAMES, len(ep.inputs) - PRIME_FRAMES, seed=i)
        rows.append(
            M.loop_closure_case(
                frames, ep.frames[PRIME_FRAMES:], ep.frames[PRIME_FRAMES - 1], TURN_KEY_FRAMES // 2
            )
        )
    return M.loop_closure_summary(rows)


# -- brightness drift ------------------------------------------------------------------------
def brightness(player: ModelPlayer, walks: int, frames: int, progress: Log) -> dict:
    progress(f"brightness drift: {walks} walking rollouts of {frames} frames")
    drift = []
    for i in range(walks):
        ep = walk_episode(i, frames + PRIME_FRAMES)
        gen, _ = player.rollout(ep, PRIME_FRAMES, frames, seed=i)
        drift.append(M.brightness_drift(gen, ep.frames[PRIME_FRAMES:]))
        progress(f"  walk {i + 1}/{walks}: drift {drift[-1]:.3f}")
    return {
        "brightness_drift": float(np.mean(drift)),
        "brightness_drift_rollouts": drift,
        "brightness_drift_frames": frames,
    }


# -- reference image -------------------------------------------------------------------------
def reference_recolour(player: ModelPlayer, progress: Log) -> dict:
    """A reference image given at the start: how far the sky and ground bands move toward its
    colours against the same session without it, for the model (sessions opened as the
    product opens them, from the theme's keyframes) and for the simulator (which recolours
    from frame 0). A theme's palettes share one world and one control session."""
    cases = reference_cases()
    worlds = len({(case.theme, case.seed) for case in cases})
    progress(f"reference image: {len(cases)} palettes in {worlds} walks, and each walk without")
    controls: dict[tuple[str, int], tuple[SimEpisode, np.ndarray]] = {}
    model: list[dict[str, float]] = []
    sim: list[dict[str, float]] = []
    for n, case in enumerate(cases):
        key = (case.theme, case.seed)
        if key not in controls:
            plain = reference_walk(case)
            frames, _ = player.play(player.open(plain, case.seed), plain, 0, len(plain.inputs))
            controls[key] = (plain, frames)
        plain, plain_frames = controls[key]
        ep = with_reference(plain, case.palette)
        frames, _ = player.play(player.open(ep, case.seed), ep, 0, len(ep.inputs))
        model.append(recolour_moves(frames, plain_frames, case.palette))
        sim.append(recolour_moves(ep.frames, plain.frames, case.palette))
        progress(
            f"  reference case {n + 1}/{len(cases)} ({case.theme}): model "
            + ", ".join(f"{b} {v:.2f}" for b, v in model[-1].items())
            + "; simulator "
            + ", ".join(f"{b} {v:.2f}" for b, v in sim[-1].items())
        )
    return M.reference_recolour_summary(model, sim)


# -- the judges themselves -------------------------------------------------------------------
def judge_accuracy(
    world: World, judges: Judges, progress: Log, episodes_per_event: int = 1
) -> dict:
    """The judges' held-out figures (from training) and the same on the autoencoder's
    reconstructions of one held-out episode per event: blur alone must not flip a verdict."""
    progress("judges on autoencoder reconstructions of held-out frames")
    data = judge_data(CACHE, progress)
    test = data.rows(True)
    events = np.array(episode_events())
    held_out = np.unique(data.episode[test])
    chosen = np.concatenate(
        [held_out[events[held_out] == e][:episodes_per_event] for e in JUDGE_EVENTS]
    )
    rows = test[np.isin(data.episode[test], chosen)]
    recon = np.concatenate(
        [
            tensor_to_frames(
                world.video_ae(frames_to_tensor(np.asarray(data.frames[rows[i : i + 64]])))
            )
            for i in range(0, len(rows), 64)
        ]
    )
    on_recon = judge_report(judges, data, rows, data.rows(False), frames=recon)
    return {
        "judge_accuracy_on_sim": judges.accuracy,
        "judge_accuracy_on_ae_recon": on_recon,
        "ae_recon_psnr_judge_frames": M.pooled_psnr(recon, np.asarray(data.frames[rows])),
    }
