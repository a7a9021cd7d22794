"""Media over WHEP (WebRTC-HTTP egress): POST an SDP offer to a session's whep_url, get the
answer and a resource Location; DELETE that resource to hang up.

The offer reaches the session's engine worker exactly as the play page's does (engine.offer
over the channel layer, the answer back on a reply channel); the worker's peer sends the
session's video and audio and takes inputs on a data channel named `input`. The reply
channel's name identifies the connection, so the resource URL carries it (base64url) and a
hang-up closes only that connection, never a newer one.
"""

import asyncio
import base64
import binascii
import contextlib
from uuid import UUID

from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer
from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.urls import reverse
from ninja import Router

from api.limits import enforce_rate_limit
from api.problems import Problem
from api.sessions import owned_session
from sessions import channel_messages as messages
from sessions import engine_requests
from sessions.channel_messages import session_group
from sessions.models import PlaySession
from sessions.protocol import ProtocolError, parse_sdp_offer

router = Router(tags=["media"])

SDP = "application/sdp"
ANSWER_TIMEOUT_S = 20.0


def resource_id(reply_channel: str) -> str:
    return base64.urlsafe_b64encode(reply_channel.encode()).decode().rstrip("=")


def reply_channel_of(resource_id: str) -> str:
    try:
        return base64.urlsafe_b64decode(resource_id + "=" * (-len(resource_id) % 4)).decode()
    except (binascii.Error, UnicodeDecodeError) as error:
        raise Problem(404, "There is no such WHEP connection.") from error


def sdp_offer(request: HttpRequest) -> str:
    if request.content_type != SDP:
        raise Problem(415, f"Send the offer as Content-Type: {SDP}.")
    try:
        return parse_sdp_offer(request.body.decode())
    except (UnicodeDecodeError, ProtocolError) as error:
        message = error.message if isinstance(error, ProtocolError) else "The SDP is not UTF-8."
        raise Problem(422, message, kind="invalid-request") from error


async def _wait_for_engine(layer, channel: str, session: PlaySession) -> str:
    """The channel of the worker running `session`, once that worker has the session open.

    `channel` is in the session's group: a worker reports `engine.accepted` when it has opened
    the session and a heartbeat every second while it runs it. Its channel is in the database
    a moment earlier (when it claims the session), too early for an offer."""
    if session.state == PlaySession.State.QUEUED or not session.is_active:
        raise _not_running(session)
    if not session.worker_channel:
        await engine_requests.engine_start_request(session=session)
    with contextlib.suppress(TimeoutError):  # then the database says what became of it
        await asyncio.wait_for(_engine_report(layer, channel), settings.ENGINE_START_TIMEOUT)
    await sync_to_async(session.refresh_from_db)()
    if not session.is_active or not session.worker_channel:
        raise _not_running(session)
    return session.worker_channel


async def _engine_report(layer, channel: str) -> None:
    while (await layer.receive(channel)).get("type") not in ("engine.accepted", "engine.heartbeat"):
        pass


def _not_running(session: PlaySession) -> Problem:
    return Problem(
        409,
        f"The session is {session.state} and no world engine runs it; follow its events_url "
        "and connect once it is starting.",
        kind="not-running",
    )


async def engine_reply(layer, channel: str) -> dict:
    """The worker's reply to the offer (the group's other messages are skipped)."""
    while True:
        message = await layer.receive(channel)
        if message.get("type") in ("engine.answer", "engine.error"):
            return message


@router.post(
    "/{session_id}/whep/",
    url_name="session_whep",
    summary="Connect media (WHEP)",
    openapi_extra={
        "requestBody": {"required": True, "content": {SDP: {"schema": {"type": "string"}}}},
        "responses": {201: {"description": "The SDP answer", "content": {SDP: {}}}},
    },
)
async def whep_connect(request: HttpRequest, session_id: UUID) -> HttpResponse:
    """Send an SDP offer (all ICE candidates included); the answer carries the session's video
    and audio, and the connection accepts a data channel named `input` for input messages."""
    session = await sync_to_async(owned_session)(request, session_id)
    await sync_to_async(enforce_rate_limit)("api_whep", request)
    offer = sdp_offer(request)
    layer = get_channel_layer()
    reply_channel = await layer.new_channel()
    group = session_group(str(session.pk))
    await layer.group_add(group, reply_channel)
    try:
        worker_channel = await _wait_for_engine(layer, reply_channel, session)
        await layer.send(
            worker_channel,
            messages.engine_offer(
                session_id=str(session.pk),
                sdp=offer,
                reply_channel=reply_channel,
                codec=settings.WEBRTC_VIDEO_CODEC,
            ),
        )
        reply = await asyncio.wait_for(engine_reply(layer, reply_channel), ANSWER_TIMEOUT_S)
    except TimeoutError as error:
        raise Problem(503, "The world engine did not answer the offer in time.") from error
    finally:
        await layer.group_discard(group, reply_channel)
    if reply["type"] != "engine.answer":
        raise Problem(
            422, str(reply.get("message", "The offer was refused.")), kind="invalid-request"
        )
    response = HttpResponse(reply["sdp"], status=201, content_type=SDP)
    response["Location"] = reverse(
        "api:session_whep_resource", args=[str(session.pk), resource_id(reply_channel)]
    )
    return response


@router.delete(
    "/{session_id}/whep/{resource_id}/",
    url_name="session_whep_resource",
    summary="Hang up media (WHEP)",
    response={200: None},
)
async def whep_hang_up(request: HttpRequest, session_id: UUID, resource_id: str) -> HttpResponse:
    """Close this media connection. The session itself runs on (end it with DELETE on the
    session); connect again with a new offer."""
    session = await sync_to_async(owned_session)(request, session_id)
    reply_channel = reply_channel_of(resource_id)
    if session.worker_channel:
        await get_channel_layer().send(
            session.worker_channel,
            messages.engine_hangup(session_id=str(session.pk), reply_channel=reply_channel),
        )
    return HttpResponse(status=200)
