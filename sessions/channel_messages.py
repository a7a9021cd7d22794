"""Every message of a play session's lifecycle, typed, in one place.

Three parties talk: the player's page (WebSocket, parsed in sessions/protocol.py), the page's
PlayConsumer, and the engine worker; the session service tells both ends when a session is over.
Channel-layer messages must be plain dicts (msgpack over Redis), so each one is a TypedDict,
built only by the function of the same name below: a field can't be misspelt in one sender and
read differently elsewhere.

    consumer -> workers' shared channel   engine.start
    consumer -> its session's worker      engine.offer, engine.detach
    API      -> its session's worker      engine.offer, engine.hangup (WHEP)
    view     -> its session's worker      engine.image, engine.input (the API's input_url)
    service  -> its session's worker      engine.stop
    worker   -> session group (page)      engine.accepted, engine.live, engine.heartbeat,
                                          engine.stopped (only when the database is away)
    worker   -> a consumer's channel      engine.answer, engine.error
    service  -> session group (page)      session.closed
    consumer -> page (WebSocket JSON)     status, ready, answer, error, stats, pong

Live rooms (a session watched by an audience, sessions/room_services.py):

    room consumer / API -> session's worker   engine.watch, engine.unwatch (a viewer's media)
    service  -> session's worker              engine.eject (a removed viewer), engine.input
    service  -> room group (room pages)       room.state, room.applied, room.removed,
                                              session.closed
    worker   -> a viewer's reply channel      engine.answer, engine.error
"""

from typing import Any, Literal, NotRequired, TypedDict

START_CHANNEL = "engine.start"  # workers with free capacity listen here


def session_group(session_id: str) -> str:
    """The group of one session's page consumer(s)."""
    return f"play.{session_id}"


def room_group(session_id: str) -> str:
    """The group of every page watching one session's live room (host and spectators)."""
    return f"room.{session_id}"


# --- to workers -----------------------------------------------------------------------------------
class EngineStart(TypedDict):
    type: Literal["engine.start"]
    session_id: str
    allowed_seconds: int
    spec: dict[str, Any]


def engine_start(*, session_id: str, allowed_seconds: int, spec: dict[str, Any]) -> EngineStart:
    return {
        "type": "engine.start",
        "session_id": session_id,
        "allowed_seconds": allowed_seconds,
        "spec": spec,
    }


class EngineOffer(TypedDict):
    type: Literal["engine.offer"]
    session_id: str
    sdp: str
    reply_channel: str
    codec: str


def engine_offer(*, session_id: str, sdp: str, reply_channel: str, codec: str) -> EngineOffer:
    return {
        "type": "engine.offer",
        "session_id": session_id,
        "sdp": sdp,
        "reply_channel": reply_channel,
        "codec": codec,
    }


class EngineDetach(TypedDict):
    type: Literal["engine.detach"]
    session_id: str
    reply_channel: str  # which page's consumer went away (a stale tab's is ignored)


def engine_detach(*, session_id: str, reply_channel: str) -> EngineDetach:
    return {"type": "engine.detach", "session_id": session_id, "reply_channel": reply_channel}


class EngineHangup(TypedDict):
    """A WHEP client hung up (DELETE on its resource): close that media connection only; the
    session runs on until it is ended or times out, and may be connected to again."""

    type: Literal["engine.hangup"]
    session_id: str
    reply_channel: str  # the channel that made the connection (a stale one is ignored)


def engine_hangup(*, session_id: str, reply_channel: str) -> EngineHangup:
    return {"type": "engine.hangup", "session_id": session_id, "reply_channel": reply_channel}


class EngineImage(TypedDict):
    type: Literal["engine.image"]
    session_id: str
    png: bytes


def engine_image(*, session_id: str, png: bytes) -> EngineImage:
    return {"type": "engine.image", "session_id": session_id, "png": png}


class EngineInput(TypedDict):
    """One validated input (sessions.protocol.engine_event's form) with the id the worker
    reports back as `last_seq` once the engine has applied it."""

    type: Literal["engine.input"]
    session_id: str
    event: dict[str, Any]
    seq: int


def engine_input(*, session_id: str, event: dict[str, Any], seq: int) -> EngineInput:
    return {"type": "engine.input", "session_id": session_id, "event": event, "seq": seq}


class EngineWatch(TypedDict):
    """A spectator's offer: a receive-only connection to the session's relayed picture and
    sound. It never moves the player."""

    type: Literal["engine.watch"]
    session_id: str
    sdp: str
    reply_channel: str  # identifies this viewer connection (engine.unwatch names it again)
    viewer: str  # the spectator's user id (engine.eject closes all of theirs)
    codec: str


def engine_watch(
    *, session_id: str, sdp: str, reply_channel: str, viewer: str, codec: str
) -> EngineWatch:
    return {
        "type": "engine.watch",
        "session_id": session_id,
        "sdp": sdp,
        "reply_channel": reply_channel,
        "viewer": viewer,
        "codec": codec,
    }


class EngineUnwatch(TypedDict):
    type: Literal["engine.unwatch"]
    session_id: str
    reply_channel: str


def engine_unwatch(*, session_id: str, reply_channel: str) -> EngineUnwatch:
    return {"type": "engine.unwatch", "session_id": session_id, "reply_channel": reply_channel}


class EngineEject(TypedDict):
    type: Literal["engine.eject"]
    session_id: str
    viewer: str


def engine_eject(*, session_id: str, viewer: str) -> EngineEject:
    return {"type": "engine.eject", "session_id": session_id, "viewer": viewer}


class EngineStop(TypedDict):
    type: Literal["engine.stop"]
    session_id: str
    reason: str


def engine_stop(*, session_id: str, reason: str) -> EngineStop:
    return {"type": "engine.stop", "session_id": session_id, "reason": reason}


# --- from workers ---------------------------------------------------------------------------------
class EngineAccepted(TypedDict):
    type: Literal["engine.accepted"]
    worker: str
    worker_channel: str


def engine_accepted(*, worker: str, worker_channel: str) -> EngineAccepted:
    return {"type": "engine.accepted", "worker": worker, "worker_channel": worker_channel}


class EngineAnswer(TypedDict):
    type: Literal["engine.answer"]
    sdp: str


def engine_answer(*, sdp: str) -> EngineAnswer:
    return {"type": "engine.answer", "sdp": sdp}


class EngineError(TypedDict):
    type: Literal["engine.error"]
    message: str


def engine_error(*, message: str) -> EngineError:
    return {"type": "engine.error", "message": message}


class EngineLive(TypedDict):
    type: Literal["engine.live"]


def engine_live() -> EngineLive:
    return {"type": "engine.live"}


class EngineHeartbeat(TypedDict):
    """Once a second per session, for the page's HUD (liveness is judged from the database)."""

    type: Literal["engine.heartbeat"]
    worker: str
    frames: int
    late_frames: int
    frame_ms_p50: float | None
    frame_late_ms_max: float  # the latest frame since the last heartbeat: ms after its turn
    # began until it was ready (its generation included; a frame's turn is 50 ms at 20 fps)
    input_latency_ms_p50: float | None
    seconds_left: int
    last_seq: int
    bad_messages: int
    viewers: int  # a live room's media connections (spectators)


def engine_heartbeat(**stats: Any) -> EngineHeartbeat:
    return {"type": "engine.heartbeat", **stats}  # type: ignore[typeddict-item]


class EngineStopped(TypedDict):
    type: Literal["engine.stopped"]
    reason: str
    failed: bool


def engine_stopped(*, reason: str, failed: bool) -> EngineStopped:
    return {"type": "engine.stopped", "reason": reason, "failed": failed}


# --- from the session service ---------------------------------------------------------------------
class SessionClosed(TypedDict):
    type: Literal["session.closed"]
    reason: str
    failed: bool


def session_closed(*, reason: str, failed: bool) -> SessionClosed:
    return {"type": "session.closed", "reason": reason, "failed": failed}


# --- from the room services (to a room's pages) ------------------------------------------------
class RoomState(TypedDict):
    type: Literal["room.state"]
    state: dict[str, Any]  # sessions.room_selectors.room_state


def room_state(*, state: dict[str, Any]) -> RoomState:
    return {"type": "room.state", "state": state}


class RoomApplied(TypedDict):
    """A prompt changed the world: which, who sent it, and who applied it (host | audience)."""

    type: Literal["room.applied"]
    prompt: dict[str, Any]  # sessions.room_selectors.prompt_summary


def room_applied(*, prompt: dict[str, Any]) -> RoomApplied:
    return {"type": "room.applied", "prompt": prompt}


class RoomRemoved(TypedDict):
    type: Literal["room.removed"]
    user_id: int


def room_removed(*, user_id: int) -> RoomRemoved:
    return {"type": "room.removed", "user_id": user_id}


# --- consumer -> page (JSON over the WebSocket) ---------------------------------------------------
class PageStatus(TypedDict):
    type: Literal["status"]
    state: str  # queued | starting | live | ended | failed
    reason: NotRequired[str]
    position: NotRequired[int | None]
    eta_s: NotRequired[int]


def page_status(state: str, **details: Any) -> PageStatus:
    return {"type": "status", "state": state, **details}  # type: ignore[typeddict-item]


def page_ready() -> dict[str, str]:
    return {"type": "ready"}


def page_answer(*, sdp: str) -> dict[str, str]:
    return {"type": "answer", "sdp": sdp}


def page_error(*, code: str, message: str) -> dict[str, str]:
    return {"type": "error", "code": code, "message": message}


def page_stats(heartbeat: EngineHeartbeat) -> dict[str, Any]:
    return {**{k: v for k, v in heartbeat.items() if k != "type"}, "type": "stats"}


def page_pong(*, t: float) -> dict[str, Any]:
    return {"type": "pong", "t": t}
