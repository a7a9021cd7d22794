import numpy as np
import pytest

from engine.sim import FrameInputs, SimWorld, WorldSpec
from engine.sim.showcase import showcase_script


def _play(seed: int, resolution: int = 64, frames: int = 120):
    script = showcase_script(seed, "misty_coast", frames)
    world = SimWorld(script.world_spec(resolution))
    out = [world.step(i) for i in script.frame_inputs()]
    return (
        np.stack([f.rgb for f in out]),
        np.stack([f.audio for f in out]),
        np.stack([f.labels for f in out]),
    )


def test_same_seed_and_inputs_give_identical_frames_audio_and_labels():
    a, b = _play(4), _play(4)
    assert np.array_equal(a[0], b[0])
    assert np.array_equal(a[1], b[1])
    assert np.array_equal(a[2], b[2])


def test_reset_replays_the_same_episode():
    world = SimWorld(WorldSpec(seed=2, resolution=64))
    inputs = [FrameInputs.hold("W", prompts=("make it rain",) if i == 3 else ()) for i in range(20)]
    first = [world.step(i) for i in inputs]
    world.reset()
    second = [world.step(i) for i in inputs]
    assert all(
        np.array_equal(x.rgb, y.rgb) and np.array_equal(x.audio, y.audio)
        for x, y in zip(first, second, strict=True)
    )


def test_different_seeds_give_different_worlds():
    a = SimWorld(WorldSpec(seed=1, resolution=64)).step()
    b = SimWorld(WorldSpec(seed=2, resolution=64)).step()
    assert not np.array_equal(a.rgb, b.rgb)


@pytest.mark.parametrize("resolution", [64, 128, 256])
def test_every_supported_resolution_renders(resolution):
    world = SimWorld(WorldSpec(seed=3, theme="neon_night", resolution=resolution))
    frame = world.step(FrameInputs.hold("W", prompts=("spawn a dragon",)))
    assert frame.rgb.shape == (resolution, resolution, 3) and frame.rgb.dtype == np.uint8
    assert frame.audio.shape == (800,) and frame.audio.dtype == np.int16
    assert frame.rgb.std() > 10  # a picture, not a flat fill


def test_unsupported_resolution_and_theme_are_rejected():
    with pytest.raises(ValueError, match="resolution"):
        WorldSpec(resolution=100)
    with pytest.raises(KeyError, match="unknown theme"):
        WorldSpec(theme="moon_base")


def test_looking_around_shows_the_other_directions_and_changes_nothing():
    spec = WorldSpec(seed=11, theme="desert_canyon", resolution=64)
    plain, looked = SimWorld(spec), SimWorld(spec)
    inputs = [FrameInputs.hold("W", "LEFT")] * 6 + [FrameInputs.hold("W")] * 6
    for t, inp in enumerate(inputs):
        a, b = plain.step(inp), looked.step(inp)
        assert np.array_equal(a.rgb, b.rgb) and a.labels.tobytes() == b.labels.tobytes()
        if t % 4 == 0:
            assert np.array_equal(looked.look(0.0), b.rgb)  # no time passes in a look
            around = looked.look_around()
            assert around.shape == (3, 64, 64, 3)
            assert not np.array_equal(around[0], around[2])
            assert np.array_equal(looked.look(2 * np.pi), b.rgb)
