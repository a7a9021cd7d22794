"""Reference images: the picture a player supplies sets the world's palette.

A reference is either a path to a PNG or an inline spec ``{"sky": [r,g,b], "foliage": [r,g,b],
"ground": [r,g,b]}``. An inline spec is rendered to a three-band picture (sky on top, foliage in
the middle, ground below) so a model always receives pixels, and the palette read back from that
picture is exactly the spec: image -> palette is a simple, learnable mapping.
"""

from __future__ import annotations

import numpy as np

# The picture format is defined once in engine.spec (the runtime reads it without the simulator).
from engine.spec import REFERENCE_SIZE, ReferenceImageError, ReferenceSpec, band_colours
from engine.spec import load_reference_image as load_reference_image

__all__ = [
    "REFERENCE_SIZE",
    "ReferenceImageError",
    "ReferenceSpec",
    "load_reference_image",
    "palette_from_image",
]


def palette_from_image(image: np.ndarray) -> dict[str, tuple[int, int, int]]:
    """Mean colour of each horizontal band of the picture, rounded."""
    palette: dict[str, tuple[int, int, int]] = {}
    for band, colour in band_colours(image).items():
        red, green, blue = (int(round(v)) for v in colour)
        palette[band] = (red, green, blue)
    return palette
