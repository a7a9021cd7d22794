"""Reference pictures on their way to an engine worker: shrunk to a small PNG, then decoded.

Workers may run on other machines, so pictures travel as bytes through the channel layer,
never as file paths. The engine reads only a palette from them, so 128 pixels a side is plenty.
"""

from __future__ import annotations

import io
from typing import IO

import numpy as np
from PIL import Image

REFERENCE_SIDE = 128


def shrink_to_png(source: str | IO[bytes], side: int = REFERENCE_SIDE) -> tuple[bytes, int, int]:
    """An image file (path or open file) -> (PNG bytes at most `side` pixels a side, w, h)."""
    with Image.open(source) as original:
        picture = original.convert("RGB")
    picture.thumbnail((side, side))
    buffer = io.BytesIO()
    picture.save(buffer, format="PNG")
    return buffer.getvalue(), picture.width, picture.height


def decode_png(data: bytes) -> np.ndarray:
    """PNG bytes -> (H, W, 3) uint8."""
    with Image.open(io.BytesIO(data)) as picture:
        return np.asarray(picture.convert("RGB"), dtype=np.uint8)
