"""The sentence snap: typed text moved onto the training sentences it resembles."""

from __future__ import annotations

import numpy as np
import pytest

from engine.model.sentence_snap import SNAP_FILE, SentenceSnap
from engine.model.text import TEXT_DIM
from engine.sim.prompts import EVENTS

from .test_runtime_session import FakeText, tiny_world


def unit(rows: np.ndarray) -> np.ndarray:
    return (rows / np.linalg.norm(rows, axis=1, keepdims=True)).astype(np.float32)


def table(n: int = 6, seed: int = 0) -> np.ndarray:
    return unit(np.random.default_rng(seed).normal(size=(n, TEXT_DIM)))


def test_a_sentence_near_a_training_one_becomes_it_and_a_far_one_is_left_alone():
    known = table()
    snap = SentenceSnap(known, floor=0.5, neighbours=3, temperature=0.05)
    rng = np.random.default_rng(1)
    near = unit(known[2:3] + 0.04 * rng.normal(size=(1, TEXT_DIM)))  # cosine ~0.6 to row 2
    far = unit(rng.normal(size=(1, TEXT_DIM)))  # random: cosine ~0 to every row
    out = snap(np.concatenate([near, far]))
    assert out.shape == (2, TEXT_DIM) and out.dtype == np.float32
    assert float(near[0] @ known[2]) < 0.9 < float(out[0] @ known[2])
    np.testing.assert_array_equal(out[1], far[0])
    np.testing.assert_allclose(np.linalg.norm(out, axis=1), 1.0, rtol=1e-5)


def test_a_sentence_between_two_training_ones_gets_a_weighted_mean_of_both():
    a, b = np.eye(TEXT_DIM, dtype=np.float32)[:2]
    snap = SentenceSnap(np.stack([a, b]), floor=0.3, neighbours=2, temperature=1.0)
    out = snap(unit((0.8 * a + 0.6 * b)[None]))[0]
    assert out[0] > out[1] > 0.5  # nearer to a, still pulled toward b


def test_the_snap_round_trips_through_its_file_and_checks_its_settings(tmp_path):
    snap = SentenceSnap(table(), floor=0.4, neighbours=2, temperature=0.1)
    back = SentenceSnap.load(snap.save(tmp_path / SNAP_FILE))
    assert (back.floor, back.neighbours, back.temperature) == (0.4, 2, 0.1)
    np.testing.assert_allclose(back.table, snap.table, atol=1e-3)
    with pytest.raises(ValueError, match="cosine"):
        SentenceSnap(table(), floor=2.0)
    with pytest.raises(ValueError, match="neighbour"):
        SentenceSnap(table(), neighbours=0)
    with pytest.raises(ValueError, match=r"\(N, 384\)"):
        SentenceSnap(np.zeros((3, 8), np.float32))


def test_a_session_tells_the_model_the_snapped_sentence():
    world = tiny_world()
    typed = FakeText().encode(["make it pour"])
    plain = world.encode_sentence("make it pour")
    np.testing.assert_array_equal(plain, typed[0])
    world.snap = SentenceSnap(unit(typed + 0.01), floor=0.5, neighbours=1)
    snapped = world.encode_sentence("make it pour")
    np.testing.assert_allclose(snapped, unit(typed + 0.01)[0], rtol=1e-5)
    session = world.start({"seed": 0, "theme": "ember_forest"})
    prepared = session.prepare({"kind": "prompt", "text": "make it pour"})
    np.testing.assert_allclose(prepared.embedding, snapped, rtol=1e-5)


def test_the_written_table_holds_the_training_sentences_and_never_the_held_out_ones(
    tmp_path, monkeypatch
):
    import engine.train.latents as latents
    from engine.train.ship import set_sentence_snap

    fake = FakeText()
    monkeypatch.setattr(latents, "TextEncoder", lambda: fake)
    path = set_sentence_snap(tmp_path, floor=0.5, neighbours=2)
    snap = SentenceSnap.load(path)
    train = sorted({t for e in EVENTS for t in e.train})
    held = [t for e in EVENTS for t in e.heldout]
    assert len(snap.table) == len(train) and (snap.floor, snap.neighbours) == (0.5, 2)
    cosines = unit(fake.encode(held)) @ snap.table.T
    assert cosines.max() < 0.999  # no held-out wording in the table
    assert (unit(fake.encode(train)) @ snap.table.T).max(axis=1).min() > 0.999
    assert set_sentence_snap(tmp_path, on=False) == path and not path.exists()


def test_the_event_asked_for_is_the_nearest_prototype_unless_a_sentence_is_reworded():
    a, b, c = np.eye(TEXT_DIM, dtype=np.float32)[:3]
    rows = unit(np.stack([a + 0.9 * c, a - 0.3 * c, b + 0.3 * a, a + 0.2 * b]))
    events = np.array(["rain", "rain", "clear", "clear"])
    snap = SentenceSnap(rows, floor=0.3, neighbours=1, events=events, reworded=0.99)
    near_stop = unit((rows[3] + 0.05 * c)[None])  # a rewording of a "clear" sentence
    rainy = unit((a - 0.05 * b)[None])  # nearest sentence "clear", nearest prototype rain
    unrelated = unit(np.eye(TEXT_DIM, dtype=np.float32)[5:6])
    assert float((rainy @ rows.T).argmax()) == 3
    assert snap.event_of(np.concatenate([near_stop, rainy, unrelated])) == [
        "clear",
        "rain",
        None,
    ]
    # the sentence is snapped onto the asked event's sentences, not its nearest one's
    np.testing.assert_allclose(snap(rainy)[0], rows[1], rtol=1e-5)
    np.testing.assert_allclose(SentenceSnap(rows, floor=0.3, neighbours=1)(rainy)[0], rows[3])
    assert SentenceSnap(rows).event_of(rainy) == [None]  # a table without events names none
    with pytest.raises(ValueError, match="one event per sentence"):
        SentenceSnap(rows, events=events[:2])


def test_the_events_round_trip_and_the_written_table_names_each_sentences_event(
    tmp_path, monkeypatch
):
    import engine.train.latents as latents
    from engine.train.ship import set_sentence_snap

    monkeypatch.setattr(latents, "TextEncoder", FakeText)
    snap = SentenceSnap.load(set_sentence_snap(tmp_path))
    assert snap.events is not None and len(snap.events) == len(snap.table)
    owner = {t: e.name for e in EVENTS for t in e.train}
    texts = sorted(owner)
    assert [owner[t] for t in texts] == snap.events.tolist()
    assert snap.event_of(unit(FakeText().encode(["make it rain"]))) == ["rain"]
