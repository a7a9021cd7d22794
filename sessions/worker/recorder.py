"""Records a play session as it streams: the inputs log and the audio/video the player saw.

Layout under the session's folder:
    inputs.jsonl  one JSON object per input, with the frame index it took effect at
    av.mp4        H.264 + AAC, fragmented (frag_keyframe+empty_moov): every finished
                  fragment stays playable even if the worker dies mid-session
    meta.json     world spec, fps, resolution; rewritten with the end reason when it closes
    reference.png the world's reference picture, when it has one (re-renders need it)
Export jobs read these files later; nothing here imports Django.
"""

import json
import threading
import time
from fractions import Fraction
from pathlib import Path
from typing import Any

import av
import numpy as np

AUDIO_RATE = 16_000
REFERENCE_FILE = "reference.png"
KEYFRAME_INTERVAL = 20  # one fragment a second at 20 fps: at most a second is lost in a crash


class SessionRecorder:
    def __init__(self, folder: Path, *, fps: int, width: int, height: int, spec: dict) -> None:
        self.folder = folder
        self.fps = fps
        # Recordings are private to the account running the site: the session folder and its
        # parent (the recordings root) are owner-only, whatever the umask says.
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        for private in (folder.parent, folder):
            private.chmod(0o700)
        self._lock = threading.Lock()
        self._inputs = (folder / "inputs.jsonl").open("a", encoding="utf-8")
        spec = dict(spec)
        picture = spec.pop("reference_png", None)
        if picture:  # the world's reference picture, kept beside the recording for re-renders
            (folder / REFERENCE_FILE).write_bytes(picture)
            spec["reference_file"] = REFERENCE_FILE
        self._meta: dict[str, Any] = {
            "spec": spec,
            "fps": fps,
            "width": width,
            "height": height,
            "audio_rate": AUDIO_RATE,
            "started_at": time.time(),
            "frames": 0,
        }
        self._write_meta()
        self._container = av.open(
            str(folder / "av.mp4"),
            mode="w",
            options={
                "movflags": "frag_keyframe+empty_moov+default_base_moof",
                "flush_packets": "1",
            },
        )
        self._video = self._container.add_stream("libx264", rate=fps)
        self._video.width, self._video.height = width, height
        self._video.pix_fmt = "yuv420p"
        self._video.codec_context.gop_size = KEYFRAME_INTERVAL
        self._video.codec_context.options = {"preset": "veryfast", "tune": "zerolatency"}
        self._video.codec_context.time_base = Fraction(1, fps)
        self._audio = self._container.add_stream("aac", rate=AUDIO_RATE, layout="mono")
        self._frames = 0
        self._audio_samples = 0
        self._closed = False

    def log_input(self, frame_index: int, event: dict[str, Any]) -> None:
        with self._lock:
            if self._closed:
                return
            line = {"frame": frame_index, "wall": round(time.time(), 3), **event}
            self._inputs.write(json.dumps(line) + "\n")
            self._inputs.flush()

    def write_frame(self, rgb: np.ndarray, audio_16k: np.ndarray) -> None:
        with self._lock:
            if self._closed:
                return
            video_frame = av.VideoFrame.from_ndarray(rgb, format="rgb24")
            video_frame.pts = self._frames
            video_frame.time_base = Fraction(1, self.fps)
            self._container.mux(self._video.encode(video_frame))
            samples = np.ascontiguousarray(audio_16k.astype(np.int16)).reshape(1, -1)
            audio_frame = av.AudioFrame.from_ndarray(samples, format="s16", layout="mono")
            audio_frame.sample_rate = AUDIO_RATE
            audio_frame.pts = self._audio_samples
            audio_frame.time_base = Fraction(1, AUDIO_RATE)
            self._container.mux(self._audio.encode(audio_frame))
            self._frames += 1
            self._audio_samples += samples.shape[1]

    def close(self, reason: str) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            try:
                self._container.mux(self._video.encode(None))
                self._container.mux(self._audio.encode(None))
            finally:
                self._container.close()
                self._inputs.close()
                self._meta.update(frames=self._frames, ended_at=time.time(), end_reason=reason)
                self._write_meta()

    def _write_meta(self) -> None:
        tmp = self.folder / "meta.json.tmp"
        tmp.write_text(json.dumps(self._meta, indent=1))
        tmp.replace(self.folder / "meta.json")
