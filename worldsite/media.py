"""Writing MP4 files for the site's jobs (gallery previews, session exports) with PyAV."""

from collections.abc import Callable, Iterable
from fractions import Fraction
from pathlib import Path

import av
import numpy as np

AUDIO_CHUNK = 1024  # AAC frame size


def write_mp4(
    path: Path,
    frames: Iterable[np.ndarray],
    *,
    fps: int,
    width: int,
    height: int,
    audio: np.ndarray | None = None,
    audio_rate: int = 16_000,
    crf: int = 20,
    on_frame: Callable[[int], None] | None = None,
) -> int:
    """Encode RGB frames (H.264, yuv420p) and optional mono int16 audio (AAC) into an MP4 with
    the index at the front (faststart: it plays while downloading). Returns frames written.

    Frames are scaled to width x height with nearest-neighbour (the worlds are pixel art).
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    written = 0
    with av.open(str(path), "w", options={"movflags": "+faststart"}) as container:
        video = container.add_stream("libx264", rate=fps)
        video.width, video.height, video.pix_fmt = width, height, "yuv420p"
        video.options = {"crf": str(crf), "preset": "veryfast"}
        video.codec_context.time_base = Fraction(1, fps)
        sound = None
        if audio is not None:
            sound = container.add_stream("aac", rate=audio_rate, layout="mono")
        for frame in frames:
            scaled = _scale_nearest(frame, height, width)
            picture = av.VideoFrame.from_ndarray(scaled, format="rgb24")
            picture.pts = written
            picture.time_base = Fraction(1, fps)
            container.mux(video.encode(picture))
            written += 1
            if on_frame is not None:
                on_frame(written)
        container.mux(video.encode(None))
        if sound is not None:
            samples = np.ascontiguousarray(audio.astype(np.int16).reshape(1, -1))
            samples = samples[:, : int(round(written * audio_rate / fps))]
            for start in range(0, samples.shape[1], AUDIO_CHUNK):
                piece = np.ascontiguousarray(samples[:, start : start + AUDIO_CHUNK])
                block = av.AudioFrame.from_ndarray(piece, format="s16", layout="mono")
                block.sample_rate = audio_rate
                block.pts = start
                block.time_base = Fraction(1, audio_rate)
                container.mux(sound.encode(block))
            container.mux(sound.encode(None))
    return written


def _scale_nearest(frame: np.ndarray, height: int, width: int) -> np.ndarray:
    if frame.shape[0] == height and frame.shape[1] == width:
        return np.ascontiguousarray(frame)
    rows = (np.arange(height) * frame.shape[0] // height).astype(np.intp)
    cols = (np.arange(width) * frame.shape[1] // width).astype(np.intp)
    return np.ascontiguousarray(frame[rows][:, cols])
