"""Live rooms through the API: open a session to an audience, and pull its picture over WHEP.

`POST /api/v1/sessions/<id>/room` opens (or updates) the caller's session as a live room and
returns its share link and a viewer WHEP URL, so a streamer's own tool can take the picture
into a broadcast. The viewer WHEP URL takes an offer from any key whose owner may watch the
room (its host, an invited member, any member for a listed room); the connection only
receives, through the session's audience relay (the engine worker encodes it once for all).
"""

import asyncio
from uuid import UUID

from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer
from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.urls import reverse
from ninja import Router, Status

from api.limits import enforce_rate_limit
from api.problems import Problem
from api.schemas import RoomIn, RoomOut
from api.sessions import caller, owned_session
from api.whep import ANSWER_TIMEOUT_S, SDP, engine_reply, reply_channel_of, resource_id, sdp_offer
from sessions import channel_messages as messages
from sessions import room_selectors, room_services
from sessions.models import LiveRoom
from sessions.room_selectors import ACCESS_REFUSALS

router = Router(tags=["live rooms"])


def room_out(request: HttpRequest, room: LiveRoom) -> RoomOut:
    return RoomOut(
        room=room.code,
        url=request.build_absolute_uri(room.get_absolute_url()),
        whep_url=request.build_absolute_uri(reverse("api:room_whep", args=[room.code])),
        visibility=room.visibility,
        steering=room.steering,
        viewer_count=len(room_selectors.room_viewer_names(room=room)),
        invited=sorted(room.invited.values_list("username", flat=True)),
    )


@router.post(
    "/sessions/{session_id}/room",
    response={201: RoomOut},
    url_name="session_room",
    summary="Open a live room",
    openapi_extra={"responses": {409: {"description": "The session is over"}}},
)
def session_room(request: HttpRequest, session_id: UUID, body: RoomIn | None = None):
    """Open your session as a live room (calling again changes who may watch): other members
    watch it at `url` and suggest prompts; `whep_url` pulls its picture and sound. A room
    costs no engine capacity and none of your quota beyond the session itself."""
    session = owned_session(request, session_id)
    enforce_rate_limit("room_open", request)
    body = body or RoomIn(visibility=None)
    try:
        room = room_services.room_open(
            session=session, visibility=body.visibility, invite=body.invite
        )
    except room_services.RoomRefused as refusal:
        if not session.is_active:
            raise Problem(409, str(refusal), kind="not-running") from refusal
        raise Problem(422, str(refusal), kind="invalid-request") from refusal
    return Status(201, room_out(request, room))


def _watchable_room(request: HttpRequest, code: str) -> LiveRoom:
    room = room_selectors.room_get(code=code)
    if room is None:
        raise Problem(404, "There is no live room with this code.")
    access = room_selectors.room_access(room=room, user=caller(request))
    if access in ACCESS_REFUSALS:
        raise Problem(403, ACCESS_REFUSALS[access], kind="room-access")
    return room


@router.post(
    "/rooms/{code}/whep/",
    url_name="room_whep",
    summary="Watch a live room (WHEP)",
    openapi_extra={
        "requestBody": {"required": True, "content": {SDP: {"schema": {"type": "string"}}}},
        "responses": {201: {"description": "The SDP answer", "content": {SDP: {}}}},
    },
)
async def room_whep(request: HttpRequest, code: str) -> HttpResponse:
    """Send an SDP offer (receive-only video and audio, all ICE candidates included); the
    answer carries the room's stream. DELETE the `Location` to hang up."""
    room = await sync_to_async(_watchable_room)(request, code)
    await sync_to_async(enforce_rate_limit)("api_whep", request)
    offer = sdp_offer(request)
    session = room.session
    if not session.is_active or not session.worker_channel:
        raise Problem(
            409,
            f"The room's session is {session.state} and no world engine streams it yet.",
            kind="not-running",
        )
    layer = get_channel_layer()
    reply_channel = await layer.new_channel()
    viewer = caller(request)
    await layer.send(
        session.worker_channel,
        messages.engine_watch(
            session_id=str(session.pk),
            sdp=offer,
            reply_channel=reply_channel,
            viewer=str(viewer.pk),
            codec=settings.WEBRTC_VIDEO_CODEC,
        ),
    )
    try:
        reply = await asyncio.wait_for(engine_reply(layer, reply_channel), ANSWER_TIMEOUT_S)
    except TimeoutError as error:
        raise Problem(503, "The world engine did not answer the offer in time.") from error
    if reply["type"] != "engine.answer":
        raise Problem(
            422, str(reply.get("message", "The offer was refused.")), kind="invalid-request"
        )
    await sync_to_async(room_services.room_viewer_joined)(
        room=room, user=viewer, channel=reply_channel
    )
    response = HttpResponse(reply["sdp"], status=201, content_type=SDP)
    response["Location"] = reverse(
        "api:room_whep_resource", args=[room.code, resource_id(reply_channel)]
    )
    return response


@router.delete(
    "/rooms/{code}/whep/{resource}/",
    url_name="room_whep_resource",
    summary="Stop watching a live room (WHEP)",
    response={200: None},
)
async def room_whep_hang_up(request: HttpRequest, code: str, resource: str) -> HttpResponse:
    room = await sync_to_async(_watchable_room)(request, code)
    reply_channel = reply_channel_of(resource)
    await sync_to_async(room_services.room_viewer_left)(room=room, channel=reply_channel)
    if room.session.worker_channel:
        await get_channel_layer().send(
            room.session.worker_channel,
            messages.engine_unwatch(session_id=str(room.session_id), reply_channel=reply_channel),
        )
    return HttpResponse(status=200)
