"""The judges' own data set: event-balanced simulator episodes, built by a command and cached.

Random play alone shows a dusk, a rainbow or a statue in a few dozen frames. Here every event
the eval asks about opens `EPISODES_PER_EVENT` episodes of its own (each its own seed, theme and
starting weather), the random agent plays on, and part of the time the player turns toward
what the event made (the rainbow, the fire, the object, the creature), so that each class is
seen in view, from several distances, many times. Episodes, not rows, are split between
training and test: a judge is scored on places and moments it has never seen.

    python -m engine.eval --build-judges     # builds this data set, then trains the judges
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from engine.data.agent import RandomAgent, random_palette
from engine.sim import AudioInput, SimWorld, WorldSpec
from engine.sim.constants import CREATURE_MOODS, KEY_BITS, TIMES_OF_DAY, WEATHERS
from engine.sim.labels import LABEL_DTYPE
from engine.sim.prompts import resolve, sample_training_text
from engine.sim.themes import THEME_NAMES
from engine.sim.visibility import VIEW_DTYPE, rainbow_heading, view_labels

JUDGE_DATA_VERSION = 5  # bump when episodes or labels change: the cache is rebuilt
JUDGE_SEED_BASE = 2_000_000  # neither training seeds (0..) nor eval seeds (1,000,000..)
JUDGE_EVENTS = (
    "rain",
    "snow",
    "fog",
    "clear",
    "day",
    "dusk",
    "night",
    "fire",
    "rainbow",
    "spawn_dragon",
    "spawn_tree",
    "spawn_lantern",
    "spawn_crystal",
    "spawn_mushroom",
    "spawn_statue",
    "gift_leaf",
    "gift_dragon",
    "startle",
)
EPISODES_PER_EVENT = 32  # 16 left too few places per object kind to generalise
SPAWN_EPISODE_FACTOR = 3  # object events get 3x as many: with 26 training places per kind the
# object heads learnt the places (training 0.95-0.99, held out 0.54-0.89)
EPISODE_FRAMES = 80
TEST_EVERY = 5  # episode k of each event is held out when k % TEST_EVERY == TEST_EVERY - 1
MAX_TURN = 0.09  # radians a frame when the player turns toward something
SKY_CHANGE_EVERY = 20  # frames between random weather / time changes (see judge_episode)
# Bursts of one action (while the player is not turning toward something): the random agent
# never steps back and seldom strafes, and the inverse-dynamics judge must know all seven.
ACTION_BURST_FRAMES = 8
ACTION_BURST_CHANCE = 0.5
BURST_KEYS = (
    0,
    KEY_BITS["W"],
    KEY_BITS["S"],
    KEY_BITS["A"],
    KEY_BITS["D"],
    KEY_BITS["LEFT"],
    KEY_BITS["RIGHT"],
)


@dataclass
class JudgeData:
    frames: np.ndarray  # (N, 128, 128, 3) uint8
    audio: np.ndarray  # (N, 800) int16
    labels: np.ndarray  # (N,) LABEL_DTYPE
    view: np.ndarray  # (N,) VIEW_DTYPE
    episode: np.ndarray  # (N,) int32, episode id
    test: np.ndarray  # (N,) bool: held-out episodes

    def __len__(self) -> int:
        return len(self.frames)

    def rows(self, test: bool) -> np.ndarray:
        return np.nonzero(self.test == test)[0]


def heading_to(world: SimWorld, x: float, y: float) -> float:
    dx, dy = world.player_delta_to(x, y)
    return float(np.arctan2(dy, dx))


def turn_toward(world: SimWorld, heading: float, limit: float = MAX_TURN) -> float:
    """The yaw delta (at most `limit`) that turns the player toward `heading`."""
    delta = (heading - world.yaw + np.pi) % (2 * np.pi) - np.pi
    return float(np.clip(delta, -limit, limit))


def judge_episode(seed: int, event: str, frames: int = EPISODE_FRAMES) -> tuple[np.ndarray, ...]:
    """One episode that shows `event` (a prompt event, or "startle": a clap near the creature).

    Returns frames, audio, labels and view labels, one row per frame."""
    rng = np.random.default_rng([seed, 7])
    theme = THEME_NAMES[int(rng.integers(len(THEME_NAMES)))]  # not from the seed's residue:
    # that would put every held-out episode (k % 5 == 4) in the same theme
    reference = random_palette(rng) if rng.random() < 0.2 else None
    world = SimWorld(WorldSpec(seed, theme, 128, reference))
    agent = RandomAgent(np.random.default_rng([seed, 8]))
    t_event = int(rng.integers(4, 30))
    opening = []  # a different sky to start from, so 'clear' or 'day' change something
    if rng.random() < 0.6:
        opening.append(WEATHERS[int(rng.integers(len(WEATHERS)))])
    if rng.random() < 0.5:
        opening.append(TIMES_OF_DAY[int(rng.integers(len(TIMES_OF_DAY)))])
    target: Callable[[], float | None] = _target(world, event)
    steering = False
    fired = False
    out_rgb, out_audio, out_labels, out_view = [], [], [], []
    last = None
    burst: int | None = None
    for t in range(frames):
        inp = agent.act(t, last)
        if t % ACTION_BURST_FRAMES == 0:
            burst = (
                BURST_KEYS[int(rng.integers(len(BURST_KEYS)))]
                if rng.random() < ACTION_BURST_CHANCE
                else None
            )
        if t == 0 and opening:
            inp.prompts = tuple(sample_training_text(e, rng) for e in opening)
        elif t % SKY_CHANGE_EVERY == 0 and rng.random() < 0.7:
            # The same place under several skies: a judge that learnt "this place -> rain"
            # (one weather per episode) failed on new places. Keep what the event made.
            keep = fired and event in ("rainbow", "fire")
            choices = TIMES_OF_DAY if keep else WEATHERS + TIMES_OF_DAY
            inp.prompts += (sample_training_text(choices[int(rng.integers(len(choices)))], rng),)
        wants_gift = event.startswith("gift_")
        if wants_gift and not fired:
            inp.prompts = tuple(
                p for p in inp.prompts if not (resolve(p).event or "").startswith("gift_")
            )
        if not fired and t >= t_event:
            if wants_gift:
                near = (
                    last is not None
                    and CREATURE_MOODS[last["creature_mood"]] == "curious"
                    and last["creature_distance"] < 6
                )
                steering = True  # face the creature until it asks
                if near or t == frames // 2:
                    inp.prompts = (sample_training_text(event, rng),)
                    fired = True
            elif event == "startle":
                if last is not None and last["creature_in_view"] or t == frames // 2:
                    inp.audio = _clap(rng)
                    fired = True
            else:
                inp.prompts = (sample_training_text(event, rng),)
                fired = True
        if t % 20 == 0 and t > 0:
            steering = rng.random() < 0.6
        heading = target() if steering else None
        if heading is not None:
            inp.keys &= ~(KEY_BITS["LEFT"] | KEY_BITS["RIGHT"])
            inp.yaw = turn_toward(world, heading)
        elif burst is not None:
            inp.keys, inp.yaw, inp.pitch = burst, 0.0, 0.0
        f = world.step(inp)
        out_rgb.append(f.rgb)
        out_audio.append(f.audio)
        out_labels.append(f.labels)
        out_view.append(view_labels(world))
        last = f.labels
    return (
        np.stack(out_rgb),
        np.stack(out_audio),
        np.array(out_labels, LABEL_DTYPE),
        np.array(out_view, VIEW_DTYPE),
    )


def _clap(rng: np.random.Generator) -> AudioInput:
    return AudioInput(float(rng.uniform(0.7, 1.0)), onset=True)


def _target(world: SimWorld, event: str) -> Callable[[], float | None]:
    """Where the player looks to see what `event` made (None: nothing particular)."""

    def creature() -> float:
        s = world.creature.state
        return heading_to(world, s.x, s.y)

    def fire() -> float | None:
        active = world.fire.active
        if not active.size:
            return None
        cell = int(active[len(active) // 2])
        return heading_to(world, (cell & 255) + 0.5, (cell >> 8) + 0.5)

    def spawned() -> float | None:
        if not world.objects:
            return None
        obj = world.objects[-1]
        return heading_to(world, obj.x, obj.y)

    if event == "rainbow":
        return rainbow_heading
    if event == "fire":
        return fire
    if event.startswith("spawn_"):
        return spawned
    return creature  # weather and time change the whole picture: meanwhile, meet the creature


def episodes_of(event: str, per_event: int = EPISODES_PER_EVENT) -> int:
    return per_event * (SPAWN_EPISODE_FACTOR if event.startswith("spawn_") else 1)


def episode_events(per_event: int = EPISODES_PER_EVENT) -> list[str]:
    """The event of each episode id of the data set, in build order."""
    return [event for event in JUDGE_EVENTS for _ in range(episodes_of(event, per_event))]


def build_judge_data(
    episodes_per_event: int = EPISODES_PER_EVENT,
    frames: int = EPISODE_FRAMES,
    log: Callable[[str], None] = print,
) -> JudgeData:
    parts = []
    t0 = time.time()
    for i, event in enumerate(JUDGE_EVENTS):
        for k in range(episodes_of(event, episodes_per_event)):
            seed = JUDGE_SEED_BASE + i * 1000 + k
            parts.append((judge_episode(seed, event, frames), k % TEST_EVERY == TEST_EVERY - 1))
        log(f"judge data: {event} done ({len(parts)} episodes, {time.time() - t0:.0f} s)")
    episode = np.concatenate([np.full(len(p[0][0]), j, np.int32) for j, p in enumerate(parts)])
    test = np.concatenate([np.full(len(ep[0]), held) for ep, held in parts])
    rgb, audio, labels, view = (np.concatenate([p[0][c] for p in parts]) for c in range(4))
    return JudgeData(rgb, audio, labels, view, episode, test)


_FIELDS = ("frames", "audio", "labels", "view", "episode", "test")


def save_judge_data(folder: Path, data: JudgeData) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name in _FIELDS:
        np.save(folder / f"{name}.npy", getattr(data, name))
    (folder / "manifest.json").write_text(
        json.dumps(
            {
                "version": JUDGE_DATA_VERSION,
                "rows": len(data),
                "episodes": int(data.episode.max()) + 1,
                "test_rows": int(data.test.sum()),
            }
        )
    )


def load_judge_data(folder: Path) -> JudgeData | None:
    manifest = folder / "manifest.json"
    if not manifest.exists() or json.loads(manifest.read_text())["version"] != JUDGE_DATA_VERSION:
        return None
    frames, audio, labels, view, episode, test = (
        np.load(folder / f"{name}.npy", mmap_mode="r") for name in _FIELDS
    )
    return JudgeData(frames, audio, labels, view, episode, test)


def judge_data(cache: Path, log: Callable[[str], None] = print) -> JudgeData:
    """The cached data set, built first if missing or of another version."""
    folder = cache / f"judge_data_v{JUDGE_DATA_VERSION}"
    data = load_judge_data(folder)
    if data is None:
        log(f"building the judges' data set into {folder}")
        save_judge_data(folder, build_judge_data(log=log))
        data = load_judge_data(folder)
        assert data is not None
    return data
