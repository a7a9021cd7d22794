import numpy as np

from engine.sim import FrameInputs, SimWorld, WorldSpec
from engine.sim.audio import build_audio_bank
from engine.sim.constants import SAMPLE_RATE, SAMPLES_PER_FRAME
from engine.sim.themes import get_theme

from .conftest import open_grass_facing, place_player


def _onset_samples(audio: np.ndarray, hop: int = 32) -> np.ndarray:
    """Sample positions where the short-time energy jumps well above the recent level."""
    x = audio.astype(np.float32) / 32768
    energy = (x[: x.size // hop * hop].reshape(-1, hop) ** 2).mean(1)
    recent = np.array([energy[max(0, k - 20) : k].mean() if k else 0.0 for k in range(energy.size)])
    jumps = np.nonzero((energy > 6 * recent) & (energy > 5e-3))[0]
    onsets = [j for i, j in enumerate(jumps) if i == 0 or j - jumps[i - 1] > 8]
    return np.asarray(onsets) * hop


def test_footstep_onsets_align_with_step_frames():
    world = SimWorld(WorldSpec(seed=11, theme="ember_forest"))
    x, y, yaw = open_grass_facing(world, distance=20)
    place_player(world, x, y, yaw)
    world.creature.state.cooldown = 10_000  # keep the creature quiet and away
    world.creature.state.x, world.creature.state.y = x + 128, y + 128
    frames = [world.step(FrameInputs.hold("W") if i < 60 else FrameInputs()) for i in range(70)]
    step_frames = [i for i, f in enumerate(frames) if f.labels["step_onset"]]
    assert len(step_frames) >= 6  # a step every STRIDE of walking
    onsets = _onset_samples(np.concatenate([f.audio for f in frames]))
    onset_frames = sorted({int(s // SAMPLES_PER_FRAME) for s in onsets})
    assert onset_frames == step_frames
    # Each onset lands within 5 ms of its frame's start: audio and picture are in sync.
    offsets = [s - (s // SAMPLES_PER_FRAME) * SAMPLES_PER_FRAME for s in onsets]
    assert max(offsets) <= 0.005 * SAMPLE_RATE


def _centroid(x: np.ndarray) -> float:
    spectrum = np.abs(np.fft.rfft(x))
    freqs = np.fft.rfftfreq(x.size, 1 / SAMPLE_RATE)
    return float((spectrum * freqs).sum() / spectrum.sum())


def test_rock_footsteps_sound_brighter_than_grass():
    bank = build_audio_bank(get_theme("ember_forest"), np.random.default_rng(0))
    assert _centroid(bank.grains["step_rock"]) > 1.5 * _centroid(bank.grains["step_grass"])


def test_fire_crackles_and_the_creature_calls():
    world = SimWorld(WorldSpec(seed=11, theme="ember_forest"))
    place_player(world, *open_grass_facing(world))
    quiet = np.concatenate([world.step().audio for _ in range(5)]).astype(float)
    world.step(FrameInputs(prompts=("cast fire magic",)))
    crackle = np.concatenate([world.step().audio for _ in range(20)]).astype(float)
    assert np.sqrt((crackle**2).mean()) > 1.5 * np.sqrt((quiet**2).mean())


def test_themes_have_distinct_ambient_beds():
    beds = [
        build_audio_bank(get_theme(name), np.random.default_rng(0)).loops["ambient"]
        for name in ("ember_forest", "neon_night")
    ]
    assert abs(_centroid(beds[0]) - _centroid(beds[1])) > 20


def test_a_creature_call_is_labelled_at_the_frame_it_starts():
    from engine.sim.prompts import training_paraphrases

    world = SimWorld(WorldSpec(seed=11, theme="ember_forest"))
    before = [world.step() for _ in range(3)]
    gift = world.step(FrameInputs(prompts=(training_paraphrases("gift_leaf")[0],)))
    after = world.step()
    assert not any(f.labels["call_onset"] for f in before)
    assert gift.labels["call_onset"] and not after.labels["call_onset"]
    assert np.abs(gift.audio.astype(float)).mean() > np.abs(before[-1].audio.astype(float)).mean()
