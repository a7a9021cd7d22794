"""Validation of everything a player's browser sends: WebSocket messages and data-channel inputs.

All of it is untrusted. Each parser returns a plain, bounded dict or raises ProtocolError with a
code and a message the player can read; callers count errors and never crash on them.
"""

import json
import math
from typing import Any

from worldsite.engine_gateway.constants import KEY_BITS

MAX_WS_MESSAGE_BYTES = 64 * 1024  # an SDP offer with candidates is ~5-10 KB
MAX_SDP_BYTES = 32 * 1024
MAX_DATA_MESSAGE_BYTES = 2048
MAX_PROMPT_CHARS = 300
MAX_CAMERA_DELTA = 0.5  # radians per input message; a flick of the mouse, not a teleport

ALL_KEYS_MASK = sum(KEY_BITS.values())


class ProtocolError(ValueError):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def _decode(raw: str | bytes | None, limit: int) -> dict[str, Any]:
    if raw is None:
        raise ProtocolError("empty", "Empty message.")
    if len(raw) > limit:
        raise ProtocolError("too_large", f"Message is larger than {limit} bytes.")
    try:
        message = json.loads(raw)
    except RecursionError as exc:  # [[[[...]]]] nested deeper than the interpreter's stack
        raise ProtocolError("bad_json", "Message is nested too deeply.") from exc
    except (ValueError, TypeError, UnicodeDecodeError) as exc:
        raise ProtocolError("bad_json", "Message is not valid JSON.") from exc
    if not isinstance(message, dict):
        raise ProtocolError("bad_shape", "Message must be a JSON object.")
    if not isinstance(message.get("type"), str):
        raise ProtocolError("bad_shape", "Message needs a string 'type'.")
    return message


def parse_ws_message(raw: str | bytes | None) -> dict[str, Any]:
    """A message on /ws/play/<id>/: an SDP offer, an end request, or a ping."""
    message = _decode(raw, MAX_WS_MESSAGE_BYTES)
    kind = message["type"]
    if kind == "offer":
        return {"type": "offer", "sdp": parse_sdp_offer(message.get("sdp"))}
    if kind == "end":
        return {"type": "end"}
    if kind == "ping":
        return {"type": "ping", "t": _finite(message.get("t", 0), "t")}
    raise ProtocolError("unknown_type", f"Unknown message type {kind[:40]!r}.")


def parse_sdp_offer(sdp: Any) -> str:
    """An SDP offer for the session's media (the play page's, or a WHEP client's)."""
    if not isinstance(sdp, str) or not sdp.startswith("v=0"):
        raise ProtocolError("bad_sdp", "The offer's SDP is missing or malformed.")
    if len(sdp) > MAX_SDP_BYTES:
        raise ProtocolError("bad_sdp", "The offer's SDP is too large.")
    if "m=video" not in sdp or "a=fingerprint" not in sdp:
        raise ProtocolError("bad_sdp", "The offer must receive video over DTLS.")
    return sdp


def _finite(value: Any, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ProtocolError("bad_field", f"'{name}' must be a finite number.")
    try:
        number = float(value)  # a 400-digit integer does not fit a float: OverflowError
    except OverflowError:
        number = math.inf
    if not math.isfinite(number):
        raise ProtocolError("bad_field", f"'{name}' must be a finite number.")
    return number


def _key_names(value: Any) -> list[str]:
    """Held keys as engine key names, from a bitmask or a list of names."""
    if isinstance(value, int) and not isinstance(value, bool):
        if not 0 <= value <= ALL_KEYS_MASK:
            raise ProtocolError("bad_field", "'keys' bitmask is out of range.")
        return [name for name, bit in KEY_BITS.items() if value & bit]
    if isinstance(value, list) and len(value) <= len(KEY_BITS):
        names = []
        for key in value:
            if not isinstance(key, str) or key.upper() not in KEY_BITS:
                raise ProtocolError("bad_field", f"Unknown key {str(key)[:10]!r}.")
            names.append(key.upper())
        return sorted(set(names), key=list(KEY_BITS).index)
    raise ProtocolError("bad_field", "'keys' must be a bitmask or a list of key names.")


def parse_data_message(raw: str | bytes | None) -> dict[str, Any]:
    """An input from the data channel: movement/camera, a prompt, or a bench probe."""
    message = _decode(raw, MAX_DATA_MESSAGE_BYTES)
    kind = message["type"]
    if kind == "input":
        yaw = _finite(message.get("yaw", 0.0), "yaw")
        pitch = _finite(message.get("pitch", 0.0), "pitch")
        if abs(yaw) > MAX_CAMERA_DELTA or abs(pitch) > MAX_CAMERA_DELTA:
            raise ProtocolError("bad_field", "Camera delta is too large for one message.")
        seq = message.get("seq", 0)
        if not isinstance(seq, int) or isinstance(seq, bool) or not 0 <= seq < 2**53:
            raise ProtocolError("bad_field", "'seq' must be a non-negative integer.")
        return {
            "type": "input",
            "keys": _key_names(message.get("keys", 0)),
            "yaw": yaw,
            "pitch": pitch,
            "seq": seq,
        }
    if kind == "prompt":
        return {"type": "prompt", "text": _prompt_text(message.get("text"))}
    raise ProtocolError("unknown_type", f"Unknown input type {kind[:40]!r}.")


def _prompt_text(text: Any) -> str:
    """A sentence for the world, whitespace folded, at most MAX_PROMPT_CHARS."""
    if not isinstance(text, str) or not text.strip():
        raise ProtocolError("bad_field", "A prompt needs some text.")
    text = " ".join(text.split())
    if len(text) > MAX_PROMPT_CHARS:
        raise ProtocolError("too_long", f"Prompts are limited to {MAX_PROMPT_CHARS} characters.")
    return text


ROOM_STEERING_MODES = ("host", "audience")
MAX_USERNAME_CHARS = 150


def _record_id(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value < 2**53:
        raise ProtocolError("bad_field", f"'{name}' must be a positive integer id.")
    return value


def parse_room_message(raw: str | bytes | None) -> dict[str, Any]:
    """A message on a live room's socket /ws/live/<room>/. Anyone in the room: `offer` (to
    watch), `prompt` (into the audience queue), `support` (a queued prompt), `ping`. The host
    only (the consumer checks who sent it): `apply` a queued prompt, `steering` (host |
    audience), `remove` a viewer by username."""
    message = _decode(raw, MAX_WS_MESSAGE_BYTES)
    kind = message["type"]
    if kind == "offer":
        return {"type": "offer", "sdp": parse_sdp_offer(message.get("sdp"))}
    if kind == "prompt":
        if len(json.dumps(message)) > MAX_DATA_MESSAGE_BYTES:
            raise ProtocolError(
                "too_large", f"Message is larger than {MAX_DATA_MESSAGE_BYTES} bytes."
            )
        return {"type": "prompt", "text": _prompt_text(message.get("text"))}
    if kind in ("support", "apply"):
        return {"type": kind, "prompt": _record_id(message.get("prompt"), "prompt")}
    if kind == "steering":
        mode = message.get("mode")
        if mode not in ROOM_STEERING_MODES:
            raise ProtocolError("bad_field", "'mode' must be 'host' or 'audience'.")
        return {"type": "steering", "mode": mode}
    if kind == "remove":
        user = message.get("user")
        if not isinstance(user, str) or not 0 < len(user) <= MAX_USERNAME_CHARS:
            raise ProtocolError("bad_field", "'user' must be a viewer's username.")
        return {"type": "remove", "user": user}
    if kind == "ping":
        return {"type": "ping", "t": _finite(message.get("t", 0), "t")}
    raise ProtocolError("unknown_type", f"Unknown message type {kind[:40]!r}.")


def engine_event(message: dict[str, Any]) -> dict[str, Any]:
    """The engine's event for a parsed data message (parse_data_message's output)."""
    if message["type"] == "input":
        return {
            "kind": "action",
            "keys": message["keys"],
            "yaw": message["yaw"],
            "pitch": message["pitch"],
        }
    return {"kind": "prompt", "text": message["text"]}
