"""The recording of a played session: one versioned format, its writer and its reader.

Layout of a session's folder (format 1):
    meta.json     {"format": 1, "spec": EngineSpec without the picture, "fps", "width",
                  "height", "audio_rate", "started_at", "frames"}; rewritten with
                  "ended_at" and "end_reason" when the recording closes
    inputs.jsonl  one JSON object per input: {"frame": index it took effect at, "wall", ...event}
    av.mp4        H.264 + AAC, fragmented: every finished fragment stays playable even if the
                  worker dies mid-session
    reference.png the world's reference picture, when it has one (re-renders need it)

The worker writes it while streaming (RecordingWriter); export jobs read it later
(open_recording). Nothing here imports Django. Recordings written before the format was
numbered have no "format" key and are format 1.
"""

import json
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import av
import numpy as np

from worldsite.engine_gateway.constants import SAMPLE_RATE
from worldsite.engine_gateway.video import Mp4Writer
from worldsite.engine_gateway.world_spec import EngineSpec

FORMAT = 1
META_FILE = "meta.json"
INPUTS_FILE = "inputs.jsonl"
AV_FILE = "av.mp4"
REFERENCE_FILE = "reference.png"
KEYFRAME_INTERVAL = 20  # one fragment a second at 20 fps: at most a second is lost in a crash


class RecordingError(Exception):
    """The recording cannot be read; the message can be shown to the player."""


class RecordingWriter:
    """Writes one session's recording as it streams; thread-safe, and a no-op once closed."""

    def __init__(
        self, folder: Path, *, fps: int, width: int, height: int, spec: EngineSpec | dict
    ) -> None:
        self.folder = folder
        # Recordings are private to the account running the site: the session folder and its
        # parent (the recordings root) are owner-only, whatever the umask says.
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        for private in (folder.parent, folder):
            private.chmod(0o700)
        self._lock = threading.Lock()
        self._inputs = (folder / INPUTS_FILE).open("a", encoding="utf-8")
        stored: dict[str, Any] = dict(spec)
        picture = stored.pop("reference_png", None)
        if picture:
            (folder / REFERENCE_FILE).write_bytes(picture)
            stored["reference_file"] = REFERENCE_FILE
        self._meta: dict[str, Any] = {
            "format": FORMAT,
            "spec": stored,
            "fps": fps,
            "width": width,
            "height": height,
            "audio_rate": SAMPLE_RATE,
            "started_at": time.time(),
            "frames": 0,
        }
        self._write_meta()
        self._video = Mp4Writer(
            folder / AV_FILE,
            fps=fps,
            width=width,
            height=height,
            fragmented=True,
            crf=None,
            keyframe_interval=KEYFRAME_INTERVAL,
            tune="zerolatency",
        )
        self._closed = False

    def log_input(self, frame_index: int, event: dict[str, Any]) -> None:
        with self._lock:
            if self._closed:
                return
            line = {"frame": frame_index, "wall": round(time.time(), 3), **event}
            self._inputs.write(json.dumps(line) + "\n")
            self._inputs.flush()

    def write_frame(self, rgb: np.ndarray, audio: np.ndarray) -> None:
        """One frame and the audio that plays during it (mono int16 at SAMPLE_RATE)."""
        with self._lock:
            if self._closed:
                return
            self._video.add_frame(rgb)
            self._video.add_audio(audio)

    def close(self, reason: str) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            try:
                self._video.close()
            finally:
                self._inputs.close()
                self._meta.update(
                    frames=self._video.frames, ended_at=time.time(), end_reason=reason
                )
                self._write_meta()

    def _write_meta(self) -> None:
        tmp = self.folder / (META_FILE + ".tmp")
        tmp.write_text(json.dumps(self._meta, indent=1))
        tmp.replace(self.folder / META_FILE)


@dataclass
class Recording:
    """A recording on disk, as its reader sees it."""

    folder: Path
    meta: dict[str, Any]

    @property
    def fps(self) -> int:
        return int(self.meta["fps"])

    @property
    def size(self) -> tuple[int, int]:
        """(height, width) of the recorded picture."""
        return int(self.meta["height"]), int(self.meta["width"])

    @property
    def frames(self) -> int:
        return int(self.meta.get("frames") or 0)

    @property
    def audio_rate(self) -> int:
        return int(self.meta.get("audio_rate", SAMPLE_RATE))

    def spec(self) -> dict[str, Any]:
        """The EngineSpec the session was opened with, reference picture included."""
        spec = dict(self.meta["spec"])
        picture = spec.pop("reference_file", None)
        if picture:
            spec["reference_png"] = (self.folder / picture).read_bytes()
        return spec

    def inputs_by_frame(self) -> dict[int, list[dict[str, Any]]]:
        """Logged events (without frame and wall time) by the frame they took effect at.

        Pictures are logged by shape only, so image events are left out: a replay keeps the
        spec's reference picture. A line cut by a crash is skipped.
        """
        path = self.folder / INPUTS_FILE
        if not path.exists():
            raise RecordingError("This session has no inputs log to re-render from.")
        by_frame: dict[int, list[dict[str, Any]]] = {}
        for line in path.read_text().splitlines():
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            event = {k: v for k, v in entry.items() if k not in ("frame", "wall")}
            if event.get("kind") == "image":
                continue
            by_frame.setdefault(int(entry["frame"]), []).append(event)
        return by_frame


def open_recording(folder: Path) -> Recording:
    try:
        meta = json.loads((folder / META_FILE).read_text())
    except FileNotFoundError as exc:
        raise RecordingError("This session has no recording (it may have expired).") from exc
    except ValueError as exc:
        raise RecordingError("This session's recording is damaged (unreadable metadata).") from exc
    version = meta.get("format", 1)
    if version != FORMAT:
        raise RecordingError(
            f"This session's recording has format {version!r}; this site reads {FORMAT}."
        )
    return Recording(folder=folder, meta=meta)


def decode_recording(recording: Recording) -> tuple[list[np.ndarray], np.ndarray]:
    """All frames (RGB) and the mono int16 audio of the streamed A/V recording."""
    path = recording.folder / AV_FILE
    if not path.exists():
        raise RecordingError(
            "The audio/video recording of this session is missing; "
            "the re-render export still works from its inputs."
        )
    frames: list[np.ndarray] = []
    audio: list[np.ndarray] = []
    try:
        with av.open(str(path)) as container:
            for frame in container.decode(video=0):
                frames.append(frame.to_ndarray(format="rgb24"))
        with av.open(str(path)) as container:
            if container.streams.audio:
                resampler = av.AudioResampler(format="s16", layout="mono", rate=SAMPLE_RATE)
                for sound in container.decode(audio=0):
                    for out in resampler.resample(sound):
                        audio.append(out.to_ndarray().reshape(-1))
    except (av.error.FFmpegError, ValueError) as exc:
        if not frames:
            raise RecordingError(
                "The recording of this session is damaged and cannot be read."
            ) from exc
        # A recording cut short by a crash: keep every frame that decoded.
    if not frames:
        raise RecordingError("The recording of this session holds no frames.")
    samples = np.concatenate(audio) if audio else np.zeros(0, np.int16)
    return frames, samples.astype(np.int16)
