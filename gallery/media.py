"""Draws a world's gallery pictures with the shipped world model: a thumbnail and a preview."""

import io
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image

from worldsite.engine_gateway.constants import FPS
from worldsite.engine_gateway.video import write_mp4
from worldsite.engine_gateway.world_spec import EngineSpec

PREVIEW_FRAMES = 2 * FPS  # 2 s
# The model's fifth frame: after that its picture blurs into latent tiles within ~1.5 s of walking
# (engine/MODEL.md), and a thumbnail should show the world. The preview shows all 2 s as drawn.
THUMBNAIL_FRAME = 4
PREVIEW_SCALE = 2  # 128 -> 256 pixels, nearest neighbour
# A short walk with a look around, so the preview shows the world moving.
PREVIEW_SCRIPT = {
    0: {"kind": "action", "keys": ["W"]},
    20: {"kind": "action", "keys": ["W", "LEFT"]},
    34: {"kind": "action", "keys": ["W"]},
}


@dataclass
class WorldMedia:
    thumbnail_png: bytes
    preview_mp4: bytes


def render_world_media(spec: EngineSpec, workdir: Path) -> WorldMedia:
    """Play the world for a few seconds with the model and encode what it drew."""
    from worldsite.engine_gateway.runtime import open_engine_session  # loads torch

    session = open_engine_session(spec)
    frames: list[np.ndarray] = []
    while len(frames) < PREVIEW_FRAMES:
        event = PREVIEW_SCRIPT.get(len(frames))
        if event is not None:
            session.push(event)
        frames.extend(session.next_chunk().video)
    frames = frames[:PREVIEW_FRAMES]
    height, width = frames[0].shape[:2]

    thumbnail = Image.fromarray(frames[THUMBNAIL_FRAME]).resize(
        (width * PREVIEW_SCALE, height * PREVIEW_SCALE), Image.Resampling.NEAREST
    )
    png = io.BytesIO()
    thumbnail.save(png, format="PNG", optimize=True)

    path = workdir / "preview.mp4"
    write_mp4(path, frames, fps=FPS, width=width * PREVIEW_SCALE, height=height * PREVIEW_SCALE)
    return WorldMedia(thumbnail_png=png.getvalue(), preview_mp4=path.read_bytes())
