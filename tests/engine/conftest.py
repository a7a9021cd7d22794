"""Shared helpers for the engine tests (pure numpy; no Django)."""

from __future__ import annotations

import numpy as np
import pytest

from engine.sim import FrameInputs, SimWorld, WorldSpec
from engine.sim.terrain import GROUND, MAP_SIZE


def luminance(rgb: np.ndarray) -> float:
    return float((rgb.astype(np.float32) @ np.array([0.299, 0.587, 0.114])).mean() / 255)


def place_player(world: SimWorld, x: float, y: float, yaw: float) -> None:
    world.x, world.y, world.yaw = x, y, yaw
    world.eye_ground = world.terrain.height_at(x, y)


def run(world: SimWorld, inputs: FrameInputs | None, frames: int):
    """Step `frames` times with the same inputs; return the last frame."""
    frame = None
    for _ in range(frames):
        frame = world.step(inputs or FrameInputs())
    return frame


def open_grass_facing(world: SimWorld, distance: int = 12) -> tuple[float, float, float]:
    """A grass cell with `distance` cells of grass straight ahead (east)."""
    material = world.terrain.material
    ground = material == GROUND
    run_ok = np.ones_like(ground)
    for d in range(-3, distance + 1):
        run_ok &= np.roll(ground, -d, axis=1)
    for d in (-3, 3):
        run_ok &= np.roll(ground, -d, axis=0)
    ys, xs = np.nonzero(run_ok)
    assert xs.size, "no open grass strip in this world"
    return float(xs[0]) + 0.5, float(ys[0]) + 0.5, 0.0


@pytest.fixture
def sim_world() -> SimWorld:
    return SimWorld(WorldSpec(seed=11, theme="ember_forest"))


__all__ = ["MAP_SIZE", "luminance", "open_grass_facing", "place_player", "run"]
