"""The engine worker: takes sessions from the channel layer and streams them over WebRTC.

Any number of workers share one normal channel, `engine.start`; a worker only listens on it
while it has free capacity, so Channels' own delivery spreads sessions across workers with
room (no scheduler of our own). Everything else about a session (offers, stops, images, the
API's inputs) goes to the worker's own process channel, and the worker reports to the session's
group (`play.<id>`): an answer to an offer, `live`, and a heartbeat every second for the HUD
(messages: sessions/channel_messages.py). A session's end is recorded through the session
service, which tells the page. The worker also writes its sessions' heartbeats to the database
from its own clock and runs the lifecycle's periodic housekeeping job
(sessions.services.sessions_housekeeping): a worker that dies stops writing, and whichever
worker or Celery beat runs the job next fails its sessions.
"""

import asyncio
import gc
import logging
import time
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from sessions import channel_messages as messages
from sessions.channel_messages import START_CHANNEL, session_group
from sessions.worker.audience import Audience
from sessions.worker.media import LatestFrames
from sessions.worker.peer import PlayPeer
from sessions.worker.runner import SessionRunner
from worldsite.engine_gateway.pictures import decode_png
from worldsite.engine_gateway.recording import RecordingWriter

logger = logging.getLogger(__name__)

HEARTBEAT_SECONDS = 1.0


@dataclass
class WorkerConfig:
    name: str
    capacity: int
    recordings_root: Path
    ice_servers: list[dict[str, Any]]
    idle_timeout_s: int
    reconnect_grace_s: float = 15.0
    stamp_inputs: bool = False
    video_codec: str = "VP8"
    # A claimed session whose page has not connected its media by then is ended.
    connect_timeout_s: float = 60.0


class SessionStore(Protocol):
    """Where the worker records what happened (the database, through the session services)."""

    async def claim(self, session_id: str, worker_name: str, worker_channel: str) -> bool: ...

    async def mark_live(self, session_id: str) -> None: ...

    async def finish(self, session_id: str, reason: str, failed: bool) -> None: ...

    async def heartbeat(self, session_ids: list[str]) -> None: ...

    async def housekeeping(self) -> None: ...

    async def viewer_gone(self, reply_channel: str) -> None: ...  # a spectator's link died


@dataclass
class LiveSession:
    session_id: str
    runner: SessionRunner
    peer: PlayPeer | None
    frames: LatestFrames
    allowed_seconds: int
    started: float
    live_since: float | None = None
    stop_reason: str = ""
    forced_failure: bool = False
    detached_at: float | None = None
    page_channel: str = ""  # the consumer whose page made the current connection
    audience: Audience | None = None  # a live room's spectators (sessions/worker/audience.py)


class EngineWorker:
    def __init__(
        self,
        layer,
        config: WorkerConfig,
        store: SessionStore,
        open_engine_session: Callable[[dict[str, Any]], Any],
        engine_info: Callable[[], dict[str, Any]],
    ) -> None:
        self.layer = layer
        self.config = config
        self.store = store
        self.open_engine_session = open_engine_session  # spec -> runtime session (blocking)
        self.engine_info = engine_info  # fps, samples_per_frame, resolution
        self.sessions: dict[str, LiveSession] = {}
        self.channel = ""
        self._tasks: list[asyncio.Task] = []
        self._finishing: set[asyncio.Future] = set()  # background work: wind-downs, live marks
        self._stopping = False

    # -- lifecycle ----------------------------------------------------------------------------
    async def run(self) -> None:
        self.channel = await self.layer.new_channel()  # channels_redis needs the default prefix
        logger.info("engine worker %s up, capacity %d", self.config.name, self.config.capacity)
        self._tasks = [
            asyncio.ensure_future(self._accept_loop()),
            asyncio.ensure_future(self._control_loop()),
            asyncio.ensure_future(self._heartbeat_loop()),
        ]
        try:
            await asyncio.gather(*self._tasks)
        finally:
            await self.shutdown("The world engine worker shut down.")

    async def shutdown(self, reason: str, failed: bool = True) -> None:
        """Stop taking sessions and end every running one: each player is told why, each
        recording closed and each row finished before this returns."""
        if self._stopping:
            return
        self._stopping = True
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(
            *(
                self._stop_session(session_id, reason, failed=failed)
                for session_id in list(self.sessions)
            )
        )
        if self._finishing:
            await asyncio.gather(*self._finishing, return_exceptions=True)

    @property
    def free_slots(self) -> int:
        return self.config.capacity - len(self.sessions)

    # -- loops --------------------------------------------------------------------------------
    async def _accept_loop(self) -> None:
        while True:
            if self.free_slots <= 0:
                await asyncio.sleep(0.2)
                continue
            message = await self.layer.receive(START_CHANNEL)
            try:
                await self._start_session(message)
            except Exception:
                logger.exception("could not start session %s", message.get("session_id"))
                await self._finished(
                    str(message.get("session_id", "")),
                    "The world engine could not start this world.",
                    failed=True,
                )

    async def _control_loop(self) -> None:
        while True:
            message = await self.layer.receive(self.channel)
            session_id = str(message.get("session_id", ""))
            kind = message.get("type")
            try:
                if kind == "engine.offer":
                    await self._answer(session_id, message)
                elif kind == "engine.stop":
                    await self._stop_session(session_id, message.get("reason", "Session ended."))
                elif kind == "engine.detach":
                    self._detach(session_id, message.get("reply_channel", ""))
                elif kind == "engine.hangup":
                    await self._hang_up(session_id, message.get("reply_channel", ""))
                elif kind == "engine.image":
                    self._push(session_id, {"kind": "image", "image": decode_png(message["png"])})
                elif kind == "engine.input":
                    self._push(session_id, message["event"], seq=int(message["seq"]))
                elif kind == "engine.watch":
                    await self._watch(session_id, message)
                elif kind == "engine.unwatch":
                    await self._unwatch(session_id, message.get("reply_channel", ""))
                elif kind == "engine.eject":
                    await self._eject(session_id, str(message.get("viewer", "")))
                else:
                    logger.warning("worker ignored message of type %r", kind)
            except Exception:
                logger.exception("control message %r for %s failed", kind, session_id)

    async def _heartbeat_loop(self) -> None:
        beats = 0
        while True:
            now = time.monotonic()
            if beats % 5 == 0:  # the database hears less often than the pages do
                await self._store_heartbeats()
            beats += 1
            for session_id, live in list(self.sessions.items()):
                stats = live.runner.stats
                if live.detached_at and now - live.detached_at > self.config.reconnect_grace_s:
                    await self._stop_session(session_id, "Player left.")
                    continue
                if live.live_since is None and now - live.started > self.config.connect_timeout_s:
                    await self._stop_session(
                        session_id, "The player's page never connected to the world.", failed=True
                    )
                    continue
                if live.live_since and now - live.live_since > live.allowed_seconds:
                    await self._stop_session(session_id, "Session time limit reached.")
                    continue
                if now - stats.last_input_at > self.config.idle_timeout_s:
                    await self._stop_session(
                        session_id, f"Ended after {self.config.idle_timeout_s} s without input."
                    )
                    continue
                latencies = sorted(stats.input_latency_ms)
                await self._report(
                    session_id,
                    messages.engine_heartbeat(
                        worker=self.config.name,
                        frames=stats.frames,
                        late_frames=stats.late_frames,
                        frame_ms_p50=_median(stats.frame_ms),
                        frame_late_ms_max=stats.take_worst_late_ms(),
                        input_latency_ms_p50=_median(latencies),
                        seconds_left=_seconds_left(live, now),
                        last_seq=live.runner.last_applied_seq,
                        bad_messages=live.peer.bad_messages if live.peer else 0,
                        viewers=len(live.audience.viewers) if live.audience else 0,
                    ),
                )
            await asyncio.sleep(HEARTBEAT_SECONDS)

    async def _store_heartbeats(self) -> None:
        try:
            if self.sessions:
                await self.store.heartbeat(list(self.sessions))
            await self.store.housekeeping()
        except Exception:  # the database being briefly away must not stop the streams
            logger.exception("could not record heartbeats")

    # -- sessions -----------------------------------------------------------------------------
    async def _start_session(self, message: dict[str, Any]) -> None:
        session_id = str(message["session_id"])
        if not await self.store.claim(session_id, self.config.name, self.channel):
            logger.info("skipped start request for %s (ended or taken)", session_id)
            return
        spec = dict(message["spec"])
        info = self.engine_info()
        loop = asyncio.get_running_loop()
        engine_session = await loop.run_in_executor(None, self.open_engine_session, spec)
        height, width = info["resolution"]
        frames = LatestFrames(height, width)
        recorder = RecordingWriter(
            self.config.recordings_root / session_id,
            fps=info["fps"],
            width=width,
            height=height,
            spec=spec,
        )

        def on_stop(reason: str) -> None:  # on the runner's thread
            loop.call_soon_threadsafe(self._track_finish, session_id, reason)

        runner = SessionRunner(
            engine_session,
            frames,
            fps=info["fps"],
            samples_per_frame=info["samples_per_frame"],
            recorder=recorder,
            stamp_inputs=self.config.stamp_inputs,
            on_stop=on_stop,
        )
        self.sessions[session_id] = LiveSession(
            session_id=session_id,
            runner=runner,
            peer=None,
            frames=frames,
            allowed_seconds=int(message.get("allowed_seconds") or 600),
            started=time.monotonic(),
            audience=Audience(
                frames,
                fps=info["fps"],
                ice_servers=self.config.ice_servers,
                codec=self.config.video_codec,
                on_gone=self._viewer_gone,
            ),
        )
        accepted = messages.engine_accepted(worker=self.config.name, worker_channel=self.channel)
        await self._report(session_id, accepted)

    async def _answer(self, session_id: str, message: dict[str, Any]) -> None:
        live = self.sessions.get(session_id)
        reply_to = message.get("reply_channel")
        if live is None:
            if reply_to:
                await self.layer.send(
                    reply_to, messages.engine_error(message="This session is no longer running.")
                )
            return
        live.detached_at = None
        live.page_channel = reply_to or ""
        if live.peer is not None:  # a reconnect: the old connection is replaced
            await live.peer.close()
        info = self.engine_info()

        def connection_state(state: str) -> None:
            if state == "connected" and live.live_since is None:
                live.live_since = time.monotonic()
                self._in_background(self._went_live(session_id), f"marking {session_id} live")
            elif state == "failed":
                logger.info("peer connection failed for %s", session_id)

        live.peer = PlayPeer(
            live.runner,
            live.frames,
            fps=info["fps"],
            ice_servers=self.config.ice_servers,
            video_codec=message.get("codec") or self.config.video_codec,
            on_connection_state=connection_state,
        )
        try:
            answer = await live.peer.answer(message["sdp"])
        except Exception as exc:  # SDP that parsed as text but not as a session description
            logger.info("rejected an offer for %s: %s", session_id, exc)
            await live.peer.close()
            live.peer = None
            await self.layer.send(
                reply_to,
                messages.engine_error(
                    message="The browser's connection offer could not be used; reload the page."
                ),
            )
            return
        if not live.runner.started:
            live.runner.start()
        await self.layer.send(reply_to, messages.engine_answer(sdp=answer))

    async def _went_live(self, session_id: str) -> None:
        await self.store.mark_live(session_id)
        await self._report(session_id, messages.engine_live())

    def _detach(self, session_id: str, page_channel: str) -> None:
        """A page's socket closed: start the reconnect grace, unless that page is a stale tab
        whose connection a newer page has already replaced (closing it used to end the session
        in the newer tab)."""
        live = self.sessions.get(session_id)
        if live is None or (live.page_channel and page_channel != live.page_channel):
            return
        live.detached_at = time.monotonic()

    async def _hang_up(self, session_id: str, page_channel: str) -> None:
        """Close the media connection `page_channel` made, if it is still the current one."""
        live = self.sessions.get(session_id)
        if live is None or live.peer is None or page_channel != live.page_channel:
            return
        peer, live.peer = live.peer, None
        await peer.close()

    async def _watch(self, session_id: str, message: dict[str, Any]) -> None:
        """A spectator's offer: answered from the session's audience relay. Watching never
        starts the engine (the player's connection does) and never counts as the player."""
        live = self.sessions.get(session_id)
        reply_to = message.get("reply_channel") or ""
        if live is None or live.audience is None:
            await self.layer.send(
                reply_to, messages.engine_error(message="This session is no longer running.")
            )
            return
        try:
            answer = await live.audience.watch(
                reply_channel=reply_to,
                viewer=str(message.get("viewer", "")),
                offer_sdp=message["sdp"],
            )
        except Exception as exc:
            logger.info("rejected a spectator's offer for %s: %s", session_id, exc)
            await self.layer.send(
                reply_to,
                messages.engine_error(message="The connection offer could not be used."),
            )
            return
        await self.layer.send(reply_to, messages.engine_answer(sdp=answer))

    async def _unwatch(self, session_id: str, reply_channel: str) -> None:
        live = self.sessions.get(session_id)
        if live is not None and live.audience is not None:
            await live.audience.unwatch(reply_channel=reply_channel)

    async def _eject(self, session_id: str, viewer: str) -> None:
        live = self.sessions.get(session_id)
        if live is not None and live.audience is not None:
            await live.audience.eject(viewer=viewer)

    def _push(self, session_id: str, event: dict[str, Any], seq: int = 0) -> None:
        live = self.sessions.get(session_id)
        if live is not None:
            live.runner.push(event, seq=seq)

    async def _stop_session(self, session_id: str, reason: str, failed: bool = False) -> None:
        live = self.sessions.get(session_id)
        if live is None:
            return
        live.stop_reason = reason
        live.forced_failure = live.forced_failure or failed
        live.runner.stop(reason)  # on_stop -> _runner_stopped, once the thread has wound down
        if live.runner.started:
            await asyncio.get_running_loop().run_in_executor(None, live.runner.join, 5.0)

    def _viewer_gone(self, reply_channel: str) -> None:
        self._in_background(self.store.viewer_gone(reply_channel), "recording a viewer gone")

    def _track_finish(self, session_id: str, reason: str) -> None:
        self._in_background(self._runner_stopped(session_id, reason), f"finishing {session_id}")

    def _in_background(self, work: Coroutine[Any, Any, None], what: str) -> None:
        """Run `work` without waiting for it, keeping a reference (an unreferenced task can be
        collected mid-flight) and logging its failure (a dropped task loses its exception)."""
        task = asyncio.ensure_future(work)
        self._finishing.add(task)

        def done(finished: asyncio.Future) -> None:
            self._finishing.discard(finished)
            if not finished.cancelled() and finished.exception() is not None:
                logger.error("%s failed", what, exc_info=finished.exception())

        task.add_done_callback(done)

    async def _runner_stopped(self, session_id: str, reason: str) -> None:
        live = self.sessions.pop(session_id, None)
        if live is None:
            return
        failed = live.forced_failure or live.runner.failed
        if live.audience is not None:  # spectators hear the end on their room socket too
            await live.audience.close({"type": "ended", "reason": reason, "failed": failed})
        if live.peer is not None:
            if self._stopping:  # the server is going down with its sockets: say it on the media
                live.peer.notify({"type": "ended", "reason": reason, "failed": failed})
                await asyncio.sleep(0.1)
            await live.peer.close()
        del live
        # A session leaves reference cycles (aiortc's event handlers, codec and engine state)
        # that only a full collection frees; without one the server grew ~6 MB per session.
        gc.collect()
        await self._finished(session_id, reason, failed)

    async def _finished(self, session_id: str, reason: str, failed: bool) -> None:
        """Record the end through the session service, which tells the page. Only if that
        fails (the database away) does the worker tell the page itself."""
        try:
            await self.store.finish(session_id, reason, failed)
        except Exception:
            logger.exception("could not record the end of %s", session_id)
            await self._report(session_id, messages.engine_stopped(reason=reason, failed=failed))

    async def _report(self, session_id: str, message: Mapping[str, Any]) -> None:
        if session_id:
            await self.layer.group_send(session_group(session_id), message)


def _median(values) -> float | None:
    values = list(values)
    return round(float(np.median(values)), 1) if values else None


def _seconds_left(live: LiveSession, now: float) -> int:
    if live.live_since is None:
        return live.allowed_seconds
    return max(0, int(live.allowed_seconds - (now - live.live_since)))
