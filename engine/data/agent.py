"""A randomized, closed-loop player that produces varied, realistic episodes.

It watches the previous frame's labels (did I move? where is the creature, what mood?) and
mixes behaviours: walking and turning, exploring, revisiting (walk out, turn around, walk
back), looking around with mouse-like camera deltas, prompts at random times, gifts when the
creature asks, and bursts of audio input (beats, claps). Everything it does is recorded as an
episode script, so the episode replays exactly from its JSON.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from engine.sim.constants import CREATURE_MOODS, KEY_BITS
from engine.sim.prompts import sample_training_text
from engine.sim.themes import THEME_NAMES
from engine.sim.world import AudioInput, FrameInputs

# Relative frequency of prompt events the agent types (gifts come mostly from the creature loop).
PROMPT_WEIGHTS: dict[str, float] = {
    "rain": 3, "snow": 2, "fog": 2, "clear": 3, "day": 2, "dusk": 2, "night": 3, "fire": 3,
    "rainbow": 2, "spawn_dragon": 2, "spawn_tree": 1.5, "spawn_lantern": 2, "spawn_crystal": 1,
    "spawn_mushroom": 1, "spawn_statue": 1, "gift_leaf": 0.5, "gift_dragon": 0.5,
    "companion_golden": 1, "companion_azure": 1, "companion_default": 0.5,
}
DEFAULT_PROMPT_RATE = 1 / 70  # prompts per frame (about one every 3.5 s)
DEFAULT_IMAGE_RATE = 0.1  # share of episodes in which a reference image arrives mid-way
_EVENTS = tuple(PROMPT_WEIGHTS)
_P = np.asarray([PROMPT_WEIGHTS[e] for e in _EVENTS]) / sum(PROMPT_WEIGHTS.values())


@dataclass
class EpisodePlan:
    seed: int
    theme: str
    frames: int
    reference_image: dict[str, list[int]] | None


def plan_episode(seed: int, frames: int, themes: tuple[str, ...] = THEME_NAMES) -> EpisodePlan:
    rng = np.random.default_rng([seed, 1])
    theme = themes[int(rng.integers(len(themes)))]
    reference = random_palette(rng) if rng.random() < 0.25 else None
    return EpisodePlan(seed, theme, frames, reference)


def random_palette(rng: np.random.Generator) -> dict[str, list[int]]:
    return {band: [int(v) for v in rng.integers(0, 256, 3)] for band in ("sky", "foliage",
                                                                            "ground")}


@dataclass
class RandomAgent:
    rng: np.random.Generator
    prompt_rate: float = DEFAULT_PROMPT_RATE
    keys: int = 0
    behaviour: str = "walk"
    remaining: int = 0
    stuck: int = 0
    gifts: int = 0
    yaw_velocity: float = 0.0
    audio_burst: int = 0
    last_position: tuple[float, float] = (np.nan, np.nan)
    recorded: list[dict[str, Any]] = field(default_factory=list)

    def act(self, t: int, labels: np.void | None) -> FrameInputs:
        """Choose this frame's inputs from the previous frame's labels; record them."""
        rng = self.rng
        moved = labels is not None and (labels["pose_x"], labels["pose_y"]) != self.last_position
        if labels is not None:
            self.last_position = (labels["pose_x"], labels["pose_y"])
        if self.keys & (KEY_BITS["W"] | KEY_BITS["S"]) and not moved:
            self.stuck += 1
        else:
            self.stuck = 0
        if self.stuck >= 3:  # walked into a tree or the shore: turn away
            self._start("turn_away", int(rng.integers(15, 35)))
        elif self.remaining <= 0:
            self._choose_behaviour()
        self.remaining -= 1

        keys, yaw, pitch = self._behaviour_inputs()
        prompts: tuple[str, ...] = ()
        gift = self._maybe_gift(labels)
        if gift:
            prompts = (gift,)
        elif rng.random() < self.prompt_rate:
            event = _EVENTS[int(rng.choice(len(_EVENTS), p=_P))]
            prompts = (sample_training_text(event, rng),)
        audio = self._audio(t)
        inputs = FrameInputs(keys=keys, yaw=yaw, pitch=pitch, prompts=prompts, audio=audio)
        self._record(t, inputs)
        return inputs

    def _start(self, behaviour: str, frames: int) -> None:
        self.behaviour, self.remaining, self.stuck = behaviour, frames, 0
        if behaviour == "turn_away":
            self.yaw_velocity = float(self.rng.choice([-1, 1]) * self.rng.uniform(0.08, 0.16))

    def _choose_behaviour(self) -> None:
        rng = self.rng
        options = ("walk", "walk_turn", "strafe", "look_around", "stand", "revisit", "mouse_walk")
        weights = np.array([4, 3, 1, 1.5, 1, 1, 2])
        choice = options[int(rng.choice(len(options), p=weights / weights.sum()))]
        frames = int(rng.integers(12, 60))
        self._start(choice, frames if choice != "revisit" else int(rng.integers(50, 90)))
        self.yaw_velocity = float(rng.normal(0, 0.04))

    def _behaviour_inputs(self) -> tuple[int, float, float]:
        rng = self.rng
        b, k = self.behaviour, KEY_BITS
        yaw = pitch = 0.0
        if b == "walk":
            keys = k["W"]
        elif b == "walk_turn":
            keys = k["W"] | (k["LEFT"] if self.yaw_velocity < 0 else k["RIGHT"])
        elif b == "strafe":
            keys = k["A"] if self.yaw_velocity < 0 else k["D"]
        elif b == "look_around":
            keys = 0
            self.yaw_velocity = 0.8 * self.yaw_velocity + rng.normal(0, 0.03)
            yaw = self.yaw_velocity
            pitch = float(rng.normal(0, 0.02))
        elif b == "stand":
            keys = 0
        elif b == "revisit":  # walk out, turn around, walk back over the same ground
            keys = k["W"]
            if self.remaining == 40:
                yaw = float(np.pi)
        elif b == "mouse_walk":
            keys = k["W"]
            self.yaw_velocity = 0.9 * self.yaw_velocity + rng.normal(0, 0.015)
            yaw = self.yaw_velocity
        else:  # turn_away
            keys = 0
            yaw = self.yaw_velocity
        self.keys = keys
        return keys, yaw, pitch

    def _maybe_gift(self, labels: np.void | None) -> str | None:
        if labels is None or self.gifts >= 2:
            return None
        mood = CREATURE_MOODS[labels["creature_mood"]]
        if mood == "curious" and labels["creature_distance"] < 6 and self.rng.random() < 0.05:
            self.gifts += 1
            event = "gift_leaf" if self.rng.random() < 0.5 else "gift_dragon"
            return sample_training_text(event, self.rng)
        return None

    def _audio(self, t: int) -> AudioInput | None:
        rng = self.rng
        if self.audio_burst <= 0 and rng.random() < 0.01:
            self.audio_burst = int(rng.integers(20, 60))
        if rng.random() < 0.004:
            return AudioInput(float(rng.uniform(0.7, 1.0)), onset=True)  # a clap
        if self.audio_burst > 0:
            self.audio_burst -= 1
            beat = t % 10 == 0
            loud = float(np.clip(rng.normal(0.6 if beat else 0.25, 0.08), 0.0, 0.95))
            return AudioInput(loud, onset=beat and loud < 0.6)
        return None

    def _record(self, t: int, inputs: FrameInputs) -> None:
        names = [name for name, bit in KEY_BITS.items() if inputs.keys & bit]
        last_keys = next((r["keys"] for r in reversed(self.recorded) if r["kind"] == "action"),
                         None)
        if names != last_keys or inputs.yaw or inputs.pitch:
            item: dict[str, Any] = {"t": t, "kind": "action", "keys": names}
            if inputs.yaw:
                item["yaw"] = float(inputs.yaw)  # JSON floats round-trip exactly
            if inputs.pitch:
                item["pitch"] = float(inputs.pitch)
            self.recorded.append(item)
        for text in inputs.prompts:
            self.recorded.append({"t": t, "kind": "prompt", "text": text})
        if inputs.audio is not None:
            self.recorded.append({"t": t, "kind": "audio", "loudness": inputs.audio.loudness,
                                  "onset": inputs.audio.onset})
