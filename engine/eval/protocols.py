"""The eval's test protocols, built on the simulator so the simulator itself can pass them.

- Prompt: stand still, the sentence arrives, turn toward what it made (the rainbow stands at a
  fixed heading; fire and spawned objects appear ahead), judge the frame 2 s later.
- Gift (Zero Mark): face the creature until it asks, give a leaf or a dragon, look away and
  wait, come back 20 s after the gift (turn to the creature, walk up to it) and again at 60 s;
  judge its mood in the frame near each check that shows most of its mood icon (the
  clearest look a player gets on the way back; the first readable frame often showed 4 pixels).
- Turn: an exact 2 pi turn in place (104 frames of LEFT, then the remainder as a yaw delta).
- Walk: 2,000 frames of walking play (forward, turning away from what blocks the way).
- Reference image: 80 frames of that walking play in one world per theme, once with a
  reference palette given at the start and once without; how far the sky and ground bands of
  the picture move toward the palette's colours (two palettes per theme share the control).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from engine.data.agent import random_palette
from engine.data.layout import HELDOUT_SEED_BASE
from engine.sim import FrameInputs, WorldSpec
from engine.sim.constants import CREATURE_MOODS, KEY_BITS
from engine.sim.prompts import (
    EVENT_NAMES,
    heldout_paraphrases,
    resolve,
    sample_training_text,
    training_paraphrases,
)
from engine.sim.themes import THEME_NAMES, get_theme
from engine.sim.visibility import rainbow_heading
from engine.sim.world import TURN_RATE

from . import metrics as M
from .classifiers import STATE_HEADS, mood_targets
from .episodes import PRIME_FRAMES, Recorder, SimEpisode
from .judge_data import heading_to, turn_toward

PROMPT_JUDGE_AFTER = 40  # frames after the sentence: 2 s
GIFT_CHECKS = (400, 1200)  # frames after the gift: 20 s and 60 s
GIFT_REACT = 4  # frames the model plays right after the gift (the sentence's chunk)
GIFT_RETURN = 120  # frames of coming back (turn, walk up) before each check
GIFT_VIEW_WINDOW = 40  # the check reads the last 40 frames ...
GIFT_VIEWS = 5  # ... its mood voted by the 5 showing most of its icon (an afraid creature keeps
# its distance; one 5-pixel icon misread by the judge would decide the case)
CLOSE_ENOUGH = 8.0  # cells: stop walking toward the creature here
TURN_KEY_FRAMES = int(2 * np.pi / TURN_RATE)  # 104 frames of LEFT ...
TURN_REMAINDER = 2 * np.pi - TURN_KEY_FRAMES * TURN_RATE  # ... then this yaw delta: exactly 2 pi


# -- prompts ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class PromptCase:
    event: str
    text: str  # what the model is told (any sentence)


def prompt_episode(case: PromptCase, index: int, with_prompt: bool = True) -> SimEpisode:
    """Idle priming, the event at frame PRIME_FRAMES, then 2 s looking toward its effect."""
    seed = HELDOUT_SEED_BASE + 500 + index
    rec = Recorder(WorldSpec(seed, THEME_NAMES[index % len(THEME_NAMES)]))
    sim_text = (
        case.text
        if resolve(case.text).event == case.event
        else sample_training_text(case.event, np.random.default_rng(index))
    )
    for t in range(PRIME_FRAMES + PROMPT_JUDGE_AFTER + 1):
        inp = FrameInputs()
        if t == PRIME_FRAMES and with_prompt:
            inp.prompts = (sim_text,)
        if t > PRIME_FRAMES and case.event == "rainbow":
            inp.yaw = turn_toward(rec.world, rainbow_heading())
        rec.step(inp)
    return rec.episode({PRIME_FRAMES: case.text} if with_prompt else {})


def prompt_target(event: str) -> tuple[str, int]:
    """(state head, class index) a judge should read once `event` has happened and been faced."""
    for head in ("weather", "time_of_day"):
        if event in STATE_HEADS[head]:
            return head, STATE_HEADS[head].index(event)
    if event in ("fire", "rainbow"):
        return f"{event}_in_view", 1
    if event.startswith("spawn_"):
        return f"{event.removeprefix('spawn_')}_in_view", 1
    raise ValueError(f"event {event!r} has no visible state to judge")


JUDGEABLE_EVENTS = tuple(e for e in EVENT_NAMES if not e.startswith(("gift_", "companion_")))


PROMPT_TEST_EVENTS = (
    "rain",
    "snow",
    "fog",
    "night",
    "dusk",
    "fire",
    "rainbow",
    "spawn_dragon",
    "spawn_lantern",
    "spawn_tree",
    "spawn_crystal",
    "spawn_statue",
)


def default_prompt_cases(per_event: int = 2) -> list[PromptCase]:
    """The prompt test's cases: held-out wording the model never trained on."""
    return [
        PromptCase(e, text)
        for e in PROMPT_TEST_EVENTS
        for text in heldout_paraphrases(e)[:per_event]
    ]


def training_wording_cases(per_event: int = 2) -> list[PromptCase]:
    """The same events in wording the model trained on (the text-reading figure's contrast)."""
    return [
        PromptCase(e, text)
        for e in PROMPT_TEST_EVENTS
        for text in training_paraphrases(e)[:per_event]
    ]


# -- gifts -----------------------------------------------------------------------------------
@dataclass
class GiftEpisode:
    episode: SimEpisode
    gift_frame: int
    checks: list[int]  # last judged frame of each GIFT_CHECKS entry (-1: never in view)
    returns: list[int]  # first frame of each return to the creature
    views: list[list[int]]  # the judged frames of each check (up to GIFT_VIEWS, in order)


def gift_episode(gift: str, text: str, index: int, wait: int = 300) -> GiftEpisode:
    """Face the creature until it asks, give `gift` (the model is told `text`), look away and
    stand; GIFT_RETURN frames before each check turn to the creature and walk up to it."""
    seed = HELDOUT_SEED_BASE + 900 + index
    rec = Recorder(WorldSpec(seed, THEME_NAMES[index % len(THEME_NAMES)]))
    world = rec.world
    creature = world.creature.state
    sim_text = sample_training_text(gift, np.random.default_rng(index))

    def toward_creature() -> float:
        return turn_toward(world, heading_to(world, creature.x, creature.y))

    labels = None
    while len(rec) < wait:  # face the creature until it asks
        if (
            labels is not None
            and CREATURE_MOODS[labels["creature_mood"]] == "curious"
            and labels["creature_distance"] < 6
        ):
            break
        labels = rec.step(FrameInputs(yaw=toward_creature()))
    gift_frame = len(rec)
    rec.step(FrameInputs(prompts=(sim_text,)))
    for _ in range(GIFT_REACT - 1):
        rec.step(FrameInputs())
    returns = []
    for after in GIFT_CHECKS:
        away = heading_to(world, creature.x, creature.y) + np.pi
        while len(rec) < gift_frame + after - GIFT_RETURN:  # look away and wait
            rec.step(FrameInputs(yaw=turn_toward(world, away)))
        returns.append(len(rec))
        while len(rec) <= gift_frame + after:  # come back: face it, walk up to it
            yaw = toward_creature()
            far = world.creature.distance_to(world.x, world.y) > CLOSE_ENOUGH
            rec.step(FrameInputs(keys=KEY_BITS["W"] if far and abs(yaw) < 0.05 else 0, yaw=yaw))
    ep = rec.episode({gift_frame: text})
    checks, views = [], []
    moods = mood_targets(ep.labels, ep.view)  # -1 unless in view with its icon readable
    for after in GIFT_CHECKS:
        seen = gift_views(moods, ep.view["icon_pixels"], gift_frame + after)
        views.append(seen)
        checks.append(seen[-1] if seen else -1)
    return GiftEpisode(ep, gift_frame, checks, returns, views)


def gift_views(moods: np.ndarray, icon_pixels: np.ndarray, end: int) -> list[int]:
    """The frames of the GIFT_VIEW_WINDOW up to `end` that show most of the creature's icon
    (up to GIFT_VIEWS, in time order), all in the mood of the best one; [] if none is readable."""
    window = np.arange(end - GIFT_VIEW_WINDOW, end + 1)
    shown = np.where(moods[window] >= 0, icon_pixels[window], 0)
    if shown.max() <= 0:
        return []
    mood = moods[window[np.argmax(shown)]]
    shown = np.where(moods[window] == mood, shown, 0)
    best = np.argsort(-shown, kind="stable")[:GIFT_VIEWS]
    return sorted(int(window[i]) for i in best if shown[i] > 0)


def gift_cases(per_gift: int, max_tries: int = 60) -> list[tuple[str, GiftEpisode]]:
    """The first `per_gift` held-out seeds per gift where the simulator shows the creature at
    every check (a protocol the simulator cannot pass would measure nothing)."""
    out: list[tuple[str, GiftEpisode]] = []
    for gift in ("gift_leaf", "gift_dragon"):
        texts = heldout_paraphrases(gift)
        kept = 0
        for index in range(max_tries):
            if kept == per_gift:
                break
            g = gift_episode(gift, texts[index % len(texts)], index)
            if min(g.checks) >= 0:
                out.append((gift, g))
                kept += 1
    return out


# -- turn and walk ---------------------------------------------------------------------------
def turn_episode(index: int) -> SimEpisode:
    """PRIME_FRAMES idle frames, then exactly 2 pi to the left in place, one frame at a time."""
    seed = HELDOUT_SEED_BASE + 700 + index
    inputs = [FrameInputs() for _ in range(PRIME_FRAMES)]
    inputs += [FrameInputs.hold("LEFT") for _ in range(TURN_KEY_FRAMES)]
    inputs += [FrameInputs(yaw=-TURN_REMAINDER)]
    return SimEpisode(WorldSpec(seed, THEME_NAMES[index % len(THEME_NAMES)]), inputs).simulate()


def walk_episode(index: int, frames: int = 2000) -> SimEpisode:
    """Walking play: forward, a gentle drift of heading, turning away when blocked."""
    seed = HELDOUT_SEED_BASE + 800 + index
    return walking_play(WorldSpec(seed, THEME_NAMES[index % len(THEME_NAMES)]), frames)


def walking_play(spec: WorldSpec, frames: int) -> SimEpisode:
    """`frames` of the walk in `spec`'s world (its drift drawn from the world's seed)."""
    rec = Recorder(spec)
    rng = np.random.default_rng(spec.seed)
    turning, drift = 0, 0.0
    for _ in range(frames):
        drift = 0.95 * drift + rng.normal(0, 0.004)
        if turning > 0:
            turning -= 1
            rec.step(FrameInputs.hold("LEFT"))
            continue
        before = (rec.world.x, rec.world.y)
        rec.step(FrameInputs.hold("W", yaw=float(drift)))
        if (rec.world.x, rec.world.y) == before:
            turning = int(rng.integers(10, 30))
    return rec.episode()


# -- reference image -------------------------------------------------------------------------
REFERENCE_SEED_BASE = HELDOUT_SEED_BASE + 600  # one walk per theme: seeds 600..604
REFERENCE_PALETTES = 2  # reference palettes per theme
REFERENCE_MIN_DISTANCE = 120.0  # RGB distance of a palette's sky and ground from the theme's
RECOLOUR_FRAMES = 80  # frames of walking per session
RECOLOUR_FROM = 20  # the bands are read from frame 20 (1 s) on: time for the model to react
RECOLOUR_BANDS: dict[str, tuple[float, float]] = {"sky": (0.0, 0.3), "ground": (0.7, 1.0)}
# ^ rows of the frame (fractions of its height) whose colour should follow the palette's band


@dataclass(frozen=True)
class ReferenceCase:
    theme: str
    seed: int  # the world (and walk) of the case; its theme's other palettes share it
    palette: dict[str, list[int]]  # inline reference image {sky, foliage, ground}


def reference_cases(per_theme: int = REFERENCE_PALETTES) -> list[ReferenceCase]:
    """`per_theme` random palettes per theme (seeded), each far from the theme's own sky
    (horizon) and ground colours, so moving toward them is a change worth measuring."""
    rng = np.random.default_rng(REFERENCE_SEED_BASE)
    cases = []
    for index, name in enumerate(THEME_NAMES):
        theme = get_theme(name)
        kept = 0
        while kept < per_theme:
            palette = random_palette(rng)
            sky = np.subtract(palette["sky"], theme.sky_horizon)
            ground = np.subtract(palette["ground"], theme.ground)
            if min(np.linalg.norm(sky), np.linalg.norm(ground)) >= REFERENCE_MIN_DISTANCE:
                cases.append(ReferenceCase(name, REFERENCE_SEED_BASE + index, palette))
                kept += 1
    return cases


def reference_walk(case: ReferenceCase) -> SimEpisode:
    """RECOLOUR_FRAMES of walking play in the case's world, without a reference image."""
    return walking_play(WorldSpec(case.seed, case.theme), RECOLOUR_FRAMES)


def with_reference(walk: SimEpisode, palette: dict[str, list[int]]) -> SimEpisode:
    """The same inputs with `palette` as the reference image from frame 0 (recolouring leaves
    the terrain alone, so the walk would have been the same with the picture)."""
    return SimEpisode(replace(walk.spec, reference_image=palette), walk.inputs).simulate()


def recolour_moves(
    with_image: np.ndarray, without: np.ndarray, palette: dict[str, list[int]]
) -> dict[str, float]:
    """Per band of RECOLOUR_BANDS, how far its mean colour over frames RECOLOUR_FROM.. of the
    session given the picture moved from that of the same session without it toward the
    palette's colour for that band (1 = all the way)."""
    return {
        band: M.move_fraction(
            M.band_mean(with_image[RECOLOUR_FROM:], rows),
            M.band_mean(without[RECOLOUR_FROM:], rows),
            np.asarray(palette[band], np.float64),
        )
        for band, rows in RECOLOUR_BANDS.items()
    }
