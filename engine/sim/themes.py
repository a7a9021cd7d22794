"""How the simulator draws each theme: palettes, terrain shape and ambient sound character."""

from __future__ import annotations

from dataclasses import dataclass, replace

RGB = tuple[int, int, int]


@dataclass(frozen=True)
class Theme:
    name: str
    sky_top: RGB
    sky_horizon: RGB
    fog: RGB
    ground: RGB  # the walkable surface (grass, snow, sand...)
    ground_surface: str  # footstep surface of `ground`: grass | sand | snow
    rock: RGB
    shore: RGB
    water: RGB
    foliage: RGB
    trunk: RGB
    water_level: float  # fraction of the height range under water
    height_scale: float  # terrain relief in world units
    roughness: float  # spectral slope of the heightmap noise: higher = smoother
    tree_density: float  # trees per grass cell
    rock_level: float  # normalized height above which the ground turns to rock
    fog_distance: float  # distance at which the clear-weather fog is complete
    ambient_hz: float  # pitch of the ambient drone
    ambient_noise: float  # gain of the ambient noise bed
    wind: float  # gain of the wind bed in clear weather
    glow: float = 0.0  # self-illumination of the ground pattern (neon)
    terraces: int = 0  # >0 quantizes the relief into mesas (canyons)


THEMES: tuple[Theme, ...] = (
    Theme(
        "ember_forest",
        (60, 25, 50),
        (240, 140, 80),
        (170, 100, 80),
        (125, 100, 45),
        "grass",
        (95, 80, 75),
        (160, 130, 80),
        (40, 70, 110),
        (150, 35, 30),
        (60, 35, 25),
        0.22,
        34.0,
        2.1,
        0.012,
        0.78,
        150.0,
        110.0,
        0.25,
        0.3,
    ),
    Theme(
        "frost_valley",
        (90, 140, 210),
        (215, 232, 245),
        (200, 215, 230),
        (225, 232, 240),
        "snow",
        (110, 115, 130),
        (180, 190, 205),
        (60, 110, 170),
        (30, 80, 70),
        (70, 60, 55),
        0.25,
        40.0,
        2.0,
        0.008,
        0.72,
        160.0,
        196.0,
        0.2,
        0.6,
    ),
    Theme(
        "desert_canyon",
        (60, 120, 200),
        (240, 200, 150),
        (220, 180, 140),
        (215, 160, 90),
        "sand",
        (170, 80, 50),
        (230, 200, 140),
        (40, 140, 150),
        (80, 140, 60),
        (110, 80, 50),
        0.12,
        48.0,
        2.4,
        0.003,
        0.55,
        170.0,
        147.0,
        0.15,
        0.5,
        terraces=5,
    ),
    Theme(
        "neon_night",
        (10, 5, 35),
        (80, 20, 110),
        (40, 10, 60),
        (35, 20, 70),
        "grass",
        (60, 60, 90),
        (90, 40, 120),
        (10, 40, 80),
        (0, 230, 200),
        (200, 30, 200),
        0.2,
        30.0,
        2.2,
        0.008,
        0.8,
        140.0,
        55.0,
        0.1,
        0.2,
        0.6,
    ),
    Theme(
        "misty_coast",
        (120, 140, 150),
        (200, 210, 210),
        (180, 190, 190),
        (90, 140, 80),
        "grass",
        (120, 120, 115),
        (200, 190, 150),
        (50, 90, 110),
        (40, 90, 60),
        (70, 55, 45),
        0.42,
        30.0,
        1.9,
        0.008,
        0.85,
        90.0,
        82.0,
        0.45,
        0.8,
    ),
)

THEME_NAMES: tuple[str, ...] = tuple(t.name for t in THEMES)
# The theme registry is engine.spec.THEMES (names, labels, card colours, suggested prompts);
# this module adds how the simulator draws each one, in the same order
# (tests/engine/test_spec.py keeps the two in step).
THEME_IDS: dict[str, int] = {t.name: i for i, t in enumerate(THEMES)}


def get_theme(name: str) -> Theme:
    for theme in THEMES:
        if theme.name == name:
            return theme
    raise KeyError(f"unknown theme {name!r}; known: {', '.join(THEME_NAMES)}")


def _mix(a: RGB, b: RGB, weight: float) -> RGB:
    red, green, blue = (
        int(round((1 - weight) * x + weight * y)) for x, y in zip(a, b, strict=True)
    )
    return red, green, blue


def apply_palette(theme: Theme, palette: dict[str, RGB], weight: float = 0.8) -> Theme:
    """Recolour a theme from a reference palette (keys: sky, foliage, ground)."""
    sky, foliage, ground = palette["sky"], palette["foliage"], palette["ground"]
    return replace(
        theme,
        sky_top=_mix(theme.sky_top, _mix(sky, (0, 0, 0), 0.3), weight),
        sky_horizon=_mix(theme.sky_horizon, sky, weight),
        fog=_mix(theme.fog, sky, weight * 0.7),
        ground=_mix(theme.ground, ground, weight),
        shore=_mix(theme.shore, _mix(ground, (255, 255, 255), 0.3), weight * 0.6),
        rock=_mix(theme.rock, _mix(ground, (128, 128, 128), 0.6), weight * 0.5),
        foliage=_mix(theme.foliage, foliage, weight),
    )
