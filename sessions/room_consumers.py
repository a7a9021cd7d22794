"""RoomConsumer: a live room's WebSocket at /ws/live/<room>/, for the host and every spectator.

It translates and delegates, like PlayConsumer: who may be in the room comes from
sessions.room_selectors, every change from sessions.room_services (which tells the room's
pages), and a spectator's SDP offer is relayed to the session's engine worker as
`engine.watch` (a receive-only connection from the room's relay). Spectators' messages are
parsed by sessions.protocol and held to the player's own rate limits (sessions.throttle).
"""

import asyncio
import json
import logging
from typing import Any

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer
from django.conf import settings

from sessions import channel_messages as messages
from sessions import room_selectors, room_services
from sessions.channel_messages import room_group
from sessions.models import AudiencePrompt, LiveRoom, PlaySession
from sessions.protocol import ProtocolError, parse_room_message
from sessions.room_selectors import ACCESS_REFUSALS, RoomAccess
from sessions.throttle import prompt_limit, socket_message_limit

logger = logging.getLogger(__name__)

CLOSE_UNAUTHENTICATED = 4401
CLOSE_FORBIDDEN = 4403
CLOSE_NOT_FOUND = 4404
CLOSE_TOO_MANY_ERRORS = 4429
MAX_BAD_MESSAGES = 20
HOST_ONLY = ("apply", "steering", "remove")
SESSION_CHECK_SECONDS = 2.0


class RoomConsumer(AsyncWebsocketConsumer):
    async def connect(self) -> None:
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close(code=CLOSE_UNAUTHENTICATED)
            return
        code = str(self.scope["url_route"]["kwargs"]["room"])
        room = await database_sync_to_async(room_selectors.room_get)(code=code)
        if room is None:
            await self.close(code=CLOSE_NOT_FOUND)
            return
        access = await database_sync_to_async(room_selectors.room_access)(room=room, user=user)
        if access in ACCESS_REFUSALS:
            await self.close(code=CLOSE_FORBIDDEN)
            return
        self.user = user
        self.room = room
        self.session_id = str(room.session_id)
        self.is_host = access == RoomAccess.HOST
        self.group = room_group(self.session_id)
        self.bad_messages = 0
        self.limiter = socket_message_limit()
        self.prompts = prompt_limit()
        self.watching_through: str = ""  # the worker channel our viewer connection is on
        self.final_sent = False
        await self.channel_layer.group_add(self.group, self.channel_name)
        await self.accept()
        if not room.session.is_active:
            await self._close_with_final(room.session.state, room.session.end_reason)
            return
        if not self.is_host:
            await database_sync_to_async(room_services.room_viewer_joined)(
                room=room, user=user, channel=self.channel_name
            )
        state = await database_sync_to_async(room_selectors.room_state)(room=room)
        await self._send(self._page_state(state))
        self.supervisor = asyncio.ensure_future(self._supervise())

    async def disconnect(self, code: int) -> None:
        if not hasattr(self, "group"):
            return
        if hasattr(self, "supervisor"):
            self.supervisor.cancel()
        await self.channel_layer.group_discard(self.group, self.channel_name)
        if self.watching_through:
            await self.channel_layer.send(
                self.watching_through,
                messages.engine_unwatch(
                    session_id=self.session_id, reply_channel=self.channel_name
                ),
            )
        if not self.is_host:
            await database_sync_to_async(room_services.room_viewer_left)(
                room=self.room, channel=self.channel_name
            )

    # -- page -> server -------------------------------------------------------------------------
    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        if not self.limiter.allow():
            await self._bad_message("rate_limited", "Too many messages; slow down.")
            return
        try:
            message = parse_room_message(text_data if text_data is not None else bytes_data)
        except ProtocolError as error:
            await self._bad_message(error.code, error.message)
            return
        kind = message["type"]
        if kind in HOST_ONLY and not self.is_host:
            await self._bad_message("host_only", "Only the host can do that.")
            return
        try:
            await self._handle(kind, message)
        except room_services.RoomRefused as refusal:
            await self._send(messages.page_error(code="refused", message=str(refusal)))

    async def _handle(self, kind: str, message: dict[str, Any]) -> None:
        room = await self._reload_room()
        if kind == "ping":
            await self._send(messages.page_pong(t=message["t"]))
        elif kind == "offer":
            await self._watch(room, message["sdp"])
        elif kind == "prompt":
            if self.is_host:
                raise room_services.RoomRefused(
                    "You are the host: type sentences in your play page's prompt box."
                )
            if not self.prompts.allow():
                await self._send(
                    messages.page_error(
                        code="rate_limited", message="Slow down: one sentence every few seconds."
                    )
                )
                return
            prompt = await database_sync_to_async(room_services.room_prompt_submit)(
                room=room, author=self.user, text=message["text"]
            )
            await self._send({"type": "prompt_queued", "id": prompt.pk, "text": prompt.text})
        elif kind == "support":
            await database_sync_to_async(room_services.room_prompt_support)(
                room=room, user=self.user, prompt_id=message["prompt"]
            )
        elif kind == "apply":
            applied = await database_sync_to_async(room_services.room_prompt_apply)(
                room=room, prompt_id=message["prompt"], by=AudiencePrompt.AppliedBy.HOST
            )
            if applied is None:
                raise room_services.RoomRefused("That prompt is no longer waiting.")
        elif kind == "steering":
            await database_sync_to_async(room_services.room_set_steering)(
                room=room, mode=message["mode"]
            )
        elif kind == "remove":
            await database_sync_to_async(room_services.room_remove_viewer)(
                room=room, username=message["user"]
            )

    async def _watch(self, room: LiveRoom, sdp: str) -> None:
        worker_channel = room.session.worker_channel
        if not room.session.is_active or not worker_channel:
            await self._send(
                messages.page_error(code="not_ready", message="The world is not running yet.")
            )
            return
        self.watching_through = worker_channel
        await self.channel_layer.send(
            worker_channel,
            messages.engine_watch(
                session_id=self.session_id,
                sdp=sdp,
                reply_channel=self.channel_name,
                viewer=str(self.user.pk),
                codec=settings.WEBRTC_VIDEO_CODEC,
            ),
        )

    async def _bad_message(self, code: str, text: str) -> None:
        self.bad_messages += 1
        await self._send(messages.page_error(code=code, message=text))
        if self.bad_messages > MAX_BAD_MESSAGES:
            await self.close(code=CLOSE_TOO_MANY_ERRORS)

    # -- the room's clock -----------------------------------------------------------------------
    async def _supervise(self) -> None:
        """Once a second: close an audience round when it is due (any page in the room may; one
        wins), and every few seconds check the session still runs, in case the closing message
        was lost."""
        checked = 0.0
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(1.0)
            room = await self._reload_room()
            if room.steering == LiveRoom.Steering.AUDIENCE:
                await database_sync_to_async(room_services.room_round_tick)(room=room)
            if loop.time() - checked > SESSION_CHECK_SECONDS:
                checked = loop.time()
                if not room.session.is_active:
                    await self._close_with_final(room.session.state, room.session.end_reason)
                    return

    # -- group and worker messages --------------------------------------------------------------
    async def room_state(self, event: messages.RoomState) -> None:
        await self._send(self._page_state(event["state"]))

    def _page_state(self, state: dict[str, Any]) -> dict[str, Any]:
        """The room as this page shows it: only the host sees who is watching (by name)."""
        names = state["viewers"] if self.is_host else []
        return {
            "type": "room",
            "role": "host" if self.is_host else "viewer",
            **state,
            "viewers": names,
        }

    async def room_applied(self, event: messages.RoomApplied) -> None:
        await self._send({"type": "applied", "prompt": event["prompt"]})

    async def room_removed(self, event: messages.RoomRemoved) -> None:
        if event["user_id"] != self.user.pk:
            return
        self.watching_through = ""  # the worker already dropped this viewer's connections
        await self._send({"type": "removed", "message": ACCESS_REFUSALS[RoomAccess.REMOVED]})
        self.final_sent = True
        await self.close(code=CLOSE_FORBIDDEN)

    async def session_closed(self, event: messages.SessionClosed) -> None:
        state = PlaySession.State.FAILED if event.get("failed") else PlaySession.State.ENDED
        await self._close_with_final(state, event.get("reason", ""))

    async def engine_answer(self, event: messages.EngineAnswer) -> None:
        await self._send(messages.page_answer(sdp=event["sdp"]))

    async def engine_error(self, event: messages.EngineError) -> None:
        await self._send(messages.page_error(code="engine", message=event["message"]))

    # -- helpers --------------------------------------------------------------------------------
    async def _close_with_final(self, state: str, reason: str) -> None:
        """Tell the page the session is over (the host ended it, or it stopped), then close."""
        if self.final_sent:
            return
        self.final_sent = True
        self.watching_through = ""  # the worker hangs up every viewer as the session stops
        await self._send({"type": "closed", "state": state, "reason": reason})
        await self.close()

    async def _reload_room(self) -> LiveRoom:
        room = await database_sync_to_async(room_selectors.room_get)(code=self.room.code)
        assert room is not None  # rooms are deleted only with their session's owner
        self.room = room
        return room

    async def _send(self, message: dict[str, Any]) -> None:
        try:
            await self.send(text_data=json.dumps(message))
        except Exception:  # the socket is already gone
            logger.debug("could not send to a closed socket", exc_info=True)
