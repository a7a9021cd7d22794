"""Prompt templates: free text <-> named world events.

Every event has TRAINING paraphrases (the only ones data generation may use) and a separate
HELD-OUT list reserved for evaluating whether a model generalises to unseen wording. The
resolver knows both lists so the simulator reacts to held-out text exactly like the model must.
Unknown text resolves to "no event" rather than an error: players type anything.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class EventTemplates:
    name: str
    train: tuple[str, ...]
    heldout: tuple[str, ...]


def _spawn(noun: str, extra: tuple[str, ...] = (), extra_heldout: tuple[str, ...] = ()):
    article = "an" if noun[0] in "aeiou" else "a"
    thing = f"{article} {noun}"
    train = (
        f"spawn {thing}",
        f"summon {thing}",
        f"make {thing} appear",
        f"put {thing} here",
        f"create {thing}",
        f"add {thing}",
        f"i want {thing}",
        f"place {thing} in front of me",
        f"show me {thing}",
        *extra,
    )
    heldout = (
        f"conjure up {thing}",
        f"let {thing} show up",
        f"could we get {thing} over there",
        *extra_heldout,
    )
    return EventTemplates(f"spawn_{noun}", train, heldout)


EVENTS: tuple[EventTemplates, ...] = (
    EventTemplates(
        "rain",
        (
            "make it rain",
            "start raining",
            "rain please",
            "bring on the storm",
            "let it rain",
            "i want rain",
            "turn on the rain",
            "rainy weather",
            "a rain shower",
            "pour down rain",
        ),
        ("open the heavens", "give me a downpour", "cue the rainfall"),
    ),
    EventTemplates(
        "snow",
        (
            "make it snow",
            "start snowing",
            "snow please",
            "let it snow",
            "bring on the snow",
            "i want snow",
            "snowy weather",
            "a snowfall",
            "winter storm",
            "turn on the snow",
        ),
        ("cover everything in flurries", "give me a blizzard", "cue the snowflakes"),
    ),
    EventTemplates(
        "fog",
        (
            "make it foggy",
            "bring in the fog",
            "fog please",
            "roll in the mist",
            "foggy weather",
            "i want fog",
            "thick fog",
            "let the mist come",
            "turn on the fog",
            "misty air",
        ),
        ("shroud the land in haze", "give me a pea souper", "cue the murk"),
    ),
    EventTemplates(
        "clear",
        (
            "clear the weather",
            "stop the rain",
            "clear skies",
            "make it sunny",
            "stop the snow",
            "lift the fog",
            "clear weather please",
            "no more rain",
            "sunny weather",
            "end the storm",
        ),
        ("let the skies open up blue", "give me fair weather", "calm the weather down"),
    ),
    EventTemplates(
        "day",
        (
            "make it day",
            "daytime please",
            "bring back the sun",
            "morning",
            "make it daytime",
            "turn on the daylight",
            "it is noon",
            "sunrise now",
            "day time",
            "bright day",
        ),
        ("let the sun climb high", "give me broad daylight", "skip to midday"),
    ),
    EventTemplates(
        "dusk",
        (
            "make it dusk",
            "sunset please",
            "evening",
            "make it evening",
            "golden hour",
            "let the sun set",
            "dusk time",
            "twilight",
            "late afternoon light",
            "sunset now",
        ),
        ("paint the sky with sundown", "give me the gloaming", "skip to sundown"),
    ),
    EventTemplates(
        "night",
        (
            "make it night",
            "nighttime please",
            "turn off the sun",
            "make it dark",
            "night time",
            "bring the night",
            "midnight",
            "it is night now",
            "lights out",
            "dark night",
        ),
        ("let the stars come out", "give me the dead of night", "skip to the small hours"),
    ),
    EventTemplates(
        "fire",
        (
            "cast fire magic",
            "set the grass on fire",
            "cast a fireball",
            "burn the grass",
            "start a fire",
            "fire magic",
            "light it up",
            "ignite the ground",
            "fire spell",
            "breathe fire",
        ),
        ("unleash flames ahead", "torch the meadow", "scorch the field in front of me"),
    ),
    EventTemplates(
        "rainbow",
        (
            "make a rainbow",
            "show a rainbow",
            "rainbow please",
            "i want a rainbow",
            "paint a rainbow",
            "add a rainbow",
            "rainbow in the sky",
            "bring out a rainbow",
            "a colorful rainbow",
            "summon a rainbow",
        ),
        ("arc the colours across the sky", "give me a spectrum bow", "let a prism arch appear"),
    ),
    _spawn("dragon", ("a dragon lands on the hill", "bring a dragon"), ("a wyrm touches down",)),
    _spawn("tree", ("grow a tree", "plant a tree"), ("let a sapling sprout",)),
    _spawn("lantern", ("light a lantern", "hang a lantern"), ("set out a glowing lamp",)),
    _spawn("crystal", ("grow a crystal", "a crystal rises"), ("make a gem pillar",)),
    _spawn("mushroom", ("grow a mushroom", "a giant mushroom"), ("let a toadstool pop up",)),
    _spawn("statue", ("build a statue", "raise a statue"), ("carve a stone monument",)),
    EventTemplates(
        "gift_leaf",
        (
            "give the creature a leaf",
            "offer it a leaf",
            "hand it a leaf",
            "give a leaf",
            "here is a leaf for you",
            "feed it a leaf",
            "gift a leaf",
            "offer the creature a leaf",
            "present a leaf",
            "toss it a leaf",
        ),
        (
            "share some greenery with the little one",
            "give the critter a green leaf",
            "hold out a leaf to it",
        ),
    ),
    EventTemplates(
        "gift_dragon",
        (
            "give the creature a dragon",
            "offer it a dragon",
            "hand it a dragon",
            "give a dragon",
            "here is a dragon for you",
            "gift a dragon",
            "offer the creature a dragon",
            "present a dragon",
            "show it a dragon",
            "toss it a toy dragon",
        ),
        (
            "share a fearsome wyrm with the little one",
            "give the critter a dragon",
            "hold out a dragon to it",
        ),
    ),
    EventTemplates(
        "companion_golden",
        (
            "make the creature golden",
            "turn the companion gold",
            "golden creature",
            "give the creature golden fur",
            "make my companion shine gold",
            "gold companion",
            "paint the creature gold",
            "change the creature to gold",
        ),
        ("dip the critter in gold", "let my buddy glitter like gold", "gild the companion"),
    ),
    EventTemplates(
        "companion_azure",
        (
            "make the creature blue",
            "turn the companion blue",
            "blue creature",
            "give the creature blue fur",
            "make my companion azure",
            "azure companion",
            "paint the creature blue",
            "change the creature to blue",
        ),
        ("dye the critter sky coloured", "let my buddy turn sapphire", "tint the companion teal"),
    ),
    EventTemplates(
        "companion_default",
        (
            "change the creature back",
            "make the creature normal",
            "restore the companion",
            "default creature look",
            "undo the creature colour",
            "original companion",
            "make my companion look normal",
            "reset the creature",
        ),
        (
            "return the critter to how it was",
            "let my buddy look like itself",
            "the companion's usual look",
        ),
    ),
)

EVENT_NAMES: tuple[str, ...] = tuple(e.name for e in EVENTS)
EVENT_IDS: dict[str, int] = {name: i for i, name in enumerate(EVENT_NAMES)}
NO_EVENT = -1
_BY_NAME = {e.name: e for e in EVENTS}


def normalize(text: str) -> str:
    """Lowercase, drop punctuation and filler, collapse whitespace."""
    text = re.sub(r"[^a-z0-9' ]+", " ", text.lower()).replace("'", "")
    words = [w for w in text.split() if w not in {"please", "pls", "now", "ok", "hey"}]
    return " ".join(words)


_LOOKUP: dict[str, str] = {}
for _event in EVENTS:
    for _text in (*_event.train, *_event.heldout):
        _key = normalize(_text)
        if _LOOKUP.setdefault(_key, _event.name) != _event.name:
            raise RuntimeError(f"paraphrase {_text!r} is ambiguous")
_HELDOUT_KEYS = {normalize(t) for e in EVENTS for t in e.heldout}


@dataclass(frozen=True)
class ResolvedPrompt:
    text: str
    event: str | None  # None: the text names no known event
    heldout: bool = False

    @property
    def event_id(self) -> int:
        return NO_EVENT if self.event is None else EVENT_IDS[self.event]


def resolve(text: str) -> ResolvedPrompt:
    """Map free text to a named event (training or held-out paraphrase), else no event."""
    key = normalize(text)
    return ResolvedPrompt(text, _LOOKUP.get(key), key in _HELDOUT_KEYS)


def templates(event: str) -> EventTemplates:
    try:
        return _BY_NAME[event]
    except KeyError:
        raise KeyError(f"unknown event {event!r}; known: {', '.join(EVENT_NAMES)}") from None


def training_paraphrases(event: str) -> tuple[str, ...]:
    return templates(event).train


def heldout_paraphrases(event: str) -> tuple[str, ...]:
    return templates(event).heldout


def sample_training_text(event: str, rng: np.random.Generator) -> str:
    options = training_paraphrases(event)
    return options[int(rng.integers(len(options)))]
