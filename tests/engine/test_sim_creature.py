import numpy as np
import pytest

from engine.sim import AudioInput, FrameInputs, SimWorld, WorldSpec
from engine.sim.constants import CREATURE_MOODS, RELATIONSHIPS
from engine.sim.creature import COOLDOWN_FRAMES, FOLLOW_FRAMES

from .conftest import open_grass_facing, place_player, run


def _world() -> SimWorld:
    world = SimWorld(WorldSpec(seed=11, theme="misty_coast"))
    x, y, yaw = open_grass_facing(world)
    place_player(world, x, y, yaw)
    world.creature.state.x, world.creature.state.y = world._clear_point(x + 12, y)
    return world


def _mood(frame) -> str:
    return CREATURE_MOODS[frame.labels["creature_mood"]]


def test_the_creature_approaches_and_asks_for_a_gift():
    world = _world()
    start = world.step().labels["creature_distance"]
    frames = [world.step() for _ in range(120)]
    assert frames[-1].labels["creature_distance"] < min(start, 5.0)
    assert _mood(frames[-1]) == "curious" and world.creature.state.mode == "ask"


def test_a_leaf_makes_it_a_friend_that_follows():
    world = _world()
    run(world, None, 100)
    gift = world.step(FrameInputs(prompts=("give the creature a leaf",)))
    assert RELATIONSHIPS[gift.labels["creature_relationship"]] == "friend"
    frames = [world.step(FrameInputs.hold("S")) for _ in range(40)]  # back away
    assert all(_mood(f) == "happy" for f in frames)
    assert frames[-1].labels["creature_distance"] < 6.0  # it kept up


def test_a_dragon_frightens_it_away():
    world = _world()
    run(world, None, 100)
    near = world.step(FrameInputs(prompts=("offer it a dragon",))).labels["creature_distance"]
    frames = [world.step() for _ in range(60)]
    assert RELATIONSHIPS[frames[-1].labels["creature_relationship"]] == "fear"
    assert all(_mood(f) == "afraid" for f in frames)
    assert frames[-1].labels["creature_distance"] > near + 8


@pytest.mark.parametrize(
    ("gift", "mood", "closer"), [("leaf", "happy", True), ("dragon", "afraid", False)]
)
def test_a_later_encounter_depends_on_the_remembered_gift(gift, mood, closer):
    world = _world()
    run(world, None, 100)
    world.step(FrameInputs(prompts=(f"give the creature a {gift}",)))
    run(world, None, FOLLOW_FRAMES + COOLDOWN_FRAMES + 40)  # it wanders off and settles
    s = world.creature.state
    assert s.mode == "wander"
    # Meet it again from 10 units away.
    place_player(world, *world._clear_point(s.x - 10, s.y), 0.0)
    first = world.step()
    frames = [world.step() for _ in range(20)]
    assert all(_mood(f) == mood for f in frames)
    moved_closer = frames[-1].labels["creature_distance"] < first.labels["creature_distance"]
    assert moved_closer == closer


def test_a_loud_clap_startles_it_and_a_quiet_one_does_not():
    world = _world()
    run(world, None, 100)
    quiet = world.step(FrameInputs(audio=AudioInput(0.2, onset=True)))
    assert _mood(quiet) == "curious"
    loud = world.step(FrameInputs(audio=AudioInput(0.95, onset=True)))
    assert _mood(loud) == "startled" and loud.labels["audio_onset"]
    later = run(world, None, 40)
    assert _mood(later) == "curious"  # it recovers and comes back to ask


def test_creature_labels_follow_the_picture():
    world = _world()
    frame = run(world, None, 100)
    assert frame.labels["creature_in_view"]
    world.step(FrameInputs(yaw=np.pi))
    assert not world.step().labels["creature_in_view"]
