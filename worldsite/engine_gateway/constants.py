"""The engine's numbers the web side needs, from engine.spec (never from the simulator)."""

from engine.spec import (
    DEFAULT_PROMPTS,
    FPS,
    KEY_BITS,
    SAMPLE_RATE,
    SAMPLES_PER_FRAME,
    THEME_NAMES,
    THEMES,
    THEMES_BY_NAME,
    ThemeInfo,
    suggested_prompts,
)

__all__ = [
    "DEFAULT_PROMPTS",
    "FPS",
    "KEY_BITS",
    "SAMPLES_PER_FRAME",
    "SAMPLE_RATE",
    "THEMES",
    "THEMES_BY_NAME",
    "THEME_NAMES",
    "ThemeInfo",
    "suggested_prompts",
]
