"""A scripted tour that exercises every feature; used by `render` (no --script) and `bench`."""

from __future__ import annotations

from .script import EpisodeScript, parse_script

# (fraction of the episode, input) pairs; times scale with the episode length.
_TOUR = (
    (0.00, {"kind": "action", "keys": ["W"]}),
    (0.06, {"kind": "action", "keys": ["W", "RIGHT"]}),
    (0.09, {"kind": "action", "keys": ["W"]}),
    (0.10, {"kind": "prompt", "text": "spawn a dragon"}),
    (0.16, {"kind": "prompt", "text": "give the creature a leaf"}),
    (0.20, {"kind": "prompt", "text": "make it rain"}),
    (0.26, {"kind": "action", "keys": ["A"], "yaw": -0.3}),
    (0.30, {"kind": "prompt", "text": "clear skies"}),
    (0.31, {"kind": "prompt", "text": "make a rainbow"}),
    (0.36, {"kind": "prompt", "text": "cast fire magic"}),
    (0.37, {"kind": "action", "keys": []}),
    (0.42, {"kind": "prompt", "text": "make it dusk"}),
    (0.48, {"kind": "prompt", "text": "make it night"}),
    (0.50, {"kind": "prompt", "text": "spawn a lantern"}),
    (0.52, {"kind": "audio", "loudness": 0.5, "onset": True}),
    (0.55, {"kind": "audio", "loudness": 0.9, "onset": True}),
    (0.58, {"kind": "action", "keys": ["S", "LEFT"]}),
    (0.62, {"kind": "action", "keys": ["W"]}),
    (0.66, {"kind": "prompt", "text": "make it day"}),
    (0.67, {"kind": "prompt", "text": "make it snow"}),
    (0.72, {"kind": "prompt", "text": "spawn a crystal"}),
    (0.76, {"kind": "prompt", "text": "make the creature golden"}),
    (0.80, {"kind": "prompt", "text": "make it foggy"}),
    (0.84, {"kind": "action", "keys": ["W", "D"], "yaw": 0.4}),
    (0.90, {"kind": "prompt", "text": "clear skies"}),
    (0.92, {"kind": "prompt", "text": "spawn a mushroom"}),
)


def showcase_script(
    seed: int = 0, theme: str = "ember_forest", frames: int = 400, reference_image=None
) -> EpisodeScript:
    inputs = [{"t": min(frames - 1, int(frac * frames)), **item} for frac, item in _TOUR]
    data = {"seed": seed, "theme": theme, "frames": frames, "inputs": inputs}
    if reference_image is not None:
        data["reference_image"] = reference_image
    return parse_script(data)
