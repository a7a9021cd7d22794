"""Channel-layer messages the web side sends about a session (to its page and its worker)."""

import asyncio
import threading
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer

from sessions import channel_messages as messages
from sessions.models import AudiencePrompt, LiveRoom, PlaySession


def _send_from_sync_code(send, *args) -> None:
    """async_to_sync refuses to run on a thread that already has a running event loop (an
    async test harness, a browser driver); such callers get the send done on a helper thread."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        async_to_sync(send)(*args)
        return
    helper = threading.Thread(target=lambda: async_to_sync(send)(*args))
    helper.start()
    helper.join(10)


def session_closed(*, session_id: str, worker_channel: str, reason: str, failed: bool) -> None:
    """The page (and a live room's pages, if it has one) hear the end; the worker stops."""
    layer = get_channel_layer()
    closed = messages.session_closed(reason=reason, failed=failed)
    _send_from_sync_code(layer.group_send, messages.session_group(session_id), closed)
    _send_from_sync_code(layer.group_send, messages.room_group(session_id), closed)
    if worker_channel:
        stop = messages.engine_stop(session_id=session_id, reason=reason)
        _send_from_sync_code(layer.send, worker_channel, stop)


def engine_inputs(*, session: PlaySession, events: list[tuple[int, dict[str, Any]]]) -> None:
    """Send validated inputs (id, engine event) to the worker running `session`."""
    layer = get_channel_layer()
    for seq, event in events:
        message = messages.engine_input(session_id=str(session.pk), event=event, seq=seq)
        _send_from_sync_code(layer.send, session.worker_channel, message)


def room_changed(*, room: LiveRoom) -> None:
    """Every page in the room gets its new state (queue, viewers, steering)."""
    from sessions.room_selectors import room_state

    state = messages.room_state(state=room_state(room=room))
    _send_from_sync_code(
        get_channel_layer().group_send, messages.room_group(str(room.session_id)), state
    )


def room_prompt_applied(*, session: PlaySession, prompt: AudiencePrompt) -> None:
    """The prompt goes to the engine as a sentence, and the room hears who changed the world."""
    from sessions.room_selectors import prompt_summary

    if session.worker_channel:
        engine_inputs(session=session, events=[(0, {"kind": "prompt", "text": prompt.text})])
    applied = messages.room_applied(prompt=prompt_summary(prompt))
    _send_from_sync_code(
        get_channel_layer().group_send, messages.room_group(str(session.pk)), applied
    )


def room_viewer_removed(*, session: PlaySession, viewer) -> None:
    """The removed spectator's pages close, and the worker drops their media connections."""
    layer = get_channel_layer()
    removed = messages.room_removed(user_id=viewer.pk)
    _send_from_sync_code(layer.group_send, messages.room_group(str(session.pk)), removed)
    if session.worker_channel:
        eject = messages.engine_eject(session_id=str(session.pk), viewer=str(viewer.pk))
        _send_from_sync_code(layer.send, session.worker_channel, eject)
