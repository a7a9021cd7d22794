"""The site's one MP4 writer (PyAV, H.264 + optional AAC): previews, exports and recordings.

Two layouts: `faststart` files (index at the front: a finished file plays while downloading)
and `fragmented` ones (a fragment per keyframe: whatever was finished stays playable when the
writer dies mid-file, which is what a live recording needs).
"""

from collections.abc import Callable, Iterable
from fractions import Fraction
from pathlib import Path

import av
import numpy as np

from worldsite.engine_gateway.constants import SAMPLE_RATE

AUDIO_CHUNK = 1024  # AAC frame size
FASTSTART = {"movflags": "+faststart"}
FRAGMENTED = {"movflags": "frag_keyframe+empty_moov+default_base_moof", "flush_packets": "1"}


class Mp4Writer:
    """Frames and mono int16 audio in, one MP4 out; `close()` (or `with`) finishes the file."""

    def __init__(
        self,
        path: Path,
        *,
        fps: int,
        width: int,
        height: int,
        audio_rate: int | None = SAMPLE_RATE,
        fragmented: bool = False,
        crf: int | None = 20,
        keyframe_interval: int | None = None,
        tune: str | None = None,
    ) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.fps, self.width, self.height, self.audio_rate = fps, width, height, audio_rate
        self._container = av.open(str(path), "w", options=FRAGMENTED if fragmented else FASTSTART)
        self._video = self._container.add_stream("libx264", rate=fps)
        self._video.width, self._video.height, self._video.pix_fmt = width, height, "yuv420p"
        options = {"preset": "veryfast"}
        if crf is not None:
            options["crf"] = str(crf)
        if tune is not None:
            options["tune"] = tune
        self._video.codec_context.options = options
        if keyframe_interval is not None:
            self._video.codec_context.gop_size = keyframe_interval
        self._video.codec_context.time_base = Fraction(1, fps)
        self._audio = None
        if audio_rate is not None:
            self._audio = self._container.add_stream("aac", rate=audio_rate, layout="mono")
        self.frames = 0
        self.audio_samples = 0

    def add_frame(self, rgb: np.ndarray) -> None:
        """One RGB frame, scaled to the file's size with nearest-neighbour (pixel-art worlds)."""
        picture = av.VideoFrame.from_ndarray(_scale_nearest(rgb, self.height, self.width), "rgb24")
        picture.pts = self.frames
        picture.time_base = Fraction(1, self.fps)
        self._container.mux(self._video.encode(picture))
        self.frames += 1

    def add_audio(self, samples: np.ndarray) -> None:
        """A block of mono int16 samples, placed right after the previous block."""
        if self._audio is None or self.audio_rate is None:
            raise ValueError("this MP4 was opened without an audio track")
        block = np.ascontiguousarray(np.asarray(samples).astype(np.int16).reshape(1, -1))
        frame = av.AudioFrame.from_ndarray(block, format="s16", layout="mono")
        frame.sample_rate = self.audio_rate
        frame.pts = self.audio_samples
        frame.time_base = Fraction(1, self.audio_rate)
        self._container.mux(self._audio.encode(frame))
        self.audio_samples += block.shape[1]

    def close(self) -> None:
        try:
            self._container.mux(self._video.encode(None))
            if self._audio is not None:
                self._container.mux(self._audio.encode(None))
        finally:
            self._container.close()

    def __enter__(self) -> "Mp4Writer":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def write_mp4(
    path: Path,
    frames: Iterable[np.ndarray],
    *,
    fps: int,
    width: int,
    height: int,
    audio: np.ndarray | None = None,
    audio_rate: int = SAMPLE_RATE,
    crf: int = 20,
    on_frame: Callable[[int], None] | None = None,
) -> int:
    """Encode a whole clip into a faststart MP4; returns the number of frames written.

    Audio longer than the frames is cut at the last frame's end.
    """
    with Mp4Writer(
        path,
        fps=fps,
        width=width,
        height=height,
        audio_rate=audio_rate if audio is not None else None,
        crf=crf,
    ) as writer:
        for frame in frames:
            writer.add_frame(frame)
            if on_frame is not None:
                on_frame(writer.frames)
        if audio is not None:
            samples = np.asarray(audio).reshape(-1)[: int(round(writer.frames * audio_rate / fps))]
            for start in range(0, samples.shape[0], AUDIO_CHUNK):
                writer.add_audio(samples[start : start + AUDIO_CHUNK])
        return writer.frames


def _scale_nearest(frame: np.ndarray, height: int, width: int) -> np.ndarray:
    if frame.shape[0] == height and frame.shape[1] == width:
        return np.ascontiguousarray(frame)
    rows = (np.arange(height) * frame.shape[0] // height).astype(np.intp)
    cols = (np.arange(width) * frame.shape[1] // width).astype(np.intp)
    return np.ascontiguousarray(frame[rows][:, cols])
