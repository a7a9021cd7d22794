"""Timing, input and label vocabularies shared by the simulator, data pipeline and model."""

from __future__ import annotations

FPS = 20
SAMPLE_RATE = 16_000
SAMPLES_PER_FRAME = SAMPLE_RATE // FPS  # 800: frame i covers [i/FPS, (i+1)/FPS) seconds
DEFAULT_RESOLUTION = 128
SUPPORTED_RESOLUTIONS = (64, 128, 256)

# Held keys as a bitmask (labels store the mask; scripts use the names).
KEY_BITS: dict[str, int] = {
    "W": 1,
    "A": 2,
    "S": 4,
    "D": 8,
    "LEFT": 16,
    "RIGHT": 32,
    "UP": 64,
    "DOWN": 128,
}

WEATHERS = ("clear", "rain", "snow", "fog")
TIMES_OF_DAY = ("day", "dusk", "night")
OBJECT_KINDS = ("dragon", "tree", "lantern", "crystal", "mushroom", "statue")
CREATURE_MOODS = ("absent", "neutral", "curious", "happy", "afraid", "startled")
RELATIONSHIPS = ("none", "friend", "fear")
COMPANION_LOOKS = ("default", "golden", "azure")
SURFACES = ("none", "grass", "rock", "sand", "snow")
