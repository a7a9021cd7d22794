"""Builds an EngineWorker wired to this site's settings, database and channel layer."""

import asyncio
import logging
import os
import socket

from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from django.conf import settings

from sessions import room_services, services
from sessions.models import PlaySession
from sessions.worker.engine_worker import EngineWorker, WorkerConfig
from sessions.worker.loopback import enable_loopback_candidates
from worldsite.engine_gateway import runtime as engine_runtime

logger = logging.getLogger(__name__)


class DatabaseSessionStore:
    """What the worker reports, written through the session services."""

    @database_sync_to_async
    def claim(self, session_id: str, worker_name: str, worker_channel: str) -> bool:
        return services.session_claim_worker(
            session_id=session_id, worker_name=worker_name, worker_channel=worker_channel
        )

    @database_sync_to_async
    def mark_live(self, session_id: str) -> None:
        session = PlaySession.objects.filter(pk=session_id).first()
        if session is None:
            return
        try:
            services.session_mark_live(session=session)
        except services.IllegalTransition:
            logger.info("session %s could not go live (already %s)", session_id, session.state)

    @database_sync_to_async
    def finish(self, session_id: str, reason: str, failed: bool) -> None:
        session = PlaySession.objects.filter(pk=session_id).first()
        if session is not None:
            services.session_finish(session=session, reason=reason, failed=failed, by_worker=True)

    @database_sync_to_async
    def heartbeat(self, session_ids: list[str]) -> None:
        services.sessions_heartbeat(session_ids=session_ids)

    @database_sync_to_async
    def housekeeping(self) -> None:
        services.sessions_housekeeping()

    @database_sync_to_async
    def viewer_gone(self, reply_channel: str) -> None:
        room_services.room_viewer_gone(channel=reply_channel)


def default_worker_name() -> str:
    return f"{socket.gethostname()}-{os.getpid()}"


def build_worker(*, name: str | None = None, capacity: int | None = None) -> EngineWorker:
    if settings.WEBRTC_LOOPBACK or settings.WEBRTC_LOOPBACK_ONLY:
        enable_loopback_candidates(only=settings.WEBRTC_LOOPBACK_ONLY)
    config = WorkerConfig(
        name=name or default_worker_name(),
        capacity=capacity or settings.ENGINE_WORKER_CAPACITY,
        recordings_root=settings.RECORDINGS_ROOT,
        ice_servers=settings.WEBRTC_ICE_SERVERS,
        idle_timeout_s=settings.ENGINE_IDLE_TIMEOUT,
        reconnect_grace_s=settings.ENGINE_RECONNECT_GRACE,
        connect_timeout_s=float(settings.ENGINE_ABANDONED_AFTER),
        video_codec=settings.WEBRTC_VIDEO_CODEC,
        stamp_inputs=settings.ENGINE_BENCH_STAMP,
    )
    return EngineWorker(
        get_channel_layer(),
        config,
        DatabaseSessionStore(),
        engine_runtime.open_engine_session,
        engine_runtime.engine_info,
    )


async def preload_engine() -> None:
    """Load weights and the text encoder before taking sessions (a cold load takes seconds)."""
    await asyncio.get_running_loop().run_in_executor(None, engine_runtime.load_world)
