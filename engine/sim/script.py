"""Episode scripts: the JSON contract from DESIGN.md "Engine contracts", validated strictly.

    {"seed": 7, "theme": "frost_valley", "frames": 200,
     "reference_image": null | "palette.png"
                        | {"sky": [r,g,b], "foliage": [r,g,b], "ground": [r,g,b]},
     "inputs": [
       {"t": 0,  "kind": "action", "keys": ["W", "LEFT"], "yaw": 0.0, "pitch": 0.0},
       {"t": 40, "kind": "prompt", "text": "make it rain"},      # or {"event": "rain"}
       {"t": 90, "kind": "audio",  "loudness": 0.9, "onset": true},
       {"t": 120, "kind": "image", "image": {"sky": [..], "foliage": [..], "ground": [..]}}]}

An action's keys are HELD from its frame until the next action; its yaw/pitch deltas (radians)
apply at that frame only. Several inputs may share a frame. Relative image paths resolve
against the script file's folder.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .constants import KEY_BITS, SUPPORTED_RESOLUTIONS
from .prompts import EVENT_NAMES, resolve, training_paraphrases
from .reference import ReferenceImageError, load_reference_image
from .themes import THEME_NAMES
from .world import AudioInput, FrameInputs, SimFrame, SimWorld, WorldSpec

INPUT_KINDS = ("action", "prompt", "audio", "image")
_INPUT_FIELDS = {
    "action": {"keys", "yaw", "pitch"},
    "prompt": {"text", "event"},
    "audio": {"loudness", "onset"},
    "image": {"image"},
}


class ScriptError(ValueError):
    """An episode script that does not follow the contract; the message names the field."""


@dataclass
class EpisodeScript:
    seed: int
    theme: str
    frames: int
    inputs: list[dict[str, Any]] = field(default_factory=list)  # validated, sorted by t
    reference_image: str | dict[str, Any] | None = None
    resolution: int | None = None
    base_dir: Path | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"seed": self.seed, "theme": self.theme, "frames": self.frames}
        if self.reference_image is not None:
            out["reference_image"] = self.reference_image
        if self.resolution is not None:
            out["resolution"] = self.resolution
        out["inputs"] = self.inputs
        return out

    def world_spec(self, resolution: int | None = None) -> WorldSpec:
        ref = self.reference_image
        if isinstance(ref, str) and self.base_dir is not None and not Path(ref).is_absolute():
            ref = str(self.base_dir / ref)
        return WorldSpec(self.seed, self.theme, resolution or self.resolution or 128, ref)

    def frame_inputs(self) -> list[FrameInputs]:
        """One FrameInputs per frame, with held keys carried forward."""
        per_frame = [FrameInputs() for _ in range(self.frames)]
        held = 0
        by_t: dict[int, list[dict[str, Any]]] = {}
        for item in self.inputs:
            by_t.setdefault(item["t"], []).append(item)
        for t, frame in enumerate(per_frame):
            prompts: list[str] = []
            for item in by_t.get(t, ()):
                kind = item["kind"]
                if kind == "action":
                    held = sum(KEY_BITS[k] for k in set(item.get("keys", [])))
                    frame.yaw += float(item.get("yaw", 0.0))
                    frame.pitch += float(item.get("pitch", 0.0))
                elif kind == "prompt":
                    prompts.append(prompt_text(item))
                elif kind == "audio":
                    frame.audio = AudioInput(float(item["loudness"]), bool(item.get("onset")))
                else:
                    image = item["image"]
                    if isinstance(image, str) and self.base_dir and not Path(image).is_absolute():
                        image = str(self.base_dir / image)
                    frame.image = image
            frame.keys = held
            frame.prompts = tuple(prompts)
        return per_frame


def prompt_text(item: dict[str, Any]) -> str:
    """The text a prompt input carries (an event-only prompt uses its first paraphrase)."""
    return item["text"] if "text" in item else training_paraphrases(item["event"])[0]


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def parse_script(
    data: str | bytes | dict[str, Any], base_dir: Path | None = None, strict_prompts: bool = False
) -> EpisodeScript:
    """Validate a script (JSON text or parsed dict). `strict_prompts` rejects unknown text."""
    if isinstance(data, str | bytes):
        try:
            data = json.loads(data)
        except json.JSONDecodeError as exc:
            raise ScriptError(f"malformed JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise ScriptError("an episode script must be a JSON object")
    unknown = set(data) - {"seed", "theme", "frames", "inputs", "reference_image", "resolution"}
    if unknown:
        raise ScriptError(f"unknown top-level field(s): {', '.join(sorted(unknown))}")
    for name in ("seed", "theme", "frames"):
        if name not in data:
            raise ScriptError(f"missing required field {name!r}")
    if not _is_int(data["seed"]) or data["seed"] < 0:
        raise ScriptError("seed must be a non-negative integer")
    if data["theme"] not in THEME_NAMES:
        raise ScriptError(f"unknown theme {data['theme']!r}; known: {', '.join(THEME_NAMES)}")
    frames = data["frames"]
    if not _is_int(frames) or frames <= 0:
        raise ScriptError("frames must be a positive integer")
    resolution = data.get("resolution")
    if resolution is not None and resolution not in SUPPORTED_RESOLUTIONS:
        raise ScriptError(f"resolution must be one of {SUPPORTED_RESOLUTIONS}")
    reference = data.get("reference_image")
    if reference is not None:
        _check_image(reference, "reference_image", base_dir)
    raw_inputs = data.get("inputs", [])
    if not isinstance(raw_inputs, list):
        raise ScriptError("inputs must be a list")
    inputs = [
        _check_input(i, item, frames, base_dir, strict_prompts) for i, item in enumerate(raw_inputs)
    ]
    inputs.sort(key=lambda item: item["t"])  # stable: same-frame inputs keep their order
    return EpisodeScript(
        data["seed"], data["theme"], frames, inputs, reference, resolution, base_dir
    )


def _check_image(spec: Any, where: str, base_dir: Path | None) -> None:
    try:
        load_reference_image(spec, base_dir)
    except ReferenceImageError as exc:
        raise ScriptError(f"{where}: {exc}") from exc


def _check_input(
    index: int, item: Any, frames: int, base_dir: Path | None, strict_prompts: bool
) -> dict[str, Any]:
    where = f"inputs[{index}]"
    if not isinstance(item, dict):
        raise ScriptError(f"{where}: each input must be an object")
    t = item.get("t")
    if t is None:
        raise ScriptError(f"{where}.t: missing frame index")
    if not _is_int(t):
        raise ScriptError(f"{where}.t: must be an integer frame index, got {t!r}")
    if t < 0:
        raise ScriptError(f"{where}.t: negative frame index {t}")
    if t >= frames:
        raise ScriptError(f"{where}.t: frame {t} is beyond the episode's {frames} frames")
    kind = item.get("kind")
    if kind not in INPUT_KINDS:
        raise ScriptError(f"{where}.kind: unknown kind {kind!r}; expected one of {INPUT_KINDS}")
    extra = set(item) - {"t", "kind"} - _INPUT_FIELDS[kind]
    if extra:
        raise ScriptError(f"{where}: unknown field(s) for {kind}: {', '.join(sorted(extra))}")
    if kind == "action":
        keys = item.get("keys", [])
        if not isinstance(keys, list) or any(k not in KEY_BITS for k in keys):
            raise ScriptError(f"{where}.keys: must be a list of {sorted(KEY_BITS)}")
        for axis in ("yaw", "pitch"):
            if axis in item and not _is_number(item[axis]):
                raise ScriptError(f"{where}.{axis}: must be a number (radians)")
    elif kind == "prompt":
        if "text" not in item and "event" not in item:
            raise ScriptError(f"{where}: a prompt needs 'text' or 'event'")
        if "text" in item and not isinstance(item["text"], str):
            raise ScriptError(f"{where}.text: must be a string")
        if "event" in item:
            if item["event"] not in EVENT_NAMES:
                raise ScriptError(f"{where}.event: unknown event {item['event']!r}")
            if "text" in item and resolve(item["text"]).event != item["event"]:
                raise ScriptError(f"{where}.text: does not name event {item['event']!r}")
        elif strict_prompts and resolve(item["text"]).event is None:
            raise ScriptError(f"{where}.text: names no known event: {item['text']!r}")
    elif kind == "audio":
        loud = item.get("loudness")
        if not isinstance(loud, int | float) or not _is_number(loud) or not 0 <= loud <= 1:
            raise ScriptError(f"{where}.loudness: must be a number in [0, 1]")
        if "onset" in item and not isinstance(item["onset"], bool):
            raise ScriptError(f"{where}.onset: must be true or false")
    else:
        if "image" not in item:
            raise ScriptError(f"{where}.image: missing")
        _check_image(item["image"], f"{where}.image", base_dir)
    return dict(item)


def load_script(path: str | Path, strict_prompts: bool = False) -> EpisodeScript:
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise ScriptError(f"cannot read script {str(path)!r}: {exc}") from exc
    return parse_script(text, path.parent, strict_prompts)


def load_scripts(path: str | Path) -> list[EpisodeScript]:
    """A file holding one script object or a JSON list of them (the eval's --episodes FILE)."""
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise ScriptError(f"cannot read episodes from {str(path)!r}: {exc}") from exc
    items = data if isinstance(data, list) else [data]
    scripts = []
    for i, item in enumerate(items):
        try:
            scripts.append(parse_script(item, path.parent))
        except ScriptError as exc:
            raise ScriptError(f"episode {i}: {exc}") from exc
    return scripts


def run_script(script: EpisodeScript, resolution: int | None = None) -> Iterator[SimFrame]:
    """Play a script in a fresh world, yielding one SimFrame per frame."""
    world = SimWorld(script.world_spec(resolution))
    for inputs in script.frame_inputs():
        yield world.step(inputs)
