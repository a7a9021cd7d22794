"""Sky panoramas (360 degrees around, several screen-heights tall), rebuilt only when the
weather, time of day, rainbow or palette change. The renderer slices them by yaw and pitch."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np

from .themes import Theme

RAINBOW_BANDS = np.array(
    [(255, 40, 40), (255, 150, 30), (255, 240, 40), (60, 220, 60), (50, 120, 255), (140, 60, 220)],
    np.float32,
)


@dataclass(frozen=True)
class Atmosphere:
    """Colours and distances derived from theme, weather and time of day."""

    ambient: tuple[float, float, float]
    fog_rgb: tuple[float, float, float]
    fog_distance: float
    sky_top: tuple[float, float, float]
    sky_horizon: tuple[float, float, float]


_TIME_LIGHT = {"day": (1.0, 1.0, 1.0), "dusk": (0.95, 0.62, 0.48), "night": (0.28, 0.3, 0.45)}
_WEATHER_LIGHT = {"clear": 1.0, "rain": 0.72, "snow": 0.9, "fog": 0.85}
_WEATHER_FOG = {"clear": 1.0, "rain": 0.6, "snow": 0.5, "fog": 0.22}


def atmosphere(theme: Theme, weather: str, time_of_day: str) -> Atmosphere:
    tint = np.asarray(_TIME_LIGHT[time_of_day]) * _WEATHER_LIGHT[weather]
    top = np.asarray(theme.sky_top, np.float64)
    horizon = np.asarray(theme.sky_horizon, np.float64)
    fog = np.asarray(theme.fog, np.float64)
    grey = np.array([150.0, 155.0, 165.0])
    if weather in ("rain", "snow"):
        w = 0.65 if weather == "rain" else 0.5
        top, horizon, fog = (
            (1 - w) * top + w * grey * 0.8,
            (1 - w) * horizon + w * grey,
            (1 - w) * fog + w * grey,
        )
    elif weather == "fog":
        top = horizon = fog = 0.3 * fog + 0.7 * np.array([200.0, 200.0, 205.0])
    if time_of_day == "dusk":
        top = 0.5 * top + 0.5 * np.array([70.0, 40.0, 110.0])
        horizon = 0.4 * horizon + 0.6 * np.array([255.0, 130.0, 60.0])
        fog = 0.5 * fog + 0.5 * np.array([200.0, 110.0, 80.0])
    elif time_of_day == "night":
        top, horizon, fog = top * 0.12 + [2, 3, 15], horizon * 0.18 + [8, 10, 30], fog * 0.15
    return Atmosphere(
        ambient=_rgb(tint),
        fog_rgb=_rgb(fog),
        fog_distance=theme.fog_distance * _WEATHER_FOG[weather],
        sky_top=_rgb(top),
        sky_horizon=_rgb(horizon),
    )


def _rgb(colour: Any) -> tuple[float, float, float]:
    red, green, blue = (float(v) for v in colour)
    return red, green, blue


RAINBOW_CENTRE = 0.15  # of the panorama's width: the rainbow stands at a fixed heading


@lru_cache(maxsize=4)
def rainbow_arc(width: int, height: int) -> tuple[np.ndarray, np.ndarray]:
    """(band index, arc mask), both (height, width): where the rainbow sits in the panorama."""
    v, u = np.mgrid[0:height, 0:width].astype(np.float32)
    px_per_rad = width / (2 * np.pi)
    centre_u, centre_v = RAINBOW_CENTRE * width, height / 2 + 0.1 * px_per_rad
    dist = np.sqrt((u - centre_u) ** 2 + (v - centre_v) ** 2) / px_per_rad  # radians
    dist = np.minimum(dist, np.sqrt((u - centre_u - width) ** 2 + (v - centre_v) ** 2) / px_per_rad)
    band = ((0.8 - dist) / 0.025).astype(np.int32)
    below = np.arange(height) >= height / 2
    arc = (band >= 0) & (band < len(RAINBOW_BANDS)) & ~below[:, None]
    band.flags.writeable = arc.flags.writeable = False
    return band, arc


def build_panorama(
    atmo: Atmosphere,
    time_of_day: str,
    weather: str,
    rainbow: bool,
    width: int,
    height: int,
    seed: int,
) -> np.ndarray:
    """(height, width, 3) uint8; the horizon sits at row height // 2, 0 rad at column 0."""
    rows = np.arange(height, dtype=np.float32)
    up = np.clip((height / 2 - rows) / (height / 4), 0, 1)[:, None]  # 0 horizon .. 1 zenith
    top, hor = np.asarray(atmo.sky_top, np.float32), np.asarray(atmo.sky_horizon, np.float32)
    column = hor + (top - hor) * np.sqrt(up)  # (height, 3)
    pano = np.repeat(column[:, None, :], width, axis=1)
    below = rows >= height / 2
    pano[below] = atmo.fog_rgb
    v, u = np.mgrid[0:height, 0:width].astype(np.float32)
    clear_sky = weather == "clear"
    if time_of_day == "night" and weather == "clear":
        rng = np.random.default_rng(seed)
        count = width * height // 150
        sy = rng.integers(0, height // 2 - 2, count)
        sx = rng.integers(0, width, count)
        pano[sy, sx] = np.maximum(pano[sy, sx], 120 + 135 * rng.random((count, 1)))
        moon = (u - 0.3 * width) ** 2 + (v - 0.28 * height) ** 2 < (0.018 * width) ** 2
        pano[moon] = (235, 235, 210)
    elif clear_sky:
        elevation = 0.3 if time_of_day == "day" else 0.48
        radius = 0.012 * width if time_of_day == "day" else 0.02 * width
        dist = np.sqrt((u - 0.62 * width) ** 2 + (v - elevation * height) ** 2)
        glow = np.clip(1.6 - dist / radius, 0, 1)[..., None]
        sun = (255, 245, 200) if time_of_day == "day" else (255, 150, 70)
        pano = pano * (1 - glow) + np.asarray(sun, np.float32) * glow
    if rainbow:
        band, arc = rainbow_arc(width, height)
        alpha = 0.75 if time_of_day != "night" else 0.35
        pano[arc] = (1 - alpha) * pano[arc] + alpha * RAINBOW_BANDS[band[arc]]
    return np.clip(pano, 0, 255).astype(np.uint8)
