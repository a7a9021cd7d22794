from engine.sim import prompts
from engine.sim.prompts import EVENT_NAMES, NO_EVENT, resolve


def test_every_paraphrase_resolves_to_its_own_event():
    for event in prompts.EVENTS:
        for text in event.train:
            assert resolve(text).event == event.name and not resolve(text).heldout
        for text in event.heldout:
            assert resolve(text).event == event.name and resolve(text).heldout


def test_heldout_paraphrases_are_separate_and_plentiful():
    for event in prompts.EVENTS:
        assert len(event.train) >= 8 and len(event.heldout) >= 3
        train = {prompts.normalize(t) for t in event.train}
        assert not train & {prompts.normalize(t) for t in event.heldout}


def test_resolution_ignores_case_punctuation_and_filler():
    assert resolve("  Make it RAIN, please!! ").event == "rain"
    assert resolve("Cast fire-magic").event == "fire"


def test_unknown_text_is_no_event_not_an_error():
    result = resolve("what a lovely afternoon")
    assert result.event is None and result.event_id == NO_EVENT


def test_event_vocabulary_covers_the_issue():
    for name in (
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
        "gift_leaf",
        "gift_dragon",
        "companion_golden",
    ):
        assert name in EVENT_NAMES
