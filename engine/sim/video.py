"""Writing what the sim makes: H.264 + AAC MP4 (PyAV) and contact-sheet PNGs."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from .constants import FPS, SAMPLE_RATE


def write_mp4(path: Path, frames: np.ndarray, audio: np.ndarray, scale: int = 2) -> None:
    """frames (T, H, W, 3) uint8, audio (T, 800) int16 -> MP4 with synchronized sound.

    Frames are upscaled (nearest neighbour) so small worlds stay watchable.
    """
    import av

    path.parent.mkdir(parents=True, exist_ok=True)
    height, width = frames.shape[1] * scale, frames.shape[2] * scale
    with av.open(str(path), "w") as container:
        video = container.add_stream("libx264", rate=FPS)
        video.width, video.height, video.pix_fmt = width, height, "yuv420p"
        video.options = {"crf": "18", "preset": "veryfast"}
        sound = container.add_stream("aac", rate=SAMPLE_RATE)
        sound.layout = "mono"
        for frame in frames:
            big = frame.repeat(scale, 0).repeat(scale, 1) if scale > 1 else frame
            for packet in video.encode(av.VideoFrame.from_ndarray(big, format="rgb24")):
                container.mux(packet)
        samples = audio.reshape(1, -1)
        chunk = 1024
        for start in range(0, samples.shape[1], chunk):
            piece = np.ascontiguousarray(samples[:, start : start + chunk])
            aframe = av.AudioFrame.from_ndarray(piece, format="s16", layout="mono")
            aframe.sample_rate = SAMPLE_RATE
            aframe.pts = start
            for packet in sound.encode(aframe):
                container.mux(packet)
        for stream in (video, sound):
            for packet in stream.encode(None):
                container.mux(packet)


def contact_sheet(
    frames: np.ndarray, count: int = 16, columns: int = 4, indices: Sequence[int] | None = None
) -> np.ndarray:
    """Tile `count` evenly spaced frames (or the given indices) into one image."""
    if indices is None:
        indices = np.linspace(0, len(frames) - 1, min(count, len(frames))).astype(int).tolist()
    tiles = [frames[i] for i in indices]
    rows = -(-len(tiles) // columns)
    h, w = frames.shape[1:3]
    sheet = np.full((rows * (h + 2), columns * (w + 2), 3), 255, np.uint8)
    for k, tile in enumerate(tiles):
        r, c = divmod(k, columns)
        sheet[r * (h + 2) : r * (h + 2) + h, c * (w + 2) : c * (w + 2) + w] = tile
    return sheet


def save_png(path: Path, image: np.ndarray) -> None:
    from PIL import Image

    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(image).save(path)
