"""The scene edit: a sentence's event changes the session's history at once."""

from __future__ import annotations

import numpy as np
import torch

from engine.model.checkpoint import load_checkpoint
from engine.model.scene_edit import LOCAL_EVENTS, SCENE_EVENTS, SceneEdit, SceneEditConfig
from engine.model.sentence_snap import SentenceSnap
from engine.runtime import Prompt, World

from .test_runtime_session import FakeText, tiny_code_model, tiny_world


class UnitText(FakeText):
    """FakeText's vectors at unit length, as the real encoder gives them (cosines compare)."""

    def encode(self, texts):
        vectors = super().encode(texts)
        return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def code_world(edit: SceneEdit | None) -> World:
    """A tiny code model with a view memory, a snap that names events, and `edit`."""
    w = tiny_world()
    model = tiny_code_model()
    texts = ["make it night", "grow a tree"]
    table = UnitText().encode(texts)
    snap = SentenceSnap(table, floor=0.99, events=np.array(["night", "spawn_tree"]))
    return World(w.video_ae, w.audio_ae, model, UnitText(), snap=snap, scene_edit=edit)


def test_the_edit_starts_as_nothing_changed_and_learns_per_event():
    edit = SceneEdit(SceneEditConfig()).eval()
    latents = torch.randn(3, 8, 16, 16)
    assert torch.equal(edit.change(latents, "night"), latents)
    with torch.no_grad():
        edit.out.bias.fill_(0.5)
    assert torch.allclose(edit.change(latents, "rain"), latents + 0.5)
    assert "night" not in LOCAL_EVENTS and {"fire", "spawn_tree"} <= LOCAL_EVENTS
    assert set(LOCAL_EVENTS) < set(SCENE_EVENTS)


def test_the_scene_events_are_the_simulators_events_that_change_the_picture():
    """The runtime may not import the simulator, so the list is written out; it must not
    drift from the simulator's events (all but the creature's gifts and looks)."""
    from engine.sim.prompts import EVENT_NAMES

    shown = {e for e in EVENT_NAMES if not e.startswith(("gift_", "companion_"))}
    assert set(SCENE_EVENTS) == shown and len(SCENE_EVENTS) == len(shown)


def test_a_sentence_rewrites_the_history_with_its_event_and_a_global_one_clears_the_views():
    calls: list[str] = []
    edit = SceneEdit(SceneEditConfig()).eval()
    real = edit.change

    def spying(latents: torch.Tensor, event: str) -> torch.Tensor:
        calls.append(event)
        return real(latents, event) + 1.0

    edit.change = spying  # type: ignore[method-assign]
    world = code_world(edit)
    session = world.start({"seed": 0, "theme": "misty_coast"}, opening=False)
    session.prime(
        np.zeros((2, 128, 128, 3), np.uint8), around=np.full((3, 128, 128, 3), 90, np.uint8)
    )
    roll = session.rollout
    views = roll.views
    known_before = int(views.seen.sum())
    assert known_before > 16 * 16  # the turn around is known

    session.push(Prompt("hello there"))  # close to no training sentence: no edit
    session.next_chunk()
    assert calls == []

    before = torch.stack(roll.history)
    rewrite = roll.rewrite_history
    seen_history: list[torch.Tensor] = []

    def watching(change, everywhere):
        rewrite(change, everywhere)
        seen_history.append(torch.stack(roll.history))

    roll.rewrite_history = watching  # type: ignore[method-assign]
    rewritten: list[bool] = []
    rewrite_views = views.rewrite
    views.rewrite = lambda change: rewritten.append(True) or rewrite_views(change)  # type: ignore
    known = int(views.seen.sum())
    session.push(Prompt("make it night"))
    session.next_chunk(max_frames=1)
    assert calls == ["night", "night"]  # the history, then the directions it remembers
    # every history frame edited, then snapped: a code model's history stays codes
    assert torch.equal(seen_history[0], world.model.snap(before + 1.0))
    assert not torch.equal(seen_history[0], before)
    assert rewritten == [True]  # night everywhere: the other directions fall dark too
    assert int(views.seen.sum()) == known  # and are still known

    session.push(Prompt("grow a tree"))  # a tree stands ahead: the other directions stay
    session.next_chunk(max_frames=1)
    assert calls == ["night", "night", "spawn_tree"] and rewritten == [True]


def test_a_drawn_sentence_is_not_guided_and_the_code_keep_holds_its_change():
    """The history shows what the edited sentence asked for: its frames get no text
    guidance and keep their codes; a sentence without an edit is guided as before."""
    from engine.model.conv_world import guided_rows

    world = code_world(SceneEdit(SceneEditConfig()).eval())
    model = world.model
    model.config.code_keep, model.config.text_guidance_frames = 4.0, 40
    session = world.start({"seed": 0, "theme": "misty_coast"}, opening=False)
    session.prime(np.zeros((2, 128, 128, 3), np.uint8))
    roll = session.rollout
    asked: list[bool] = []
    conditioning = roll._conditioning

    def watching(inputs, frame, text):
        cond = conditioning(inputs, frame, text)
        asked.append(bool(guided_rows(cond, model.config.text_guidance_frames)[0]))
        return cond

    roll._conditioning = watching  # type: ignore[method-assign]
    session.push(Prompt("make it night"))  # drawn by the edit: kept, not guided
    session.next_chunk(max_frames=2)
    assert asked == [False, False] and roll.drawn == {roll.frame - 2}
    session.push(Prompt("hello there"))  # no event: the network must draw any change itself
    session.next_chunk(max_frames=2)
    assert asked[2:] == [True, True]


def test_a_world_without_the_edit_plays_as_before():
    plain, edited = code_world(None), code_world(SceneEdit(SceneEditConfig()).eval())
    videos = []
    for world in (plain, edited):
        session = world.start({"seed": 2, "theme": "ember_forest"}, opening=False)
        session.push(Prompt("make it night"))
        videos.append(session.next_chunk().video)
    assert np.array_equal(videos[0], videos[1])  # a fresh edit changes nothing


def test_a_training_run_writes_an_edit_that_loads_and_reports_each_event(tmp_path):
    from engine.train.scene_edit import SceneEditTrainConfig, simulate_pairs, train_scene_edit

    before, after, events, episode = simulate_pairs(episodes=1, frames=20, resolution=128)
    assert before.shape == after.shape == (6, 128, 128, 3) and before.dtype == np.uint8
    assert len(events) == len(episode) == 6 and events.max() < len(SCENE_EVENTS)
    night = [i for i, k in enumerate(events) if SCENE_EVENTS[k] == "night"]
    for i in night:  # night falls: the picture gets darker
        assert after[i].mean() < before[i].mean()
    cfg = SceneEditTrainConfig(out=str(tmp_path), episodes=2, frames=20, minutes=0.02)
    path = train_scene_edit(cfg)
    edit = load_checkpoint(path, SceneEdit, SceneEditConfig)
    assert edit.change(torch.zeros(1, 8, 16, 16), "fog").shape == (1, 8, 16, 16)
    report = (tmp_path / "report.json").read_text()
    assert '"changed_right"' in report and (tmp_path / "loss.png").exists()
    assert train_scene_edit(cfg) == path  # resumes: the budget is spent, nothing retrains


def test_the_shipped_edit_brings_night_at_once_from_held_out_wording():
    """Shipped weights: "give me the dead of night" (wording no training sentence has) is
    routed to night, and the history the sentence's frame is drawn from already shows night:
    its oldest frame, from before the sentence, decodes far darker than without the edit.
    An unrelated sentence asks for nothing."""
    shipped = World.load()
    assert shipped.scene_edit is not None
    assert shipped.read_sentence("give me the dead of night")[1] == "night"
    assert shipped.read_sentence("hello there")[1] is None
    brightness = []
    for edit in (None, shipped.scene_edit):
        shipped.scene_edit = edit
        session = shipped.start({"seed": 3, "theme": "misty_coast"})
        session.next_chunk()
        session.push(Prompt("give me the dead of night"))
        session.next_chunk(max_frames=1)
        oldest = session.rollout.history[0][None]
        with torch.no_grad():
            brightness.append(float(shipped.video_ae.decode(oldest).mean()))
    assert brightness[1] < 0.5 * brightness[0]
