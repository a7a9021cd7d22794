import numpy as np
import pytest

from engine.sim import FrameInputs
from engine.sim.terrain import TREE, WATER
from engine.sim.world import PITCH_RATE, TURN_RATE, WALK_SPEED

from .conftest import open_grass_facing, place_player


@pytest.mark.parametrize(
    ("keys", "forward", "right"),
    [(("W",), 1, 0), (("S",), -1, 0), (("D",), 0, 1), (("A",), 0, -1)],
)
def test_each_move_key_moves_the_player_as_geometry_says(sim_world, keys, forward, right):
    x, y, _ = open_grass_facing(sim_world)
    yaw = 0.4  # any heading: the cells around are open grass
    place_player(sim_world, x + 6, y, yaw)
    before = np.array([sim_world.x, sim_world.y])
    sim_world.step(FrameInputs.hold(*keys))
    moved = np.array([sim_world.x, sim_world.y]) - before
    heading = np.array([np.cos(yaw), np.sin(yaw)])
    right_vec = np.array([-np.sin(yaw), np.cos(yaw)])
    assert moved @ heading == pytest.approx(forward * WALK_SPEED, abs=1e-6)
    assert moved @ right_vec == pytest.approx(right * WALK_SPEED, abs=1e-6)


def test_diagonal_moves_keep_the_same_speed(sim_world):
    x, y, _ = open_grass_facing(sim_world)
    place_player(sim_world, x + 6, y, 0.3)
    sim_world.step(FrameInputs.hold("W", "D"))
    assert np.hypot(sim_world.x - x - 6, sim_world.y - y) == pytest.approx(WALK_SPEED)


def test_arrow_keys_and_continuous_deltas_turn_the_camera(sim_world):
    yaw, pitch = sim_world.yaw, sim_world.pitch
    sim_world.step(FrameInputs.hold("RIGHT"))
    assert sim_world.yaw == pytest.approx(yaw + TURN_RATE)
    sim_world.step(FrameInputs.hold("LEFT", yaw=0.25))
    assert sim_world.yaw == pytest.approx(yaw + 0.25)
    sim_world.step(FrameInputs.hold("UP"))
    assert sim_world.pitch == pytest.approx(pitch + PITCH_RATE)
    sim_world.step(FrameInputs(pitch=-10.0))
    assert sim_world.pitch == pytest.approx(-0.45)  # clamped


def _best_shift(a: np.ndarray, b: np.ndarray, max_shift: int = 16) -> int:
    """Horizontal shift s minimizing |a[:, s:] - b[:, :-s]| (b is a moved left by s)."""
    errors = {}
    for s in range(-max_shift, max_shift + 1):
        if s >= 0:
            errors[s] = np.abs(a[:, s:] - b[:, : b.shape[1] - s]).mean()
        else:
            errors[s] = np.abs(a[:, :s] - b[:, -s:]).mean()
    return min(errors, key=errors.get)


def test_turning_right_slides_the_picture_left_by_the_projected_angle(sim_world):
    before = sim_world.step().rgb.astype(np.float32)
    delta = 0.1
    after = sim_world.step(FrameInputs(yaw=delta)).rgb.astype(np.float32)
    expected = delta * sim_world.renderer.proj  # pixels per radian near the centre
    band = slice(20, 108)
    assert abs(_best_shift(before[band].mean(2), after[band].mean(2)) - expected) <= 1.5


def test_looking_up_moves_the_horizon_down(sim_world):
    level = sim_world.step().rgb.astype(np.float32).mean(axis=(1, 2))
    up = sim_world.step(FrameInputs(pitch=0.3)).rgb.astype(np.float32).mean(axis=(1, 2))
    # More rows of sky (brighter at dusk-orange horizon or darker top) appear: rows shift down.
    shift = _best_shift(level[None, :], up[None, :], max_shift=40)
    assert shift < -10


def _walk_into(world, target_material, frames=80):
    material = world.terrain.material
    ys, xs = np.nonzero(material == target_material)
    for tx, ty in zip(xs, ys, strict=True):
        if tx < 12:  # keep the approach away from the map seam
            continue
        for dx in range(6, 12):
            sx, sy = tx - dx, ty
            if not world.blocked[sy % 256, sx % 256] and all(
                not world.blocked[sy % 256, (sx + k) % 256]
                or material[sy % 256, (sx + k) % 256] == target_material
                for k in range(dx)
            ):
                place_player(world, sx + 0.5, sy + 0.5, 0.0)
                visited = []
                for _ in range(frames):
                    world.step(FrameInputs.hold("W"))
                    visited.append(material[int(world.y), int(world.x)])
                return visited, tx
    raise AssertionError("no approach found")


@pytest.mark.parametrize("material", [WATER, TREE])
def test_collisions_keep_the_player_out_of_water_and_trees(sim_world, material):
    visited, target_x = _walk_into(sim_world, material)
    assert material not in visited
    assert target_x - 2.5 < sim_world.x < target_x  # walked right up to it and stopped
    assert not sim_world.blocked[int(sim_world.y), int(sim_world.x)]
