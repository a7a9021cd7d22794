"""Sound cues: the footstep rhythm a session keeps from its keys, in training and at run time."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from engine.model.inputs import input_features, input_features_from_labels
from engine.model.sound_cues import SOUND_CUES, STRIDE_CUES, stride_cues
from engine.runtime import EventError
from engine.runtime.conv_rollout import ConvRollout
from engine.sim.constants import KEY_BITS
from engine.train.bank import LatentBank
from engine.train.conv_generator import conv_windows, frame_conditioning, with_sound_head

from .test_conv_world import conditioning, small
from .test_train_generator import episode, table

WALK = input_features(KEY_BITS["W"], 0, 0, 0, False, False)
STAND = input_features(0, 0, 0, 0, False, False)


def steps_of(rows: list[np.ndarray]) -> list[int]:
    cues = stride_cues(np.stack(rows))
    return [int(t) for t in torch.nonzero(cues[:, 0]).flatten()]


def test_the_clock_keeps_the_simulators_stride():
    # a walk steps on its first frame, 7 frames later, then every STRIDE_FRAMES frames (the
    # first step leaves a frame of walk over); standing resets it
    assert steps_of([WALK] * 24) == [0, 7, 15, 23]
    assert steps_of([WALK] * 3 + [STAND] * 2 + [WALK] * 10) == [0, 5, 12]
    diagonal = input_features(KEY_BITS["W"] | KEY_BITS["D"], 0, 0, 0, False, False)
    both = input_features(KEY_BITS["W"] | KEY_BITS["S"], 0, 0, 0, False, False)
    assert steps_of([diagonal] * 9) == [0, 7]  # the simulator walks a diagonal at full speed
    assert steps_of([both] * 9) == []  # W and S cancel: no walk
    cues = stride_cues(np.stack([WALK] * 3))
    assert cues.shape == (3, STRIDE_CUES)
    assert cues[:, 1].tolist() == [0.0, 1.0, 0.0]  # the step of the frame before


def test_the_clock_places_the_simulators_footsteps_on_a_random_walk():
    from engine.eval.episodes import agent_episode

    placed, onsets = [], []
    for seed in (1_000_000, 1_000_001, 1_000_003):  # the last one is stopped and slides
        ep = agent_episode(seed, 160)
        placed.append(stride_cues(input_features_from_labels(ep.labels))[:, 0].numpy() > 0)
        onsets.append(ep.labels["step_onset"].astype(bool))
    p, o = np.concatenate(placed), np.concatenate(onsets)
    assert o.sum() >= 30
    # a few steps are stopped or slowed by the simulator's collisions; the rest fall where
    # the clock says
    assert (p & o).sum() >= 0.85 * o.sum()
    assert (p & ~o).sum() <= 0.15 * o.sum()


def test_training_and_the_rollout_tell_the_sound_head_the_same_cues():
    eps = [episode(frames=30), episode(frames=30, seed=1)]
    for ep in eps:
        ep.inputs[:] = torch.from_numpy(WALK)
        ep.inputs[10:13] = torch.from_numpy(STAND)
    bank = LatentBank.build(eps, table())
    assert torch.equal(bank.cues[:30, :STRIDE_CUES], stride_cues(eps[0].inputs))
    model = with_sound_head(small(), history=1, sample=False, cues=SOUND_CUES)
    start = 30 + 6  # a window of the second episode that does not open it
    w = conv_windows(bank, torch.tensor([start]), window=12)
    roll = ConvRollout(model, theme=1)
    roll.keep_stride(eps[1].inputs[:6].numpy())  # the frames before the window
    for t in range(12):
        trained = frame_conditioning(w, t, torch.zeros(1))
        _, _, run_time, _ = roll._next_frame_inputs(w["inputs"][0, t].numpy(), 6 + t, None)
        assert torch.equal(trained.cues, run_time.cues), t


def test_a_sound_head_grown_to_read_cues_starts_as_the_old_one_and_then_hears_them():
    model = small().eval()
    with torch.no_grad():
        for param in model.audio_head.parameters():
            param.normal_(0, 0.1)
    ctx, valid = torch.randn(2, 3, 8, 16, 16), torch.ones(2, 3, dtype=torch.bool)
    heard = torch.randn(2, 32)
    before = model.predict(ctx, valid, heard, conditioning())
    grown = with_sound_head(model, history=2, sample=False, cues=SOUND_CUES).eval()
    assert grown.config.sound_cues == SOUND_CUES and grown.config.audio_history == 2
    cued = conditioning()
    cued.cues = torch.ones(2, SOUND_CUES)
    after = grown.predict(ctx, valid, heard, cued)
    assert torch.allclose(after.audio, before.audio, atol=1e-6)  # new inputs weigh 0 at first
    assert torch.allclose(grown.predict(ctx, valid, heard, conditioning()).audio, after.audio)
    with torch.no_grad():
        grown.audio_head[0].weight.normal_(0, 0.1)
    assert not torch.allclose(
        grown.predict(ctx, valid, heard, cued).audio,
        grown.predict(ctx, valid, heard, conditioning()).audio,  # no cues: zeros
    )
    assert with_sound_head(grown, history=1, sample=False) is grown  # never shrunk


def test_a_primed_session_keeps_the_walks_rhythm():
    model = with_sound_head(small(), history=1, sample=False, cues=SOUND_CUES).eval()
    roll = ConvRollout(model, theme=0)
    roll.keep_stride(np.stack([WALK] * 5))  # stepped at the first of these, 4 frames ago
    cues = []
    for t in range(5):
        roll.generate(WALK, t)
        cues.append(roll.stride.stepped_before)
    assert cues == [False, False, True, False, False]  # 7 frames after the walk's first step
    fresh = ConvRollout(model, theme=0)
    fresh.generate(WALK, 0)
    assert fresh.stride.stepped_before  # a session that knows no past starts standing


def test_the_weather_cue_is_the_datas_in_training_and_the_particle_layers_at_run_time():
    from engine.model.particles import Particles, ParticlesConfig
    from engine.model.sound_cues import RAIN, SNOW
    from engine.runtime import Prompt, World
    from engine.sim.constants import WEATHERS
    from engine.train.particles import label_codes

    from .test_runtime_session import FakeText, tiny_code_model, tiny_world

    assert (WEATHERS[RAIN], WEATHERS[SNOW]) == ("rain", "snow")
    ep = episode(frames=30)
    ep.labels["weather"][10:20] = RAIN
    ep.labels["weather"][20:] = SNOW
    cues = LatentBank.build([ep], table()).cues
    assert cues.shape == (30, SOUND_CUES)
    assert (
        cues[:, STRIDE_CUES:].tolist() == [[0.0, 0.0]] * 10 + [[1.0, 0.0]] * 10 + [[0.0, 1.0]] * 10
    )
    # a code is named by the weather most of its frames show; one no frame lands on is clear
    codes = np.array([0, 0, 1, 1, 1, 2])
    assert label_codes(codes, np.array([1, 1, 2, 0, 2, 3]), 4) == (1, 2, 3, 0)

    model = with_sound_head(tiny_code_model(), history=1, sample=False, cues=SOUND_CUES)
    roll = ConvRollout(model, theme=0)
    roll.weather = SNOW
    _, _, cond, _ = roll._next_frame_inputs(WALK, 0, None)
    assert cond.cues.tolist() == [[1.0, 0.0, 0.0, 1.0]]  # a step, and snow
    two = with_sound_head(tiny_code_model(), history=1, sample=False, cues=STRIDE_CUES)
    assert two.sound_cue_rows(cond).tolist() == [[1.0, 0.0]]  # an older model reads the steps

    layer = Particles(ParticlesConfig(codes=2, code_weather=(0, RAIN))).eval()
    layer.set_codebook(torch.stack([torch.full((4,), -1.0), torch.ones(4)]))
    layer.next_code = lambda previous, text: 1 if text is not None else previous  # type: ignore
    assert Particles(ParticlesConfig(codes=2)).weather_of(1) == 0  # unnamed codes: clear
    w = tiny_world()
    world = World(w.video_ae, w.audio_ae, model, FakeText(), particles=layer)
    session = world.start({"seed": 0, "theme": "misty_coast"}, opening=False)
    session.next_chunk()
    assert session.rollout.weather == 0
    session.push(Prompt("make it rain"))
    session.next_chunk(max_frames=1)
    assert session.particle_code == 1 and session.rollout.weather == RAIN

    primed = world.start({"seed": 0, "theme": "misty_coast"}, opening=False)
    frames = np.zeros((2, 128, 128, 3), np.uint8)
    with pytest.raises(EventError, match="prime inputs must be"):
        primed.prime(frames, inputs=np.zeros((3, 5)))
    primed.prime(frames, inputs=np.stack([WALK] * 3))
    assert primed.rollout.stride.walked == 3  # the frame left over by the first step, and 2 more
