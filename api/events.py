"""GET <events_url>: a session's server-sent events.

The stream is to an API client what the play page's socket is to a browser: while it is open the
session counts as attended (not abandoned), and once the session is admitted the stream asks
for a world engine (so does a WHEP offer, api/whep.py). It reads the session's state from the
database once a second and listens to the session's channel-layer group for the worker's
heartbeats (the highest input id applied). It ends after the `ended` event, or when the client
goes away (daphne cancels it).

Events (each `data` is JSON): `state` {state, reason}, `queue` {position, eta_s},
`inputs_applied` {up_to}, `ended` {state, reason, seconds_used}.
"""

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any
from uuid import UUID

from asgiref.sync import sync_to_async
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from django.http import HttpRequest, StreamingHttpResponse
from ninja import Router

from api.sessions import owned_session
from sessions import engine_requests, selectors, services
from sessions.channel_messages import session_group
from sessions.models import PlaySession

router = Router(tags=["sessions"])

State = PlaySession.State
POLL_SECONDS = 1.0
KEEPALIVE_SECONDS = 15.0


def sse(event: str, data: dict[str, Any]) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data)}\n\n".encode()


@router.get(
    "/{session_id}/events/",
    url_name="session_events",
    summary="Follow a session (server-sent events)",
    openapi_extra={
        "responses": {200: {"description": "An event stream", "content": {"text/event-stream": {}}}}
    },
)
async def session_events(request: HttpRequest, session_id: UUID) -> StreamingHttpResponse:
    session = await sync_to_async(owned_session)(request, session_id)
    await sync_to_async(services.session_page_seen)(session=session)
    response = StreamingHttpResponse(_events(str(session.pk)), content_type="text/event-stream")
    response["Cache-Control"] = "no-store"
    response["X-Accel-Buffering"] = "no"  # a buffering proxy would hold events back
    return response


def _load(session_id: str) -> tuple[PlaySession, int | None, int | None]:
    session = PlaySession.objects.select_related("world").get(pk=session_id)
    position = selectors.queue_position(session=session)
    eta = selectors.queue_eta_seconds(position=position) if position else None
    return session, position, eta


async def _events(session_id: str) -> AsyncIterator[bytes]:
    layer = get_channel_layer()
    channel = await layer.new_channel()
    await layer.group_add(session_group(session_id), channel)
    clock = asyncio.get_running_loop().time
    last_state, last_queue, applied_up_to = "", None, 0
    engine_requested = False
    sent_at = clock()
    try:
        while True:
            # (the stream outlives its request: Channels' wrapper recycles stale connections)
            session, position, eta = await database_sync_to_async(_load)(session_id)
            due: list[bytes] = []
            if session.state != last_state:
                last_state = session.state
                due.append(sse("state", {"state": session.state, "reason": session.end_reason}))
            if not session.is_active:
                ended = {
                    "state": session.state,
                    "reason": session.end_reason,
                    "seconds_used": session.seconds_used,
                }
                for event in [*due, sse("ended", ended)]:
                    yield event
                return
            if position is not None and (position, eta) != last_queue:
                last_queue = (position, eta)
                due.append(sse("queue", {"position": position, "eta_s": eta}))
            for event in due:
                yield event
            if session.state == State.STARTING and not session.worker_name and not engine_requested:
                engine_requested = True
                await engine_requests.engine_start_request(session=session)
            up_to = await _applied_input(layer, channel)
            if up_to > applied_up_to:
                applied_up_to = up_to
                due.append(sse("inputs_applied", {"up_to": up_to}))
                yield due[-1]
            if due:
                sent_at = clock()
            elif clock() - sent_at > KEEPALIVE_SECONDS:
                sent_at = clock()
                yield b": keep-alive\n\n"  # proxies close streams that stay silent
    finally:
        await layer.group_discard(session_group(session_id), channel)


async def _applied_input(layer, channel: str) -> int:
    """Wait up to POLL_SECONDS for the session's messages; the highest input id a worker
    heartbeat reported (0 if none). A `session.closed` cuts the wait short."""
    up_to = 0
    loop = asyncio.get_running_loop()
    deadline = loop.time() + POLL_SECONDS
    while (left := deadline - loop.time()) > 0:
        try:
            message = await asyncio.wait_for(layer.receive(channel), timeout=left)
        except TimeoutError:
            break
        if message.get("type") == "engine.heartbeat":
            up_to = max(up_to, int(message.get("last_seq") or 0))
        elif message.get("type") in ("session.closed", "engine.live", "engine.accepted"):
            break
    return up_to
