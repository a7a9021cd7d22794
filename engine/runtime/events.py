"""Session input events (the four input kinds) and their validation.

Events mirror the episode-script inputs of DESIGN.md, minus the frame time `t`:
    Action(keys=("W", "LEFT"), yaw=0.0, pitch=0.0)   keys held until the next Action;
                                                      yaw/pitch (radians) apply once
    Prompt(text="make it rain")
    Image(image=uint8 (H, W, 3) array | PNG path | {"sky": [r,g,b], "foliage": .., "ground": ..})
    AudioIn(loudness=0.8, onset=True)  or  AudioIn(samples=int16 mic PCM, any rate)
`parse_event(dict)` accepts the same JSON shapes as episode scripts: {"kind": "action", ...}.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from engine.spec import KEY_BITS, ReferenceImageError, load_reference_image

MAX_PROMPT_CHARS = 500
MAX_CAMERA_DELTA = math.pi  # radians per event
MAX_IMAGE_SIDE = 4096


class EventError(ValueError):
    """An event the session cannot accept; the message says which field and why."""


@dataclass(frozen=True)
class Action:
    keys: tuple[str, ...] = ()
    yaw: float = 0.0
    pitch: float = 0.0

    def __post_init__(self) -> None:
        if isinstance(self.keys, str) or not isinstance(self.keys, list | tuple | set | frozenset):
            raise EventError("action.keys must be a list of key names")
        unknown = [k for k in self.keys if k not in KEY_BITS]
        if unknown:
            raise EventError(f"action.keys: unknown {unknown}; known: {sorted(KEY_BITS)}")
        for name in ("yaw", "pitch"):
            value = getattr(self, name)
            if (
                isinstance(value, bool)
                or not isinstance(value, int | float)
                or not math.isfinite(value)
                or abs(value) > MAX_CAMERA_DELTA
            ):
                raise EventError(
                    f"action.{name} must be a finite number of radians, "
                    f"|{name}| <= {MAX_CAMERA_DELTA:.4f}"
                )
        object.__setattr__(self, "keys", tuple(self.keys))

    @property
    def mask(self) -> int:
        return sum(KEY_BITS[k] for k in set(self.keys))


@dataclass(frozen=True)
class Prompt:
    text: str

    def __post_init__(self) -> None:
        if not isinstance(self.text, str) or not self.text.strip():
            raise EventError("prompt.text must be a non-empty string")
        if len(self.text) > MAX_PROMPT_CHARS:
            raise EventError(f"prompt.text is longer than {MAX_PROMPT_CHARS} characters")


@dataclass(frozen=True)
class EncodedPrompt(Prompt):
    """A prompt with its sentence embedding (`Session.prepare` makes these)."""

    embedding: np.ndarray | None = field(default=None, compare=False, repr=False)
    event: str | None = None  # the event the sentence asks for, where the weights can tell

    def __post_init__(self) -> None:
        super().__post_init__()
        if not isinstance(self.embedding, np.ndarray) or self.embedding.ndim != 1:
            raise EventError("an encoded prompt needs its 1-D sentence embedding")


@dataclass(frozen=True)
class Image:
    image: Any  # (H, W, 3) uint8 array, PNG path or inline palette dict

    def picture(self) -> np.ndarray:
        """The reference as an (H, W, 3) uint8 array (validated)."""
        if isinstance(self.image, np.ndarray):
            a = self.image
            if a.dtype != np.uint8 or a.ndim != 3 or a.shape[2] != 3:
                raise EventError("image must be an (H, W, 3) uint8 array")
            if min(a.shape[:2]) < 1 or max(a.shape[:2]) > MAX_IMAGE_SIDE:
                raise EventError(f"image sides must be 1..{MAX_IMAGE_SIDE} pixels")
            return a
        try:
            return load_reference_image(self.image)
        except (ReferenceImageError, TypeError) as exc:
            raise EventError(f"image: {exc}") from exc


@dataclass(frozen=True)
class AudioIn:
    loudness: float | None = None  # 0..1
    onset: bool = False
    samples: np.ndarray | None = None  # raw mic PCM (int16 or float in [-1, 1])

    def __post_init__(self) -> None:
        if self.samples is None:
            lv = self.loudness
            if isinstance(lv, bool) or not isinstance(lv, int | float) or not 0 <= lv <= 1:
                raise EventError("audio.loudness must be a number in [0, 1]")
        else:
            s = np.asarray(self.samples)
            if s.ndim != 1 or s.size == 0 or s.size > 48_000:
                raise EventError("audio.samples must be a 1-D block of 1..48000 samples")
        if not isinstance(self.onset, bool | np.bool_):
            raise EventError("audio.onset must be true or false")

    def features(self, previous_loudness: float) -> tuple[float, bool]:
        """(loudness, onset); raw samples give RMS loudness and a jump-based onset."""
        if self.samples is None:
            return float(self.loudness or 0.0), bool(self.onset)
        s = np.asarray(self.samples, np.float32)
        if np.issubdtype(np.asarray(self.samples).dtype, np.integer):
            s = s / 32768.0
        loud = float(np.clip(np.sqrt(np.mean(s * s)) * 4.0, 0.0, 1.0))
        return loud, bool(self.onset or loud - previous_loudness > 0.3)


Event = Action | Prompt | Image | AudioIn


def parse_event(data: Any) -> Event:
    """Build an event from a script-style dict ({"kind": ...}); raise EventError on bad input."""
    if isinstance(data, Action | Prompt | Image | AudioIn):
        return data
    if not isinstance(data, dict):
        raise EventError(f"an event must be a dict or event object, got {type(data).__name__}")
    kind = data.get("kind")
    fields = {k: v for k, v in data.items() if k not in ("kind", "t")}
    allowed = {
        "action": {"keys", "yaw", "pitch"},
        "prompt": {"text"},
        "image": {"image"},
        "audio": {"loudness", "onset", "samples"},
    }
    if kind not in allowed:
        raise EventError(f"event.kind must be one of {sorted(allowed)}, got {kind!r}")
    extra = set(fields) - allowed[kind]
    if extra:
        raise EventError(f"{kind} event: unknown fields {sorted(extra)}")
    try:
        if kind == "action":
            return Action(
                tuple(fields.get("keys", ()))
                if isinstance(fields.get("keys", ()), list | tuple)
                else fields["keys"],
                fields.get("yaw", 0.0),
                fields.get("pitch", 0.0),
            )
        if kind == "prompt":
            return Prompt(fields.get("text", ""))
        if kind == "image":
            if "image" not in fields:
                raise EventError("image event needs an 'image' field")
            return Image(fields["image"])
        return AudioIn(fields.get("loudness"), fields.get("onset", False), fields.get("samples"))
    except TypeError as exc:
        raise EventError(f"{kind} event: {exc}") from exc
