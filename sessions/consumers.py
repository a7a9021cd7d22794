"""PlayConsumer: the player's WebSocket at /ws/play/<session-id>/.

It translates and delegates: queue position and admission come from the quota services, the
engine worker is found through the channel layer, SDP is relayed between page and worker, and
status goes back to the page. It owns no business rules of its own.
"""

import asyncio
import json
import logging
import time
from typing import Any

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer
from django.conf import settings

from sessions import channel_messages as messages
from sessions import engine_requests, selectors, services
from sessions.channel_messages import session_group
from sessions.models import PlaySession
from sessions.protocol import ProtocolError, parse_ws_message
from sessions.throttle import socket_message_limit

logger = logging.getLogger(__name__)

State = PlaySession.State
CLOSE_UNAUTHENTICATED = 4401
CLOSE_NOT_FOUND = 4404
CLOSE_TOO_MANY_ERRORS = 4429
MAX_BAD_MESSAGES = 20
NO_ENGINE_REASON = "No world engine is free to run this world right now. Please try again shortly."


class PlayConsumer(AsyncWebsocketConsumer):
    async def connect(self) -> None:
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close(code=CLOSE_UNAUTHENTICATED)
            return
        session_id = str(self.scope["url_route"]["kwargs"]["session_id"])
        session = await database_sync_to_async(selectors.session_get_for_owner)(
            session_id=session_id, owner=user
        )
        if session is None:  # someone else's session looks exactly like a missing one
            await self.close(code=CLOSE_NOT_FOUND)
            return
        self.session_id = session_id
        self.group = session_group(session_id)
        self.bad_messages = 0
        self.limiter = socket_message_limit()
        self.engine_requested_at: float | None = None
        self.worker_channel = session.worker_channel
        self.closed = False
        self.final_sent = False
        await database_sync_to_async(services.session_page_seen)(session=session)
        await self.channel_layer.group_add(self.group, self.channel_name)
        await self.accept()
        if settings.ENGINE_EMBEDDED:
            from sessions.worker.embedded import ensure_embedded_worker

            ensure_embedded_worker()
        self.supervisor = asyncio.ensure_future(self._supervise())
        if self.worker_channel and session.is_active:  # a page reconnecting to a running world
            await self._send(messages.page_ready())

    async def disconnect(self, code: int) -> None:
        if not hasattr(self, "group"):
            return
        self.closed = True
        self.supervisor.cancel()
        await self.channel_layer.group_discard(self.group, self.channel_name)
        session = await self._load()
        if session is None or not session.is_active:
            return
        if self.worker_channel:
            # The worker keeps the world running for a short grace period so a page that lost
            # its connection for a moment can reconnect; then it ends the session itself.
            await self.channel_layer.send(
                self.worker_channel,
                messages.engine_detach(session_id=self.session_id, reply_channel=self.channel_name),
            )
        else:
            await self._finish("Player left before the world started.")

    # -- page -> server -------------------------------------------------------------------------
    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        if not self.limiter.allow():
            await self._bad_message("rate_limited", "Too many messages; slow down.")
            return
        try:
            message = parse_ws_message(text_data if text_data is not None else bytes_data)
        except ProtocolError as error:
            await self._bad_message(error.code, error.message)
            return
        kind = message["type"]
        if kind == "ping":
            await self._send(messages.page_pong(t=message["t"]))
        elif kind == "end":
            await self._finish("Player ended the session.")
        elif kind == "offer":
            if not self.worker_channel:
                await self._send(
                    messages.page_error(
                        code="not_ready", message="The world is not ready for a connection yet."
                    )
                )
                return
            await self.channel_layer.send(
                self.worker_channel,
                messages.engine_offer(
                    session_id=self.session_id,
                    sdp=message["sdp"],
                    reply_channel=self.channel_name,
                    codec=settings.WEBRTC_VIDEO_CODEC,
                ),
            )

    async def _bad_message(self, code: str, text: str) -> None:
        self.bad_messages += 1
        logger.info("session %s: bad message (%s)", self.session_id, code)
        await self._send(messages.page_error(code=code, message=text))
        if self.bad_messages > MAX_BAD_MESSAGES:
            await self.close(code=CLOSE_TOO_MANY_ERRORS)

    # -- supervision ----------------------------------------------------------------------------
    async def _supervise(self) -> None:
        """Once a second: report the queue position, find an engine, notice the end.

        Whether the engine is alive is not decided here: the worker writes heartbeats from its
        own clock and the housekeeping job fails a silent worker's sessions (a late message on
        a busy web loop must never fail a healthy session)."""
        last_status: dict[str, Any] = {}
        while not self.closed:
            session = await self._load()
            if session is None:
                return
            if session.state == State.QUEUED:
                status = await database_sync_to_async(self._queue_status)(session)
                if status != last_status:
                    await self._send(status)
                    last_status = status
            elif session.state == State.STARTING and not self.worker_channel:
                await self._request_engine(session)
            elif not session.is_active:  # in case the session.closed message was lost
                await self._close_with_final(session.state, session.end_reason)
                return
            await asyncio.sleep(1.0)

    def _queue_status(self, session: PlaySession) -> messages.PageStatus:
        position = selectors.queue_position(session=session)
        return messages.page_status(
            State.QUEUED,
            position=position,
            eta_s=selectors.queue_eta_seconds(position=position or 1),
        )

    async def _request_engine(self, session: PlaySession) -> None:
        now = time.monotonic()
        if self.engine_requested_at is None:
            self.engine_requested_at = now
            await self._send(messages.page_status(State.STARTING))
            await engine_requests.engine_start_request(session=session)
        elif _embedded_engine_loading():
            self.engine_requested_at = now  # loading the model is not a missing engine
        elif now - self.engine_requested_at > settings.ENGINE_START_TIMEOUT:
            await self._finish(NO_ENGINE_REASON, failed=True)

    # -- worker -> page (group messages) ----------------------------------------------------------
    async def engine_accepted(self, event: messages.EngineAccepted) -> None:
        self.worker_channel = event["worker_channel"]
        await self._send(messages.page_ready())

    async def engine_answer(self, event: messages.EngineAnswer) -> None:
        await self._send(messages.page_answer(sdp=event["sdp"]))

    async def engine_error(self, event: messages.EngineError) -> None:
        await self._send(messages.page_error(code="engine", message=event["message"]))

    async def engine_live(self, event: messages.EngineLive) -> None:
        await self._send(messages.page_status(State.LIVE))

    async def engine_heartbeat(self, event: messages.EngineHeartbeat) -> None:
        await self._send(messages.page_stats(event))

    async def engine_stopped(self, event: messages.EngineStopped) -> None:
        """Only when a worker could not record a session's end itself (database away)."""
        reason = event.get("reason") or "Session ended."
        await self._finish(reason, failed=bool(event.get("failed")))

    async def session_closed(self, event: messages.SessionClosed) -> None:
        """From services.session_finish: the one notice that the session is over."""
        state = State.FAILED if event.get("failed") else State.ENDED
        await self._close_with_final(state, event.get("reason", ""))

    # -- helpers --------------------------------------------------------------------------------
    async def _finish(self, reason: str, failed: bool = False) -> None:
        """End the session through the service; its session.closed message tells the page."""
        session = await self._load()
        if session is None:
            await self.close()
            return
        ended = await database_sync_to_async(services.session_finish)(
            session=session, reason=reason, failed=failed
        )
        if not ended:  # it had already finished: say how, from the record
            session = await self._load()
            await self._close_with_final(session.state, session.end_reason)

    async def _close_with_final(self, state: str, reason: str) -> None:
        """Send the page its one closing status, then close the socket."""
        if self.final_sent:
            return
        self.final_sent = True
        await self._send(messages.page_status(state, reason=reason))
        await self.close()

    async def _load(self) -> PlaySession | None:
        return await database_sync_to_async(
            lambda: PlaySession.objects.select_related("world").filter(pk=self.session_id).first()
        )()

    async def _send(self, message: dict[str, Any]) -> None:
        if not self.closed or message.get("type") == "status":
            try:
                await self.send(text_data=json.dumps(message))
            except Exception:  # the socket is already gone
                logger.debug("could not send to a closed socket", exc_info=True)


def _embedded_engine_loading() -> bool:
    if not settings.ENGINE_EMBEDDED:
        return False
    from sessions.worker.embedded import embedded_worker_loading

    return embedded_worker_loading()
