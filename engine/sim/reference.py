"""Reference images: the picture a player supplies sets the world's palette.

A reference is either a path to a PNG or an inline spec ``{"sky": [r,g,b], "foliage": [r,g,b],
"ground": [r,g,b]}``. An inline spec is rendered to a three-band picture (sky on top, foliage in
the middle, ground below) so a model always receives pixels, and the palette read back from that
picture is exactly the spec: image -> palette is a simple, learnable mapping.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

REFERENCE_SIZE = 64
_BANDS = {"sky": (0.0, 0.4), "foliage": (0.4, 0.6), "ground": (0.6, 1.0)}

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
    return tuple(int(v) for v in value)


def load_reference_image(spec: ReferenceSpec, base_dir: Path | None = None) -> np.ndarray:
    """Return the reference as a (64, 64, 3) uint8 picture."""
    size = REFERENCE_SIZE
    if isinstance(spec, dict):
        unknown = set(spec) - set(_BANDS)
        if unknown or set(spec) != set(_BANDS):
            raise ReferenceImageError(
                f"inline reference_image needs exactly keys {sorted(_BANDS)}, got {sorted(spec)}"
            )
        image = np.zeros((size, size, 3), np.uint8)
        for band, (lo, hi) in _BANDS.items():
            image[int(lo * size) : int(hi * size)] = _rgb(spec[band], band)
        return image
    if isinstance(spec, str):
        from PIL import Image

        path = Path(spec)
        if base_dir is not None and not path.is_absolute():
            path = base_dir / path
        try:
            with Image.open(path) as img:
                img = img.convert("RGB").resize((size, size), Image.Resampling.BILINEAR)
                return np.asarray(img, np.uint8).copy()
        except (OSError, ValueError) as exc:
            raise ReferenceImageError(f"cannot read reference image {str(path)!r}: {exc}") from exc
    raise ReferenceImageError(
        "reference_image must be a PNG path or an inline {sky, foliage, ground}")


def palette_from_image(image: np.ndarray) -> dict[str, tuple[int, int, int]]:
    """Mean colour of each horizontal band of the picture."""
    height = image.shape[0]
    palette = {}
    for band, (lo, hi) in _BANDS.items():
        rows = image[int(lo * height) : max(int(hi * height), int(lo * height) + 1)]
        palette[band] = tuple(int(round(v)) for v in rows.reshape(-1, 3).mean(axis=0))
    return palette
