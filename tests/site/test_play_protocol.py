"""Untrusted input from the play page: WebSocket and data-channel message validation."""

import json

import pytest

from sessions.protocol import ProtocolError, parse_data_message, parse_ws_message

OFFER = "v=0\r\nm=video 9 UDP/TLS/RTP/SAVPF 96\r\na=fingerprint:sha-256 AB\r\n"


def test_valid_ws_messages():
    assert parse_ws_message(json.dumps({"type": "offer", "sdp": OFFER})) == {
        "type": "offer",
        "sdp": OFFER,
    }
    assert parse_ws_message('{"type": "end"}') == {"type": "end"}
    assert parse_ws_message('{"type": "ping", "t": 5}') == {"type": "ping", "t": 5.0}


@pytest.mark.parametrize(
    ("raw", "code"),
    [
        (None, "empty"),
        ("{", "bad_json"),
        (b"\xff\xfe", "bad_json"),
        ('"offer"', "bad_shape"),
        ('{"sdp": "v=0"}', "bad_shape"),
        ('{"type": 3}', "bad_shape"),
        ('{"type": "hack"}', "unknown_type"),
        ('{"type": "offer"}', "bad_sdp"),
        ('{"type": "offer", "sdp": "v=0 audio only"}', "bad_sdp"),
        ('{"type": "ping", "t": NaN}', "bad_field"),
        ("x" * 70_000, "too_large"),
    ],
)
def test_bad_ws_messages(raw, code):
    with pytest.raises(ProtocolError) as excinfo:
        parse_ws_message(raw)
    assert excinfo.value.code == code


def test_inputs_become_engine_key_names():
    message = parse_data_message('{"type": "input", "keys": 9, "yaw": 0.1, "seq": 4}')
    assert message == {"type": "input", "keys": ["W", "D"], "yaw": 0.1, "pitch": 0.0, "seq": 4}
    named = parse_data_message('{"type": "input", "keys": ["w", "LEFT", "w"]}')
    assert named["keys"] == ["W", "LEFT"]


def test_prompts_are_trimmed_and_bounded():
    assert parse_data_message('{"type": "prompt", "text": "  make   it rain "}')["text"] == (
        "make it rain"
    )
    with pytest.raises(ProtocolError) as excinfo:
        parse_data_message(json.dumps({"type": "prompt", "text": "a" * 301}))
    assert excinfo.value.code == "too_long"


@pytest.mark.parametrize(
    "raw",
    [
        '{"type": "input", "keys": 256}',
        '{"type": "input", "keys": -1}',
        '{"type": "input", "keys": ["JUMP"]}',
        '{"type": "input", "keys": "W"}',
        '{"type": "input", "yaw": 3.0}',
        '{"type": "input", "yaw": true}',
        '{"type": "input", "seq": -2}',
        '{"type": "prompt", "text": ""}',
        '{"type": "prompt", "text": 42}',
        '{"type": "gift"}',
        "x" * 3000,
    ],
)
def test_bad_inputs_are_refused(raw):
    with pytest.raises(ProtocolError):
        parse_data_message(raw)


HUGE = "9" * 400


@pytest.mark.parametrize(
    ("parse", "raw"),
    [
        (parse_ws_message, '{"type": "ping", "t": ' + "[" * 30_000 + "]" * 30_000 + "}"),
        (parse_ws_message, "[" * 30_000 + "]" * 30_000),
        (parse_ws_message, '{"type": "ping", "t": ' + HUGE + "}"),
        (parse_ws_message, '{"type": "ping", "t": -' + HUGE + "}"),
        (parse_data_message, "[" * 1000 + "]" * 1000),
        (parse_data_message, '{"type": "input", "yaw": ' + HUGE + "}"),
        (parse_data_message, '{"type": "input", "pitch": ' + HUGE + "}"),
        (parse_data_message, '{"type": "input", "keys": ' + HUGE + "}"),
        (parse_data_message, '{"type": "input", "seq": ' + HUGE + "}"),
    ],
)
def test_deep_nesting_and_huge_integers_are_protocol_errors(parse, raw):
    """They used to escape as RecursionError / OverflowError: on the WebSocket the consumer
    crashed, on the data channel the exception reached aiortc's DTLS transport."""
    with pytest.raises(ProtocolError):
        parse(raw)
