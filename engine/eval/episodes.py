"""Simulator episodes for the eval, and the model playing the same inputs through the runtime.

An episode is a world spec plus one `FrameInputs` per frame; `simulate` gives the truth
(frames, audio, labels, visibility). `ModelPlayer` replays the same inputs into a session of
the public runtime API (`World.start`, `Session.prime/push/next_chunk`), so the eval measures
whatever weights and runtime the product would stream.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from engine.data.agent import RandomAgent, plan_episode
from engine.model.inputs import input_features_from_labels
from engine.runtime.events import Action, AudioIn, Image, Prompt
from engine.runtime.session import World
from engine.sim import FrameInputs, SimWorld, WorldSpec
from engine.sim.constants import KEY_BITS
from engine.sim.labels import LABEL_DTYPE
from engine.sim.script import EpisodeScript
from engine.sim.visibility import VIEW_DTYPE, view_labels

PRIME_FRAMES = 8  # simulator frames a rollout starts from (the model's context is shorter)


@dataclass
class SimEpisode:
    spec: WorldSpec
    inputs: list[FrameInputs]
    model_text: dict[int, str] = field(default_factory=dict)  # sentence the model gets instead
    # The truth, empty until `simulate` (or a Recorder) fills it:
    frames: np.ndarray = field(default_factory=lambda: np.zeros((0, 128, 128, 3), np.uint8))
    audio: np.ndarray = field(default_factory=lambda: np.zeros((0, 800), np.int16))
    labels: np.ndarray = field(default_factory=lambda: np.zeros(0, LABEL_DTYPE))
    view: np.ndarray = field(default_factory=lambda: np.zeros(0, VIEW_DTYPE))

    def simulate(self) -> SimEpisode:
        world = SimWorld(self.spec)
        rgb, audio, labels, view = [], [], [], []
        for inp in self.inputs:
            f = world.step(inp)
            rgb.append(f.rgb)
            audio.append(f.audio)
            labels.append(f.labels)
            view.append(view_labels(world))
        self.frames, self.audio = np.stack(rgb), np.stack(audio)
        self.labels = np.array(labels, LABEL_DTYPE)
        self.view = np.array(view, VIEW_DTYPE)
        return self

    def views_around(self, at: int) -> np.ndarray:
        """(3, H, W, 3): the rest of a full turn seen where the player stands after frame
        at - 1 (a quarter, half and three quarters to the right), replayed from the inputs."""
        world = SimWorld(self.spec)
        for inp in self.inputs[:at]:
            world.step(inp)
        return world.look_around()


class Recorder:
    """Steps a SimWorld closed-loop (a protocol reads the world between frames) and keeps
    inputs and outputs, so the episode needs no second simulation."""

    def __init__(self, spec: WorldSpec):
        self.spec = spec
        self.world = SimWorld(spec)
        self.inputs: list[FrameInputs] = []
        self._rows: list[tuple] = []

    def __len__(self) -> int:
        return len(self.inputs)

    def step(self, inp: FrameInputs) -> np.void:
        f = self.world.step(inp)
        self.inputs.append(inp)
        self._rows.append((f.rgb, f.audio, f.labels, view_labels(self.world)))
        return f.labels

    def episode(self, model_text: dict[int, str] | None = None) -> SimEpisode:
        rgb, audio, labels, view = zip(*self._rows, strict=True)
        return SimEpisode(
            self.spec,
            self.inputs,
            dict(model_text or {}),
            np.stack(rgb),
            np.stack(audio),
            np.array(list(labels), LABEL_DTYPE),
            np.array(list(view), VIEW_DTYPE),
        )


def agent_episode(seed: int, frames: int) -> SimEpisode:
    """Closed-loop random play (the data pipeline's agent and episode plan)."""
    plan = plan_episode(seed, frames)
    rec = Recorder(WorldSpec(seed, plan.theme, 128, plan.reference_image))
    agent = RandomAgent(np.random.default_rng([seed, 2]))
    last = None
    for t in range(frames):
        last = rec.step(agent.act(t, last))
    return rec.episode()


def script_episode(script: EpisodeScript) -> SimEpisode:
    return SimEpisode(script.world_spec(128), script.frame_inputs()).simulate()


def key_names(mask: int) -> tuple[str, ...]:
    return tuple(name for name, bit in KEY_BITS.items() if mask & bit)


class ModelPlayer:
    """Plays simulator episodes into runtime sessions of one loaded `World`. With `around`,
    a primed session is also told the rest of a full turn from where the priming ends (as a
    session opened from its theme's keyframes is: engine/runtime/openings.py)."""

    def __init__(self, world: World, around: bool = False):
        self.world = world
        self.around = around
        self.generated_frames = 0

    def start(self, ep: SimEpisode, at: int, seed: int = 0):
        """A session primed with the simulator's frames [at - PRIME_FRAMES, at)."""
        spec = {"seed": seed, "theme": ep.spec.theme, "reference_image": ep.spec.reference_image}
        session = self.world.start(spec, opening=False)
        self.prime(session, ep, at)
        return session

    def open(self, ep: SimEpisode, seed: int = 0):
        """A session started as the product starts one, nothing primed: from its theme's
        opening keyframes, with the episode's reference image (if any) given at the start."""
        spec = {"seed": seed, "theme": ep.spec.theme, "reference_image": ep.spec.reference_image}
        return self.world.start(spec)

    def prime(self, session, ep: SimEpisode, at: int) -> None:
        lo = max(0, at - PRIME_FRAMES)
        around = ep.views_around(at) if self.around else None
        walked = input_features_from_labels(ep.labels[:at]) if at else None
        session.prime(ep.frames[lo:at], ep.audio[lo:at], around, walked)

    def play(self, session, ep: SimEpisode, start: int, stop: int) -> tuple[np.ndarray, np.ndarray]:
        """Push frames [start, stop)'s inputs one frame at a time; (video, audio) generated."""
        video, audio = [], []
        for t in range(start, stop):
            inp, label = ep.inputs[t], ep.labels[t]
            session.push(Action(key_names(inp.keys), float(inp.yaw), float(inp.pitch)))
            if inp.prompts:
                session.push(Prompt(ep.model_text.get(t, inp.prompts[0])))
            if inp.image is not None:
                session.push(Image(inp.image))
            loud = float(label["audio_loudness"])
            if loud > 0 or label["audio_onset"]:
                session.push(AudioIn(min(loud, 1.0), bool(label["audio_onset"])))
            chunk = session.next_chunk(max_frames=1)
            video.append(chunk.video)
            audio.append(chunk.audio)
        self.generated_frames += stop - start
        return np.concatenate(video), np.concatenate(audio)

    def rollout(
        self, ep: SimEpisode, start: int, horizon: int, seed: int = 0
    ) -> tuple[np.ndarray, np.ndarray]:
        """Open loop: primed with the truth before `start`, then the model's own frames."""
        session = self.start(ep, start, seed)
        return self.play(session, ep, start, start + horizon)
