"""What every part agrees on about a world: timing, keys, themes and the reference picture.

Import-light on purpose (standard library only at import time): the web processes, the runtime
and the simulator read these numbers from here, so importing them never loads the simulator
or torch. `engine.sim.constants` and `engine.sim.themes` re-export what they share with it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np

# Timing: frame i is presented at i / FPS s; its audio covers [i / FPS, (i + 1) / FPS) s.
FPS = 20
SAMPLE_RATE = 16_000
SAMPLES_PER_FRAME = SAMPLE_RATE // FPS  # 800
DEFAULT_RESOLUTION = 128
SUPPORTED_RESOLUTIONS = (64, 128, 256)

# Held keys as a bitmask (labels store the mask; scripts and the play page use the names).
KEY_BITS: dict[str, int] = {
    "W": 1,
    "A": 2,
    "S": 4,
    "D": 8,
    "LEFT": 16,
    "RIGHT": 32,
    "UP": 64,
    "DOWN": 128,
}

# The camera: held arrow keys turn it (LEFT/RIGHT) and tilt it (UP/DOWN) by these radians a
# frame. The simulator moves by them and the world model's camera warp reads them.
TURN_RATE = 0.06
PITCH_RATE = 0.03
PITCH_LIMIT = 0.45  # radians up or down from level
# How far the picture moves, in 8-pixel latent cells, per radian of camera move (at every
# resolution): a turn slides the sky panorama (4 frame widths around, 16 cells a frame width)
# and, on average over the columns, the terrain by 4 * 16 / (2 pi) cells; a tilt moves the
# horizon by tan(pitch) * the projection's half width (90-degree field of view: 8 cells).
TURN_CELLS_PER_RADIAN = 4 * 16 / (2 * math.pi)
PITCH_CELLS_PER_RADIAN = 8.0
# Walking: W/S/A/D move the eye this many world units a frame (diagonals no faster), at this
# height over the ground; the world model's walk warp spreads a flat ground out by them.
WALK_SPEED = 0.25
EYE_HEIGHT = 2.4
# A footstep every STRIDE world units walked (and on a walk's first frame); between two the
# eye bobs up by BOB_HEIGHT at most. The world model's sound cues keep the same rhythm
# (engine/model/sound_cues.py).
STRIDE = 2.0
BOB_HEIGHT = 0.3


@dataclass(frozen=True)
class ThemeInfo:
    """A theme as people see it: its name, its label, the CSS colours of the card the gallery
    paints until the model has drawn a thumbnail, and sentences worth suggesting on the play
    page. How the simulator draws it lives in engine.sim.themes, keyed by the same name."""

    name: str
    label: str
    card_sky: str
    card_ground: str
    card_sun: str
    suggested_prompts: tuple[str, ...]


THEMES: tuple[ThemeInfo, ...] = (
    ThemeInfo(
        "ember_forest",
        "Ember forest",
        "#f2a65a",
        "#3d5a2a",
        "#ffe08a",
        (
            "cast fire magic",
            "give the creature a leaf",
            "make it dusk",
            "spawn a tree",
            "make it rain",
        ),
    ),
    ThemeInfo(
        "frost_valley",
        "Frost valley",
        "#9cc3e6",
        "#e8f0f5",
        "#ffffff",
        (
            "make it snow",
            "summon a lantern",
            "make it night",
            "bring in the fog",
            "give the creature a leaf",
        ),
    ),
    ThemeInfo(
        "desert_canyon",
        "Desert canyon",
        "#f6c98a",
        "#b5642d",
        "#fff2c2",
        ("summon a dragon", "make a rainbow", "make it dusk", "cast fire magic", "summon a statue"),
    ),
    ThemeInfo(
        "neon_night",
        "Neon night",
        "#1b1035",
        "#2de2e6",
        "#ff4fd8",
        (
            "summon a lantern",
            "make it rain",
            "summon a crystal",
            "summon a dragon",
            "give the creature a leaf",
        ),
    ),
    ThemeInfo(
        "misty_coast",
        "Misty coast",
        "#c9d6d8",
        "#4f7b74",
        "#f4f1e4",
        (
            "make it rain",
            "make a rainbow",
            "bring in the fog",
            "make it night",
            "give the creature a leaf",
        ),
    ),
)
THEME_NAMES: tuple[str, ...] = tuple(theme.name for theme in THEMES)
THEMES_BY_NAME: dict[str, ThemeInfo] = {theme.name: theme for theme in THEMES}

# Suggested on the play page for a world whose theme has none of its own.
DEFAULT_PROMPTS: tuple[str, ...] = (
    "make it rain",
    "make it night",
    "cast fire magic",
    "summon a dragon",
    "give the creature a leaf",
    "make a rainbow",
)


def suggested_prompts(theme: str) -> tuple[str, ...]:
    info = THEMES_BY_NAME.get(theme)
    return info.suggested_prompts if info is not None else DEFAULT_PROMPTS


# Reference pictures: a PNG path or an inline {"sky", "foliage", "ground"} palette, always
# handed to a model as a REFERENCE_SIZE-square picture of three horizontal bands.
REFERENCE_SIZE = 64
REFERENCE_BANDS: dict[str, tuple[float, float]] = {
    "sky": (0.0, 0.4),
    "foliage": (0.4, 0.6),
    "ground": (0.6, 1.0),
}

ReferenceSpec = str | dict[str, Any]


class ReferenceImageError(ValueError):
    """A reference image spec that cannot be read."""


def _rgb(value: Any, field: str) -> tuple[int, int, int]:
    if (
        not isinstance(value, list | tuple)
        or len(value) != 3
        or not all(isinstance(v, int | float) and 0 <= v <= 255 for v in value)
    ):
        raise ReferenceImageError(f"reference_image.{field} must be [r, g, b] in 0..255")
    red, green, blue = (int(v) for v in value)
    return red, green, blue


def band_colours(image: np.ndarray) -> dict[str, tuple[float, float, float]]:
    """The mean colour of each of `REFERENCE_BANDS` of an (H, W, 3) picture: what a reference
    picture asks of the world (the simulator rounds it; the palette edit is told it)."""
    height = image.shape[0]
    colours: dict[str, tuple[float, float, float]] = {}
    for band, (lo, hi) in REFERENCE_BANDS.items():
        rows = image[int(lo * height) : max(int(hi * height), int(lo * height) + 1)]
        red, green, blue = (float(v) for v in rows.reshape(-1, 3).mean(axis=0))
        colours[band] = (red, green, blue)
    return colours


def load_reference_image(spec: ReferenceSpec, base_dir: Path | None = None) -> np.ndarray:
    """Return the reference as a (64, 64, 3) uint8 picture (numpy and PIL load on first use)."""
    import numpy as np

    size = REFERENCE_SIZE
    if isinstance(spec, dict):
        if set(spec) != set(REFERENCE_BANDS):
            raise ReferenceImageError(
                f"inline reference_image needs exactly keys {sorted(REFERENCE_BANDS)}, "
                f"got {sorted(spec)}"
            )
        image = np.zeros((size, size, 3), np.uint8)
        for band, (lo, hi) in REFERENCE_BANDS.items():
            image[int(lo * size) : int(hi * size)] = _rgb(spec[band], band)
        return image
    if isinstance(spec, str):
        from PIL import Image

        path = Path(spec)
        if base_dir is not None and not path.is_absolute():
            path = base_dir / path
        try:
            with Image.open(path) as img:
                resized = img.convert("RGB").resize((size, size), Image.Resampling.BILINEAR)
                return np.asarray(resized, np.uint8).copy()
        except (OSError, ValueError) as exc:
            raise ReferenceImageError(f"cannot read reference image {str(path)!r}: {exc}") from exc
    raise ReferenceImageError(
        "reference_image must be a PNG path or an inline {sky, foliage, ground}"
    )
