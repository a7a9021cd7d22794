"""Play one closed-loop episode: the random agent drives a SimWorld, everything is recorded."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from engine.sim.script import EpisodeScript, parse_script
from engine.sim.themes import THEME_NAMES
from engine.sim.visibility import pixel_depth
from engine.sim.world import SimFrame, SimWorld, WorldSpec

from .agent import DEFAULT_IMAGE_RATE, DEFAULT_PROMPT_RATE, RandomAgent, plan_episode


@dataclass
class PlayedFrame:
    frame: SimFrame
    prompts: tuple[str, ...]
    reference: np.ndarray | None  # a reference image that arrived this frame
    depth: np.ndarray | None = None  # (H, W) what each pixel shows, how far (`with_depth`)


def play_episode(seed: int, frames: int, resolution: int,
                 themes: tuple[str, ...] | None = None,
                 prompt_rate: float = DEFAULT_PROMPT_RATE,
                 image_rate: float = DEFAULT_IMAGE_RATE,
                 with_depth: bool = False) -> Iterator[PlayedFrame | EpisodeScript]:
    """Yield each PlayedFrame, then finally the EpisodeScript that replays the episode exactly.
    In an `image_rate` share of episodes a reference image with a random palette arrives at a
    random frame of the last two thirds (the world recolours there). `with_depth`: each frame
    also carries the renderer's depth of every pixel (`engine.sim.visibility.pixel_depth`)."""
    plan = plan_episode(seed, frames, themes or THEME_NAMES)
    world = SimWorld(WorldSpec(seed, plan.theme, resolution, plan.reference_image))
    agent = RandomAgent(np.random.default_rng([seed, 2]), prompt_rate=prompt_rate)
    rng = np.random.default_rng([seed, 3])
    image_t = int(rng.integers(frames // 3, frames)) if rng.random() < image_rate else -1
    image_inputs: list[dict[str, Any]] = []
    labels = None
    for t in range(frames):
        inputs = agent.act(t, labels)
        reference = world.reference_image if t == 0 else None
        if t == image_t:
            palette = {band: [int(v) for v in rng.integers(0, 256, 3)]
                       for band in ("sky", "foliage", "ground")}
            inputs.image = palette
            image_inputs.append({"t": t, "kind": "image", "image": palette})
        frame = world.step(inputs)
        if t == image_t:
            reference = world.reference_image
        labels = frame.labels
        depth = pixel_depth(world) if with_depth else None
        yield PlayedFrame(frame, inputs.prompts, reference, depth)
    data = {"seed": seed, "theme": plan.theme, "frames": frames,
            "inputs": agent.recorded + image_inputs}
    if plan.reference_image is not None:
        data["reference_image"] = plan.reference_image
    yield parse_script(data)
