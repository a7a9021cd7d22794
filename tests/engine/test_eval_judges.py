"""The judges' own parts: the in-view detector and the audio judge's context window."""

from __future__ import annotations

import numpy as np
import torch

from engine.eval.classifiers import (
    AUDIO_CONTEXT,
    AUDIO_EVENTS,
    DETECTORS,
    OBJECT_HEADS,
    STATE_HEADS,
    AudioJudge,
    InverseDynamics,
    Judges,
    MoodJudge,
    ObjectJudge,
    StateJudge,
    audio_context,
    load_judges,
    save_judges,
    stream_starts,
    train_judges,
)
from engine.eval.judge_data import JudgeData, judge_episode


def test_stream_starts():
    first = np.array([True, False, False, True, False])
    assert stream_starts(5, first).tolist() == [0, 0, 0, 3, 3]
    assert stream_starts(3).tolist() == [0, 0, 0]


def test_audio_context_hears_back_within_its_stream_only():
    """A loud stream then a quiet one: the quiet stream's first row hears only itself, and
    the context is the mean (and the least) power over the last AUDIO_CONTEXT frames."""
    rng = np.random.default_rng(0)
    loud = torch.from_numpy(rng.normal(0, 0.5, (40, 800)).astype(np.float32))
    quiet = torch.from_numpy(rng.normal(0, 0.01, (40, 800)).astype(np.float32))
    audio = torch.cat([loud, quiet])
    first = np.zeros(80, bool)
    first[[0, 40]] = True
    split = audio_context(audio, first)
    assert split.shape == (80, 2 * 65)
    alone = audio_context(quiet)
    assert torch.allclose(split[40:], alone, atol=1e-4)  # nothing of the loud stream leaks
    one = audio_context(audio)  # one stream: the quiet stream's start hears the loud frames
    assert (one[40, :65] - split[40, :65]).mean() > 3  # log power, ~ln(2500) / 2 at least
    # a steady stream's context settles: row AUDIO_CONTEXT - 1 and the last agree closely
    assert (alone[AUDIO_CONTEXT - 1] - alone[-1]).abs().mean() < 0.2


def test_audio_judge_reads_with_its_context():
    """`read_audio` and training see the same features; a row's answer depends on the frames
    before it in its stream, and a new stream (`first`) forgets them."""
    torch.manual_seed(0)
    judge = AudioJudge().eval()
    audio = torch.rand(6, 800) * 2 - 1
    assert torch.allclose(judge(audio), judge.net(AudioJudge.features(audio)))
    first = np.array([True, False, False, True, False, False])
    with torch.no_grad():
        assert not torch.allclose(judge(audio)[3], judge(audio, first)[3])
        assert torch.allclose(judge(audio, first)[3:], judge(audio[3:]), atol=1e-5)


def test_object_judge_is_a_detector():
    """The frame's logit is the best cell's: the same thing moved by a whole cell (8 pixels)
    anywhere inside the picture gets the same answer."""
    x = torch.zeros(2, 3, 128, 128)
    x[0, :, 40:56, 40:48] = 1.0
    x[1, :, 72:88, 88:96] = 1.0
    for stem, norm in (("coarse", False), ("fine", False), ("fine", True)):
        torch.manual_seed(0)
        judge = ObjectJudge(stem=stem, norm=norm).eval()
        with torch.no_grad():
            out = judge(x)
            assert out.shape == (2, len(OBJECT_HEADS))
            assert judge.cells(x).shape[2:] == (16, 16)
            assert torch.allclose(out, judge.cells(x).amax((2, 3)))
            assert torch.allclose(out[0], out[1], atol=1e-5)


def _answering(spec_index: int, yes: set[str]) -> ObjectJudge:
    """DETECTORS[spec_index] with zero weights: "in view" for the heads in `yes`, else not."""
    judge = ObjectJudge.of(DETECTORS[spec_index])
    for p in judge.parameters():
        torch.nn.init.zeros_(p)
    judge.net[-1].bias.data[:] = torch.tensor([1.0 if k in yes else -1.0 for k in judge.heads])
    return judge.eval()


def test_read_state_takes_in_view_heads_from_the_detectors(tmp_path):
    """Each detector answers for its `reads` (a later one's answer wins), every other head
    comes from the state judge; the detectors and their configs survive saving and loading."""
    reads = [set(spec.reads) for spec in DETECTORS]
    assert {"crystal_in_view", "statue_in_view"} <= set().union(*reads) <= set(OBJECT_HEADS)
    assert all(set(spec.reads) <= set(spec.heads) for spec in DETECTORS)
    torch.manual_seed(0)
    state = StateJudge().eval()
    alone = Judges(state, MoodJudge(), InverseDynamics(), AudioJudge())
    alone.audio(torch.zeros(1, 800))
    frames = np.random.default_rng(0).integers(0, 256, (3, 128, 128, 3)).astype(np.uint8)
    by_state = alone.read_state(frames)
    # The coarse detector says "yes" to everything it was trained on, statue included; the
    # statue's own detector, read after it, says "no".
    detectors = (_answering(0, set(OBJECT_HEADS)), _answering(1, set()), _answering(2, set()))
    judges = Judges(state, alone.mood, alone.idm, alone.audio, detectors)
    read = judges.read_state(frames)
    assert set(read) == set(STATE_HEADS)
    for k in STATE_HEADS:
        if k in reads[0] - reads[1] - reads[2]:
            assert read[k].tolist() == [1, 1, 1], k
        elif k in reads[1] | reads[2]:
            assert read[k].tolist() == [0, 0, 0], k
        else:
            assert read[k].tolist() == by_state[k].tolist(), k
    save_judges(tmp_path / "j.pt", judges)
    again = load_judges(tmp_path / "j.pt")
    assert [d.config for d in again.detectors] == [d.config for d in detectors]
    assert again.detectors[2].config["norm"] and not again.detectors[1].config["norm"]
    for k, v in again.read_state(frames).items():
        assert v.tolist() == read[k].tolist()


def test_train_judges_runs_end_to_end_on_a_tiny_data_set():
    """The build's training path (five judges, the detector's weighted sampling, the audio
    context per episode) on five 12-frame episodes, a few batches each."""
    events = ("spawn_lantern", "spawn_statue", "fire", "rain", "spawn_crystal")
    parts = [judge_episode(2_000_000 + i, e, 12) for i, e in enumerate(events)]
    rgb, audio, labels, view = (np.concatenate([p[c] for p in parts]) for c in range(4))
    episode = np.repeat(np.arange(len(parts), dtype=np.int32), 12)
    data = JudgeData(rgb, audio, labels, view, episode, episode == 4)
    judges = train_judges(data, steps=3, log=lambda _: None)
    assert len(judges.detectors) == len(DETECTORS)
    expected = {f"state_{k}" for k in STATE_HEADS} | {"mood", "inverse_dynamics"}
    assert expected | {f"audio_{a}" for a in AUDIO_EVENTS} == set(judges.accuracy)
    heard = judges.read_audio(audio[:12])
    assert heard.shape == (12, len(AUDIO_EVENTS))
