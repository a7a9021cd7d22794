"""Fuzzing every parser of untrusted play messages with generated, mostly malformed input: each
either returns a well-formed message or raises ProtocolError, never anything else, and the data
channel keeps taking good inputs after thousands of bad ones."""

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sessions.protocol import (
    MAX_CAMERA_DELTA,
    MAX_PROMPT_CHARS,
    ProtocolError,
    parse_data_message,
    parse_room_message,
    parse_ws_message,
)
from sessions.worker.peer import PlayPeer
from tools.fuzz import malformed_messages

FIELDS = ["type", "sdp", "t", "keys", "yaw", "pitch", "seq", "text", "prompt", "mode", "user"]
TYPES = ["offer", "end", "ping", "input", "prompt", "", "gift", "INPUT"]
TYPES += ["support", "apply", "steering", "remove", "audience", "host"]

scalars = (
    st.none()
    | st.booleans()
    | st.text(max_size=40)
    | st.sampled_from(TYPES)
    | st.integers(min_value=-(10**500), max_value=10**500)
    | st.floats(allow_nan=True, allow_infinity=True)
)
json_values = st.recursive(
    scalars,
    lambda children: (
        st.lists(children, max_size=5)
        | st.dictionaries(st.sampled_from(FIELDS) | st.text(max_size=8), children, max_size=6)
    ),
    max_leaves=30,
)
messages = st.dictionaries(st.sampled_from(FIELDS), json_values, max_size=8).map(
    lambda d: json.dumps(d)
)
deep = st.integers(min_value=1, max_value=30_000).map(lambda n: "[" * n + "]" * n)
huge_numbers = st.tuples(
    st.sampled_from(["t", "yaw", "pitch", "seq", "keys"]),
    st.integers(min_value=300, max_value=2000),
).map(
    lambda fd: (
        json.dumps({"type": "ping" if fd[0] == "t" else "input"})[:-1]
        + f', "{fd[0]}": {"9" * fd[1]}}}'
    )
)
raw_inputs = (
    messages | deep | huge_numbers | st.text(max_size=300) | st.binary(max_size=300) | st.none()
)
FUZZ = settings(max_examples=600, deadline=None, suppress_health_check=list(HealthCheck))


@FUZZ
@given(raw_inputs)
def test_websocket_parser_returns_a_known_message_or_a_protocol_error(raw):
    try:
        message = parse_ws_message(raw)
    except ProtocolError as error:
        assert error.code and error.message
        return
    assert message["type"] in {"offer", "end", "ping"}
    if message["type"] == "ping":
        assert isinstance(message["t"], float)


@FUZZ
@given(raw_inputs)
def test_data_channel_parser_returns_a_bounded_input_or_a_protocol_error(raw):
    try:
        message = parse_data_message(raw)
    except ProtocolError as error:
        assert error.code and error.message
        return
    if message["type"] == "input":
        assert abs(message["yaw"]) <= MAX_CAMERA_DELTA >= abs(message["pitch"])
        assert 0 <= message["seq"] < 2**53
    else:
        assert message["type"] == "prompt" and 0 < len(message["text"]) <= MAX_PROMPT_CHARS


@FUZZ
@given(raw_inputs)
def test_room_parser_returns_a_bounded_message_or_a_protocol_error(raw):
    """A live room's socket: every spectator's message is one of the room's, bounded, or an
    error the page can show."""
    try:
        message = parse_room_message(raw)
    except ProtocolError as error:
        assert error.code and error.message
        return
    kind = message["type"]
    assert kind in {"offer", "prompt", "support", "apply", "steering", "remove", "ping"}
    if kind == "prompt":
        assert 0 < len(message["text"]) <= MAX_PROMPT_CHARS
    elif kind in ("support", "apply"):
        assert isinstance(message["prompt"], int) and 0 < message["prompt"] < 2**53
    elif kind == "steering":
        assert message["mode"] in ("host", "audience")
    elif kind == "remove":
        assert isinstance(message["user"], str) and 0 < len(message["user"]) <= 150


class _Runner:
    def __init__(self) -> None:
        self.events: list[dict] = []

    def push(self, event: dict, seq: int = 0) -> bool:
        self.events.append(event)
        return True


class _Channel:
    readyState = "open"

    def __init__(self) -> None:
        self.sent: list[str] = []

    def send(self, text: str) -> None:
        self.sent.append(text)


def test_the_data_channel_still_takes_inputs_after_a_flood_of_garbage():
    """5,000 mutated messages through the peer's handler (with a fake runner): none escapes as
    an exception, each bad one is counted and answered, and a good input still gets through."""
    batch = malformed_messages(5000, seed=12)
    runner = _Runner()
    peer = PlayPeer.__new__(PlayPeer)  # the handler only, no RTCPeerConnection
    peer.runner, peer.bad_messages, peer.dropped_inputs = runner, 0, 0
    unlimited = type("Unlimited", (), {"allow": staticmethod(lambda: True)})()
    peer._movement_limit = peer._prompt_limit = peer._message_limit = unlimited
    peer._error_replies = unlimited
    channel = _Channel()
    for raw in batch:
        peer._handle_data_message(channel, raw)
    assert peer.bad_messages >= 4000 and len(channel.sent) >= peer.bad_messages
    peer._handle_data_message(channel, '{"type": "input", "keys": ["W"], "seq": 1}')
    assert runner.events[-1] == {"kind": "action", "keys": ["W"], "yaw": 0.0, "pitch": 0.0}
