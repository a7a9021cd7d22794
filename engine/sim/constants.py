"""Timing, input and label vocabularies shared by the simulator, data pipeline and model."""

from __future__ import annotations

# Timing and keys are defined once, import-light, in engine.spec (the web side reads them too).
from engine.spec import (  # noqa: F401  (re-exported)
    BOB_HEIGHT,
    DEFAULT_RESOLUTION,
    EYE_HEIGHT,
    FPS,
    KEY_BITS,
    PITCH_LIMIT,
    PITCH_RATE,
    SAMPLE_RATE,
    SAMPLES_PER_FRAME,
    STRIDE,
    SUPPORTED_RESOLUTIONS,
    TURN_RATE,
    WALK_SPEED,
)

WEATHERS = ("clear", "rain", "snow", "fog")
TIMES_OF_DAY = ("day", "dusk", "night")
OBJECT_KINDS = ("dragon", "tree", "lantern", "crystal", "mushroom", "statue")
CREATURE_MOODS = ("absent", "neutral", "curious", "happy", "afraid", "startled")
RELATIONSHIPS = ("none", "friend", "fear")
COMPANION_LOOKS = ("default", "golden", "azure")
SURFACES = ("none", "grass", "rock", "sand", "snow")
