"""The world themes the engine can render; each gallery world picks one.

Kept in step with engine.sim.THEME_NAMES by tests/site/test_world_validation.py. The colours
paint a gallery card until a world has a real thumbnail.
"""

from dataclasses import dataclass


@dataclass(frozen=True)
class Theme:
    slug: str
    label: str
    sky: str
    ground: str


THEMES: tuple[Theme, ...] = (
    Theme("ember_forest", "Ember forest", "#f2a65a", "#3d5a2a"),
    Theme("frost_valley", "Frost valley", "#bcd7f0", "#e8f0f5"),
    Theme("desert_canyon", "Desert canyon", "#f6c98a", "#b5642d"),
    Theme("neon_night", "Neon night", "#1b1035", "#2de2e6"),
    Theme("misty_coast", "Misty coast", "#c9d6d8", "#4f7b74"),
)
THEME_CHOICES = [(theme.slug, theme.label) for theme in THEMES]
THEMES_BY_SLUG = {theme.slug: theme for theme in THEMES}
