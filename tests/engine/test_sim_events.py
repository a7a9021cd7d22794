import numpy as np
import pytest

from engine.sim import FrameInputs, SimWorld, WorldSpec
from engine.sim.constants import OBJECT_KINDS, TIMES_OF_DAY, WEATHERS
from engine.sim.fire import FireField
from engine.sim.terrain import GROUND, MAP_SIZE

from .conftest import luminance, open_grass_facing, place_player, run


def _twins(seed=11, theme="ember_forest", setup=()):
    worlds = []
    for _ in range(2):
        world = SimWorld(WorldSpec(seed=seed, theme=theme))
        x, y, yaw = open_grass_facing(world)
        place_player(world, x, y, yaw)
        for prompt in setup:
            world.step(FrameInputs(prompts=(prompt,)))
        worlds.append(world)
    return worlds


def _hf(rgb):
    """Horizontal second-difference energy: thin vertical streaks raise it."""
    grey = rgb.astype(np.float32).mean(2)
    return float(np.abs(grey[:, 2:] - 2 * grey[:, 1:-1] + grey[:, :-2]).mean())


def _audio_hf(frames):
    audio = np.concatenate([f.audio for f in frames]).astype(np.float32)
    return float(np.sqrt(np.mean(np.diff(audio) ** 2)))


def test_rain_adds_streaks_and_rain_sound():
    plain, rainy = _twins()
    before = [plain.step() for _ in range(10)]
    rainy_frames = [rainy.step(FrameInputs(prompts=("make it rain",)))]
    rainy_frames += [rainy.step() for _ in range(9)]
    assert rainy_frames[-1].labels["weather"] == WEATHERS.index("rain")
    assert _hf(rainy_frames[-1].rgb) > 1.5 * _hf(before[-1].rgb)
    assert _audio_hf(rainy_frames) > 2.0 * _audio_hf(before)


def test_snow_and_fog_change_label_and_pixels():
    plain, snowy = _twins()
    clear = plain.step().rgb
    snow = snowy.step(FrameInputs(prompts=("let it snow",))).rgb
    assert snowy.weather == "snow" and _hf(snow) > 1.3 * _hf(clear)
    foggy = snowy.step(FrameInputs(prompts=("bring in the fog",)))
    assert foggy.labels["weather"] == WEATHERS.index("fog")
    # Fog swallows the distance: many more pixels take the fog colour.
    fog_rgb = np.asarray(snowy.atmo.fog_rgb)

    def near_fog(rgb):
        return float((np.abs(rgb.astype(float) - fog_rgb).sum(2) < 40).mean())

    assert near_fog(foggy.rgb) > near_fog(clear) + 0.2


def test_night_darkens_and_dusk_sits_between():
    world = SimWorld(WorldSpec(seed=11, theme="misty_coast"))
    day = luminance(world.step().rgb)
    dusk_frame = world.step(FrameInputs(prompts=("make it dusk",)))
    night_frame = world.step(FrameInputs(prompts=("make it night",)))
    assert night_frame.labels["time_of_day"] == TIMES_OF_DAY.index("night")
    assert luminance(night_frame.rgb) < 0.5 * day
    assert luminance(night_frame.rgb) < luminance(dusk_frame.rgb) < day


def _orange_pixels(rgb):
    r, g, b = (rgb[..., i].astype(int) for i in range(3))
    return int(((r > 180) & (g > 50) & (g < 210) & (b < 110) & (r - b > 100)).sum())


def test_fire_ignites_grass_ahead_spreads_over_grass_only_and_shows():
    plain, burning = _twins()
    burning.step(FrameInputs(prompts=("cast fire magic",)))
    lit_at_cast = burning.fire.active.size
    frames = [burning.step() for _ in range(30)]
    plain_frame = run(plain, None, 31)
    assert frames[-1].labels["fire_present"]
    burnt = burning.ash | (burning.fire.life > 0)
    assert burnt.sum() > lit_at_cast  # it spread
    assert np.all(burning.material[burnt] == GROUND)  # never water, rock or trees
    assert _orange_pixels(frames[-1].rgb) > _orange_pixels(plain_frame.rgb) + 50


def test_fire_lights_the_scene_at_night():
    dark, lit = _twins(setup=("make it night",))
    lit.step(FrameInputs(prompts=("cast fire magic",)))
    assert luminance(run(lit, None, 10).rgb) > 1.2 * luminance(run(dark, None, 11).rgb)


def test_fire_stops_at_water_and_burns_out_to_ash():
    rng = np.random.default_rng(0)
    ys, xs = np.mgrid[0:MAP_SIZE, 0:MAP_SIZE]
    island = (xs - 100) ** 2 + (ys - 100) ** 2 < 12**2  # grass ringed by water
    field = FireField(island)
    field.ignite(np.array([100 * MAP_SIZE + 100]), rng)
    burnt = np.zeros(MAP_SIZE * MAP_SIZE, bool)
    for _ in range(400):
        ignited, done = field.tick(rng, wet=False)
        burnt[done] = True
        assert island.ravel()[field.active].all()
        if not field.burning:
            break
    assert not field.burning  # burned out
    assert burnt.sum() > 0.8 * island.sum() and not burnt[~island.ravel()].any()


def test_rain_douses_fire():
    world = _twins()[0]
    world.step(FrameInputs(prompts=("cast fire magic",)))
    world.step(FrameInputs(prompts=("make it rain",)))
    assert run(world, None, 60).labels["fire_present"] == 0


def test_rainbow_appears_in_the_sky():
    plain, bright = _twins(setup=())
    for world in (plain, bright):
        world.yaw, world.pitch = 0.157, 0.35  # face the rainbow, look up
    without = plain.step().rgb.astype(np.int16)
    frame = bright.step(FrameInputs(prompts=("make a rainbow",)))
    assert frame.labels["rainbow"]
    changed = np.abs(frame.rgb.astype(np.int16) - without).sum(2) > 60
    assert changed[: frame.rgb.shape[0] // 2].sum() > 200  # a visible arc in the upper half


@pytest.mark.parametrize("kind", OBJECT_KINDS)
def test_spawned_objects_are_labelled_and_drawn(kind):
    plain, spawned = _twins()
    frame = spawned.step(FrameInputs(prompts=(f"spawn a {kind}",)))
    bit = 1 << OBJECT_KINDS.index(kind)
    assert frame.labels["objects_present"] & bit and frame.labels["objects_in_view"] & bit
    assert (np.abs(frame.rgb.astype(int) - plain.step().rgb).sum(2) > 30).sum() > 20
    spawned.step(FrameInputs(yaw=np.pi))  # turn around: still present, no longer in view
    behind = spawned.step()
    assert behind.labels["objects_present"] & bit and not behind.labels["objects_in_view"] & bit


def test_lanterns_pulse_with_audio_input():
    world = _twins(setup=("make it night", "spawn a lantern"))[0]
    quiet = world.step().rgb
    world.loudness = 0.0
    loud = world.step(
        FrameInputs(
            audio=__import__("engine.sim", fromlist=["AudioInput"]).AudioInput(1.0, onset=True)
        )
    ).rgb
    assert luminance(loud) > luminance(quiet) * 1.03


def test_reference_image_sets_the_palette():
    spec = {"sky": [20, 40, 230], "foliage": [230, 20, 200], "ground": [30, 230, 40]}
    plain = SimWorld(WorldSpec(seed=11, theme="desert_canyon")).step().rgb.astype(float)
    tinted_world = SimWorld(WorldSpec(seed=11, theme="desert_canyon", reference_image=spec))
    tinted = tinted_world.step().rgb.astype(float)
    bottom = slice(96, 128)
    assert tinted[bottom, :, 1].mean() - tinted[bottom, :, 0].mean() > (
        plain[bottom, :, 1].mean() - plain[bottom, :, 0].mean() + 30
    )  # ground turns green
    later = tinted_world.step(
        FrameInputs(image={"sky": [250, 80, 0], "foliage": [0, 0, 0], "ground": [250, 80, 0]})
    )
    assert later.labels["image_event"]
    assert later.rgb[bottom, :, 0].mean() > tinted[bottom, :, 0].mean() + 40


def test_companion_appearance_changes():
    world = SimWorld(WorldSpec(seed=11, theme="misty_coast"))
    run(world, None, 60)  # the creature comes close
    world.creature.state.x, world.creature.state.y = world._ahead(3.0)
    before = world.step().rgb
    after = world.step(FrameInputs(prompts=("make the creature blue",)))
    assert after.labels["companion_look"] == 2 and after.labels["creature_in_view"]
    diff = after.rgb.astype(int) - before.astype(int)
    assert (diff[..., 2] - diff[..., 0] > 100).sum() > 10  # bluer fur
