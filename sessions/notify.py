"""Channel-layer messages the web side sends about a session (to its page and its worker)."""

import asyncio
import threading
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer

from sessions import channel_messages as messages
from sessions.models import PlaySession


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
    layer = get_channel_layer()
    closed = messages.session_closed(reason=reason, failed=failed)
    _send_from_sync_code(layer.group_send, messages.session_group(session_id), closed)
    if worker_channel:
        stop = messages.engine_stop(session_id=session_id, reason=reason)
        _send_from_sync_code(layer.send, worker_channel, stop)


def engine_inputs(*, session: PlaySession, events: list[tuple[int, dict[str, Any]]]) -> None:
    """Send validated inputs (id, engine event) to the worker running `session`."""
    layer = get_channel_layer()
    for seq, event in events:
        message = messages.engine_input(session_id=str(session.pk), event=event, seq=seq)
        _send_from_sync_code(layer.send, session.worker_channel, message)
