"""Reading what a session streamed back from its recording, for comparisons between sessions."""

import json
import time
from pathlib import Path

import numpy as np

from worldsite.engine_gateway.recording import decode_recording, open_recording


def recorded_session(folder: Path, timeout: float = 15) -> tuple[np.ndarray, list[dict]]:
    """(frames, inputs) once the worker has closed the recording."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        meta = folder / "meta.json"
        if meta.exists() and json.loads(meta.read_text()).get("end_reason"):
            break
        time.sleep(0.1)
    frames, _ = decode_recording(open_recording(folder))
    inputs = [json.loads(line) for line in (folder / "inputs.jsonl").read_text().splitlines()]
    return np.stack(frames).astype(np.float32), inputs


def first_frame_with(inputs: list[dict], **match) -> int:
    return min(e["frame"] for e in inputs if all(e.get(k) == v for k, v in match.items()))


def first_effective_input(inputs: list[dict]) -> int:
    """The first frame with an input that can change the picture: a sentence, a picture, a held
    key or a camera move (the page also reports "nothing held", which changes nothing)."""

    def effective(e: dict) -> bool:
        if e.get("kind") != "action":
            return True
        return bool(e.get("keys")) or bool(e.get("yaw")) or bool(e.get("pitch"))

    return min((e["frame"] for e in inputs if effective(e)), default=1 << 30)


def divergence(a: np.ndarray, b: np.ndarray, start: int, end: int) -> float:
    """Mean absolute difference of two sessions' frames over [start, end)."""
    end = min(end, len(a), len(b))
    return float(np.abs(a[start:end] - b[start:end]).mean()) if end > start else 0.0
