"""engine.spec: the import-light registry the web side and the runtime read."""

import pytest

from engine import spec
from engine.sim import prompts, themes
from tests.imports import modules_loaded_by


def test_the_simulator_draws_exactly_the_registered_themes_in_order():
    assert themes.THEME_NAMES == spec.THEME_NAMES


def test_every_suggested_prompt_is_understood_by_the_simulator():
    suggested = [p for theme in spec.THEMES for p in theme.suggested_prompts]
    for prompt in [*spec.DEFAULT_PROMPTS, *suggested]:
        assert prompts.resolve(prompt).event is not None, prompt


def test_unknown_themes_get_the_default_suggestions():
    assert spec.suggested_prompts("frost_valley")[0] == "make it snow"
    assert spec.suggested_prompts("no_such_theme") == spec.DEFAULT_PROMPTS


def test_importing_the_spec_loads_neither_the_simulator_nor_numpy_nor_torch():
    assert modules_loaded_by("engine.spec", under=("numpy", "torch", "engine.sim")) == []


def test_inline_reference_palettes_become_three_bands():
    picture = spec.load_reference_image(
        {"sky": [1, 2, 3], "foliage": [4, 5, 6], "ground": [7, 8, 9]}
    )
    assert picture.shape == (spec.REFERENCE_SIZE, spec.REFERENCE_SIZE, 3)
    assert tuple(picture[0, 0]) == (1, 2, 3) and tuple(picture[-1, -1]) == (7, 8, 9)
    with pytest.raises(spec.ReferenceImageError):
        spec.load_reference_image({"sky": [1, 2, 3]})
