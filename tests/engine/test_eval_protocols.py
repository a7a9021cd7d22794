"""The eval's protocols can be passed by the simulator and fail the models they should fail.

The learned judges are too slow to train here; these tests judge with the simulator's own
visibility labels (a perfect judge), which is what a protocol must get right first. The
full-size figures, with the learned judges, come from `python -m engine.eval --json`.
"""

from __future__ import annotations

import numpy as np
import pytest

from engine.eval import metrics as M
from engine.eval.__main__ import load_prompt_cases
from engine.eval.classifiers import MOODS, mood_targets, state_targets
from engine.eval.episodes import PRIME_FRAMES, ModelPlayer, SimEpisode
from engine.eval.judge_data import (
    JUDGE_EVENTS,
    JUDGE_SEED_BASE,
    build_judge_data,
    episode_events,
    judge_episode,
)
from engine.eval.protocols import (
    GIFT_VIEWS,
    PROMPT_JUDGE_AFTER,
    RECOLOUR_BANDS,
    RECOLOUR_FRAMES,
    REFERENCE_MIN_DISTANCE,
    TURN_KEY_FRAMES,
    PromptCase,
    gift_episode,
    gift_views,
    prompt_episode,
    prompt_target,
    recolour_moves,
    reference_cases,
    reference_walk,
    turn_episode,
    walk_episode,
    walking_play,
    with_reference,
)
from engine.sim import FrameInputs, WorldSpec
from engine.sim.themes import THEME_NAMES, get_theme


def _reads(ep: SimEpisode, case: PromptCase) -> bool:
    head, target = prompt_target(case.event)
    return bool(state_targets(ep.labels[-1:], ep.view[-1:])[head][0] == target)


@pytest.mark.parametrize("event", ["rain", "night", "fire", "rainbow", "spawn_lantern"])
def test_the_simulator_passes_its_prompt_test_and_the_control_does_not(event):
    case = PromptCase(event, "a sentence the simulator has never heard")
    ep = prompt_episode(case, 3)
    assert ep.model_text == {PRIME_FRAMES: case.text}  # the model gets the sentence as typed
    assert _reads(ep, case)  # the simulator applied the event anyway, and it is in view
    assert not _reads(prompt_episode(case, 3, with_prompt=False), case)


def test_the_rainbow_case_turns_toward_the_rainbow():
    ep = prompt_episode(PromptCase("rainbow", "paint a rainbow"), 0)
    assert ep.view["rainbow_pixels"][PRIME_FRAMES] < 40 <= ep.view["rainbow_pixels"][-1]


@pytest.mark.parametrize("gift,mood", [("gift_leaf", "happy"), ("gift_dragon", "afraid")])
def test_the_gift_test_shows_the_remembered_mood_in_view(gift, mood):
    g = gift_episode(gift, "here you go", 0)
    truth = mood_targets(g.episode.labels, g.episode.view)
    for check, back, views in zip(g.checks, g.returns, g.views, strict=True):
        assert check >= back  # judged after coming back, with the creature in view
        assert 1 <= len(views) <= GIFT_VIEWS and views[-1] == check
        assert [MOODS[truth[v]] for v in views] == [mood] * len(views)
    # in between, the player looked away: the creature was not in view just before returning
    assert g.episode.view["creature_px"][g.returns[0] - 1] == 0


def test_a_frozen_model_does_not_pass_loop_closure_and_the_simulator_does():
    ep = turn_episode(0)
    truth = ep.frames[PRIME_FRAMES:]
    start = ep.frames[PRIME_FRAMES - 1]
    assert ep.labels["pose_yaw"][-1] == pytest.approx(
        ep.labels["pose_yaw"][0] - 2 * np.pi, abs=1e-4
    )
    frozen = np.repeat(start[None], len(truth), 0)
    half = TURN_KEY_FRAMES // 2
    stuck = M.loop_closure_summary([M.loop_closure_case(frozen, truth, start, half)])
    perfect = M.loop_closure_summary([M.loop_closure_case(truth, truth, start, half)])
    assert stuck["loop_closure_turned"] == 0 and not stuck["loop_closure_passed"]
    assert perfect["loop_closure_turned"] == 1 and perfect["loop_closure_passed"]


def test_a_shuffled_audio_track_fails_av_sync():
    ep = walk_episode(0, 240)
    steps = np.nonzero(ep.labels["step_onset"])[0]
    audio = ep.audio.astype(np.float64) / 32768
    assert M.av_sync([(audio.reshape(-1), steps)])["synced"]
    shuffled = audio[np.random.default_rng(0).permutation(len(audio))]
    assert not M.av_sync([(shuffled.reshape(-1), steps)])["synced"]


def test_judge_episodes_show_their_event():
    seed = JUDGE_SEED_BASE + 1000 * JUDGE_EVENTS.index("rainbow")  # as in the judge data
    _, _, labels, view = judge_episode(seed, "rainbow")
    assert labels["rainbow"].any() and (view["rainbow_pixels"] >= 40).sum() > 10


def test_prompt_files_are_validated(tmp_path):
    good = tmp_path / "p.json"
    good.write_text('[{"event": "rain", "text": "let the heavens weep"}]')
    assert load_prompt_cases(str(good)) == [PromptCase("rain", "let the heavens weep")]
    bad = tmp_path / "b.json"
    bad.write_text('[{"event": "gift_leaf", "text": "x"}]')
    with pytest.raises(ValueError, match=r"--prompts\[0\].event"):
        load_prompt_cases(str(bad))


class _RecordingSession:
    def __init__(self):
        self.pushed: list[tuple[int, object]] = []
        self.frame = 0

    def push(self, event):
        self.pushed.append((self.frame, event))

    def next_chunk(self, max_frames=None):
        from types import SimpleNamespace

        self.frame += 1
        return SimpleNamespace(
            video=np.zeros((1, 8, 8, 3), np.uint8), audio=np.zeros(800, np.int16)
        )


def test_image_and_sentences_reach_the_model_at_their_frame():
    palette = {"sky": [10, 20, 200], "foliage": [0, 200, 0], "ground": [200, 200, 0]}
    inputs = [FrameInputs() for _ in range(6)]
    inputs[2] = FrameInputs(image=palette)
    inputs[4] = FrameInputs(prompts=("make it rain",))
    ep = SimEpisode(WorldSpec(1, "frost_valley"), inputs, {4: "let the heavens weep"})
    ep.simulate()
    session = _RecordingSession()
    ModelPlayer(world=None).play(session, ep, 0, 6)
    kinds = {(frame, type(e).__name__) for frame, e in session.pushed}
    assert (2, "Image") in kinds and (4, "Prompt") in kinds
    prompt = next(e for frame, e in session.pushed if type(e).__name__ == "Prompt")
    assert prompt.text == "let the heavens weep"


def test_judge_data_episodes_map_to_their_events_and_hold_out_each_kind():
    data = build_judge_data(episodes_per_event=5, frames=2, log=lambda _: None)
    events = np.array(episode_events(5))
    assert len(events) == data.episode.max() + 1
    held_out = np.unique(data.episode[data.test])
    assert set(events[held_out]) == set(JUDGE_EVENTS)  # every event has unseen episodes
    assert (events == "spawn_statue").sum() > (events == "rain").sum()  # objects need places


def test_cases_of_an_untrusted_judge_are_listed_not_scored():
    """A head below TRUSTED_JUDGE held out (the statue's is a coin flip) scores no case: the
    cases are reported as unjudged and the figures cover the rest only."""
    from engine.eval.classifiers import (
        STATE_HEADS,
        AudioJudge,
        InverseDynamics,
        Judges,
        MoodJudge,
        StateJudge,
    )
    from engine.eval.run import TRUSTED_JUDGE, prompt_following, untrusted_heads

    accuracy = {f"state_{h}": {"balanced_accuracy": 0.95} for h in STATE_HEADS}
    accuracy["state_statue_in_view"] = {"balanced_accuracy": 0.55}
    judges = Judges(StateJudge(), MoodJudge(), InverseDynamics(), AudioJudge(), accuracy=accuracy)
    assert untrusted_heads(judges) == {"statue_in_view"}
    del accuracy["state_weather"]  # unknown counts as untrusted
    assert untrusted_heads(judges) == {"statue_in_view", "weather"}
    assert TRUSTED_JUDGE == 0.9
    cases = [PromptCase("spawn_statue", "raise a statue"), PromptCase("rain", "make it pour")]
    out = prompt_following(None, judges, cases, lambda _: None)  # type: ignore[arg-type]
    assert out["prompt_cases"] == 0 and out["prompt_following"] is None
    assert out["prompt_cases_unjudged"] == {"spawn_statue": 1, "rain": 1}


def test_the_gift_check_votes_with_the_frames_that_show_most_of_the_icon():
    moods = np.full(100, -1)
    icon = np.zeros(100)
    moods[60:90], icon[60:90] = 1, np.arange(30)  # readable, the icon growing as it comes closer
    moods[92], icon[92] = 2, 99.0  # the best single view, in another mood
    moods[95], icon[95] = 1, 50.0
    assert gift_views(moods, icon, 99) == [92]  # only frames in the best view's mood
    moods[92] = 1
    assert gift_views(moods, icon, 99) == [87, 88, 89, 92, 95]  # in time order
    assert gift_views(np.full(100, -1), icon, 99) == []


def test_reference_cases_are_far_from_their_theme_and_fixed():
    cases = reference_cases()
    assert len(cases) == 10 and cases == reference_cases()
    assert [c.theme for c in cases] == [t for t in THEME_NAMES for _ in range(2)]
    for case in cases:
        theme = get_theme(case.theme)
        assert np.linalg.norm(np.subtract(case.palette["sky"], theme.sky_horizon)) >= (
            REFERENCE_MIN_DISTANCE
        )
        assert np.linalg.norm(np.subtract(case.palette["ground"], theme.ground)) >= (
            REFERENCE_MIN_DISTANCE
        )
    assert len({c.seed for c in cases}) == len(THEME_NAMES)  # a theme's palettes share a world
    assert len({str(c.palette) for c in cases}) == 10


def test_the_simulator_recolours_toward_the_reference_and_the_control_does_not():
    case = reference_cases()[4]  # desert canyon: open sky and sand
    plain = reference_walk(case)
    shown = with_reference(plain, case.palette)
    assert len(shown.inputs) == RECOLOUR_FRAMES and shown.spec.reference_image == case.palette
    assert plain.spec.reference_image is None
    # the same walk, closed-loop, with the picture from the start: recolouring moves nothing
    again = walking_play(WorldSpec(case.seed, case.theme, 128, case.palette), RECOLOUR_FRAMES)
    assert np.array_equal(again.labels["pose_x"], plain.labels["pose_x"])
    assert np.array_equal(again.frames, shown.frames)
    moves = recolour_moves(shown.frames, plain.frames, case.palette)
    assert set(moves) == set(RECOLOUR_BANDS) and min(moves.values()) > 0.3
    assert recolour_moves(plain.frames, plain.frames, case.palette) == dict.fromkeys(moves, 0.0)


class _SimAsModel:
    """A player whose sessions show the simulator's own frames of the episode they play."""

    def __init__(self):
        self.opened: list[object] = []

    def open(self, ep, seed=0):
        self.opened.append(ep.spec.reference_image)
        return None

    def play(self, session, ep, start, stop):
        return ep.frames[start:stop], ep.audio[start:stop].reshape(-1)


def test_the_reference_section_gives_the_picture_to_one_session_of_each_pair(monkeypatch):
    from engine.eval import run

    cases = reference_cases()[:2]  # one theme's two palettes: one walk, one shared control
    monkeypatch.setattr(run, "reference_cases", lambda: cases)
    player = _SimAsModel()
    out = run.reference_recolour(player, lambda _: None)  # type: ignore[arg-type]
    assert player.opened == [None, cases[0].palette, cases[1].palette]
    assert out["reference_recolour_cases"] == 2
    assert out["reference_recolour"] == out["reference_recolour_sim"] > 0
    assert out["reference_recolour_ratio"] == pytest.approx(1.0)
    assert set(out["reference_recolour_by_band"]) == set(RECOLOUR_BANDS)


def test_the_kept_figure_judges_the_same_frame_from_a_history_that_already_shows_the_state(
    monkeypatch: pytest.MonkeyPatch,
):
    """The kept rollout is primed with the truth through the sentence's own frame, is never
    told the sentence (it was typed inside the priming) and ends on the judged frame."""
    from engine.eval import run
    from engine.eval.classifiers import STATE_HEADS

    rain = prompt_target("rain")[1]

    class DetailJudges:  # reads rain wherever the frame is not flat
        accuracy = {f"state_{h}": {"balanced_accuracy": 0.95} for h in STATE_HEADS}

        def read_state(self, frames: np.ndarray) -> dict[str, np.ndarray]:
            seen = frames.reshape(len(frames), -1).std(axis=1) > 1.0
            return {h: np.where(seen, rain, 1 - rain) for h in STATE_HEADS}

    class ReplayingPlayer:  # flat frames when told the sentence, the truth when it was primed
        world = None
        calls: list[tuple[int, int, bool]] = []

        def rollout(self, ep: SimEpisode, start: int, horizon: int, seed: int = 0):
            told = start <= PRIME_FRAMES < start + horizon
            self.calls.append((start, start + horizon, told))
            frames = np.zeros_like(ep.frames[start : start + horizon])
            return (frames if told else ep.frames[start : start + horizon]), None

    monkeypatch.setattr(run, "_prompt_ceilings", lambda *a: {})
    player = ReplayingPlayer()
    cases = [PromptCase("rain", "make it pour"), PromptCase("rain", "let the sky weep")]
    out = run.prompt_following(player, DetailJudges(), cases, lambda _: None)  # type: ignore[arg-type]
    end = PRIME_FRAMES + PROMPT_JUDGE_AFTER + 1
    assert player.calls == [(PRIME_FRAMES, end, True), (PRIME_FRAMES + 1, end, False)] * 2
    assert out["prompt_following"] == 0.0
    assert out["prompt_following_kept_from_truth"] == 1.0
