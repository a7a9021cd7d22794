import json

import pytest

from engine.sim import ScriptError, load_scripts, parse_script, run_script
from engine.sim.constants import KEY_BITS

BASE = {"seed": 1, "theme": "frost_valley", "frames": 20}


def _script(*inputs, **top):
    return {**BASE, **top, "inputs": list(inputs)}


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ("{not json", "malformed JSON"),
        ("[1, 2]", "must be a JSON object"),
        (json.dumps({"theme": "frost_valley", "frames": 5}), "missing required field 'seed'"),
        (_script(theme="lava_land"), "unknown theme 'lava_land'"),
        (_script(frames=0), "frames must be a positive integer"),
        (_script({"t": -1, "kind": "action"}), r"inputs\[0\]\.t: negative"),
        (_script({"t": 1.5, "kind": "action"}), r"inputs\[0\]\.t: must be an integer"),
        (_script({"kind": "action"}), r"inputs\[0\]\.t: missing"),
        (
            _script({"t": 0, "kind": "action"}, {"t": 20, "kind": "action"}),
            r"inputs\[1\]\.t: frame 20 is beyond",
        ),
        (_script({"t": 0, "kind": "dance"}), r"inputs\[0\]\.kind: unknown kind 'dance'"),
        (
            _script({"t": 0, "kind": "prompt", "event": "earthquake"}),
            r"inputs\[0\]\.event: unknown event 'earthquake'",
        ),
        (_script({"t": 0, "kind": "prompt"}), r"inputs\[0\]: a prompt needs"),
        (
            _script({"t": 0, "kind": "prompt", "text": "make it rain", "event": "snow"}),
            r"inputs\[0\]\.text: does not name event",
        ),
        (_script({"t": 0, "kind": "action", "keys": ["Q"]}), r"inputs\[0\]\.keys"),
        (_script({"t": 0, "kind": "action", "yaw": "left"}), r"inputs\[0\]\.yaw"),
        (_script({"t": 0, "kind": "audio", "loudness": 3}), r"inputs\[0\]\.loudness"),
        (_script({"t": 0, "kind": "image", "image": {"sky": [1, 2]}}), r"inputs\[0\]\.image"),
        (_script({"t": 0, "kind": "image", "image": "missing.png"}), "cannot read reference"),
        (_script({"t": 0, "kind": "action", "speed": 3}), r"unknown field\(s\) for action"),
    ],
)
def test_bad_scripts_get_a_clear_error_naming_the_field(data, message):
    with pytest.raises(ScriptError, match=message):
        parse_script(data if isinstance(data, str) else json.dumps(data))


def test_strict_mode_rejects_text_that_names_no_event():
    data = _script({"t": 0, "kind": "prompt", "text": "sing me a song"})
    assert parse_script(data).inputs[0]["text"] == "sing me a song"  # players type anything
    with pytest.raises(ScriptError, match="names no known event"):
        parse_script(data, strict_prompts=True)


def test_keys_are_held_until_the_next_action_and_deltas_apply_once():
    script = parse_script(
        _script(
            {"t": 2, "kind": "action", "keys": ["W", "LEFT"], "yaw": 0.2},
            {"t": 5, "kind": "action", "keys": []},
            {"t": 3, "kind": "prompt", "event": "rain"},
            {"t": 4, "kind": "audio", "loudness": 0.7, "onset": True},
        )
    )
    frames = script.frame_inputs()
    held = KEY_BITS["W"] | KEY_BITS["LEFT"]
    assert [f.keys for f in frames[:7]] == [0, 0, held, held, held, 0, 0]
    assert [f.yaw for f in frames[:4]] == [0, 0, 0.2, 0]
    assert frames[3].prompts == ("make it rain",)
    assert frames[4].audio.loudness == 0.7 and frames[4].audio.onset


def test_scripts_round_trip_and_run(tmp_path):
    script = parse_script(
        _script(
            {"t": 1, "kind": "prompt", "text": "make it snow"},
            reference_image={
                "sky": [10, 20, 200],
                "foliage": [0, 90, 0],
                "ground": [200, 200, 200],
            },
        )
    )
    path = tmp_path / "episodes.json"
    path.write_text(json.dumps([script.to_json(), script.to_json()]))
    loaded = load_scripts(path)
    assert len(loaded) == 2 and loaded[0].to_json() == script.to_json()
    frames = list(run_script(loaded[0], resolution=64))
    assert len(frames) == 20
    assert frames[0].labels["weather"] == 0 and frames[1].labels["weather"] == 2
