"""Visibility labels: what a player can see this frame, for the eval's judges."""

from __future__ import annotations

import numpy as np

from engine.sim import FrameInputs, SimWorld, WorldSpec
from engine.sim.constants import OBJECT_KINDS
from engine.sim.visibility import _billboard_boxes, rainbow_heading, shown_pixels, view_labels
from engine.sim.world import CREATURE_KEY, ICON_KEY, SpawnedObject


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


def test_shown_pixels_count_what_the_picture_shows():
    world = SimWorld(WorldSpec(5, "frost_valley"))
    world.step(FrameInputs(prompts=("summon a statue",)))
    for _ in range(3):
        world.step()
    statue = OBJECT_KINDS.index("statue")
    ahead = view_labels(world)
    x0, y0, x1, y1 = _billboard_boxes(world)[0]
    assert 0 < ahead["object_pixels"][statue] <= (x1 - x0) * (y1 - y0)  # not its whole box
    world.step(FrameInputs(yaw=float(np.pi)))
    assert view_labels(world)["object_pixels"][statue] == 0


def test_a_billboard_drawn_over_another_hides_it():
    world = SimWorld(WorldSpec(5, "frost_valley"))
    world.step()
    shown = shown_pixels(world)
    assert shown[CREATURE_KEY] > 0 and view_labels(world)["creature_pixels"] == shown[CREATURE_KEY]
    assert view_labels(world)["icon_pixels"] == shown.get(ICON_KEY, 0)
    # a dragon just behind the creature: the creature, drawn after it, covers part of it
    c = world.creature.state
    dx, dy = world.player_delta_to(c.x, c.y)
    x, y = world.x + 1.3 * dx, world.y + 1.3 * dy
    world.objects.append(SpawnedObject("dragon", x, y, world.terrain.height_at(x, y)))
    world.step()
    covered = shown_pixels(world)[0]
    c.x += 64  # the same frame without the creature in front
    assert shown_pixels(world)[0] > covered > 0


def test_pixel_depth_is_infinite_on_the_sky_and_nearest_where_a_billboard_stands():
    from engine.sim.visibility import _billboard_pass, pixel_depth

    world = SimWorld(WorldSpec(5, "frost_valley"))
    world.step()
    depth = pixel_depth(world)
    assert depth.shape == (world.renderer.size,) * 2 and depth.dtype == np.float32
    sky = world.renderer.last_source >= world.renderer.slices * world.renderer.size
    open_sky = sky & (_billboard_pass(world)[0] < 0)  # no billboard stands in front of it
    assert open_sky.any() and np.isinf(depth[open_sky]).all()
    assert np.isfinite(depth[~open_sky]).all()
    assert (depth[~sky] >= 0.7).all()  # nothing nearer than the renderer's near plane
    # the creature's pixels are as far as the creature stands, nearer than the land behind
    c = world.creature.state
    dx, dy = world.player_delta_to(c.x, c.y)
    ahead = dx * np.cos(world.yaw) + dy * np.sin(world.yaw)
    x0, y0, x1, y1 = (int(v) for v in _billboard_boxes(world)[CREATURE_KEY])
    box = depth[max(y0, 0) : y1, max(x0, 0) : x1]
    assert np.isclose(box, ahead, atol=1e-3).any()
