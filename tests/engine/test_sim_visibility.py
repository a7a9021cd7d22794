"""Visibility labels: what a player can see this frame, for the eval's judges."""

from __future__ import annotations

import numpy as np

from engine.sim import FrameInputs, SimWorld, WorldSpec
from engine.sim.visibility import rainbow_heading, view_labels


def _turn_to(world: SimWorld, heading: float) -> None:
    delta = (heading - world.yaw + np.pi) % (2 * np.pi) - np.pi
    world.step(FrameInputs(yaw=float(delta)))


def test_rainbow_pixels_only_when_facing_it():
    world = SimWorld(WorldSpec(5, "frost_valley"))
    world.step(FrameInputs(prompts=("make a rainbow",)))
    _turn_to(world, rainbow_heading())
    facing = view_labels(world)["rainbow_pixels"]
    _turn_to(world, rainbow_heading() + np.pi)
    away = view_labels(world)["rainbow_pixels"]
    assert facing > 500 and away == 0


def test_flames_counted_in_view_and_audible_nearby():
    world = SimWorld(WorldSpec(5, "frost_valley"))
    world.step()
    assert view_labels(world)["flame_pixels"] == 0
    world.step(FrameInputs(prompts=("fire spell",)))
    for _ in range(10):
        world.step()
    ahead = view_labels(world)
    world.step(FrameInputs(yaw=float(np.pi)))
    behind = view_labels(world)
    assert ahead["flame_pixels"] > 100 and behind["flame_pixels"] == 0
    assert ahead["fire_gain"] > 0.5  # the fire was cast 7 cells ahead: within earshot


def test_creature_box_follows_the_creature():
    world = SimWorld(WorldSpec(5, "frost_valley"))
    frame = world.step()
    view = view_labels(world)
    assert frame.labels["creature_in_view"] and view["creature_px"] > 4
    x0, y0, x1, y1 = view["creature_box"]
    assert 0 <= x0 < x1 <= 128 and y0 < y1
    world.step(FrameInputs(yaw=float(np.pi)))
    view = view_labels(world)
    assert view["creature_px"] == 0 and (view["creature_box"] == -1).all()
