"""EngineWorker against an in-memory channel layer: claiming, bad offers, stopping, failure."""

import asyncio
from pathlib import Path

import pytest
from channels.layers import InMemoryChannelLayer

from sessions.channel_messages import START_CHANNEL, session_group
from sessions.worker.engine_worker import EngineWorker, WorkerConfig
from tests.site.test_play_media import CountingEngine


class MemoryStore:
    def __init__(self, claimable: set[str]) -> None:
        self.claimable = claimable
        self.finished: list[tuple[str, str, bool]] = []

    async def claim(self, session_id, worker_name, worker_channel) -> bool:
        if session_id in self.claimable:
            self.claimable.discard(session_id)
            return True
        return False

    async def mark_live(self, session_id) -> None:
        pass

    async def finish(self, session_id, reason, failed) -> None:
        self.finished.append((session_id, reason, failed))

    async def heartbeat(self, session_ids) -> None:
        pass

    async def viewer_gone(self, reply_channel) -> None:
        pass

    async def housekeeping(self) -> None:
        pass


@pytest.fixture
def worker_setup(tmp_path: Path):
    layer = InMemoryChannelLayer()
    store = MemoryStore({"s1"})
    config = WorkerConfig(
        name="w", capacity=1, recordings_root=tmp_path, ice_servers=[], idle_timeout_s=60
    )
    info = {"fps": 20, "samples_per_frame": 800, "resolution": (16, 16)}
    worker = EngineWorker(layer, config, store, lambda spec: CountingEngine(), lambda: info)
    return layer, store, worker


async def _until(condition, timeout: float = 5.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, "condition never became true"
        await asyncio.sleep(0.05)


async def _next(layer, channel, kind: str, limit: int = 20) -> dict:
    for _ in range(limit):
        message = await asyncio.wait_for(layer.receive(channel), 5)
        if message["type"] == kind:
            return message
    raise AssertionError(f"no {kind}")


async def test_worker_claims_answers_errors_and_stops(worker_setup):
    layer, store, worker = worker_setup
    page = await layer.new_channel()
    await layer.group_add(session_group("s1"), page)
    await layer.group_add(session_group("ghost"), page)
    task = asyncio.ensure_future(worker.run())
    try:
        # A start request for a session nobody can claim (ended, or taken) is skipped.
        await layer.send(START_CHANNEL, {"type": "engine.start", "session_id": "ghost", "spec": {}})
        await layer.send(
            START_CHANNEL,
            {
                "type": "engine.start",
                "session_id": "s1",
                "allowed_seconds": 60,
                "spec": {"seed": 1, "theme": "misty_coast", "reference_png": b"\x89PNG..."},
            },
        )
        accepted = await _next(layer, page, "engine.accepted")
        assert accepted["worker"] == "w" and list(worker.sessions) == ["s1"]
        # the picture is recorded beside the session (the JSON metadata names the file)
        assert (worker.config.recordings_root / "s1" / "reference.png").read_bytes() == (
            b"\x89PNG..."
        )

        reply = await layer.new_channel()
        await layer.send(
            accepted["worker_channel"],
            {
                "type": "engine.offer",
                "session_id": "s1",
                "reply_channel": reply,
                "sdp": "v=0\r\nthis is not a session description\r\n",
            },
        )
        error = await asyncio.wait_for(layer.receive(reply), 5)
        assert error["type"] == "engine.error" and "offer" in error["message"]
        assert "s1" in worker.sessions  # a bad offer does not end the session

        await layer.send(
            accepted["worker_channel"],
            {"type": "engine.stop", "session_id": "s1", "reason": "Player left."},
        )
        # The end is recorded through the store (the session service, which tells the page).
        await _until(lambda: store.finished)
        assert store.finished == [("s1", "Player left.", False)]
        assert worker.sessions == {}
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_a_claimed_session_whose_page_never_connects_is_ended(worker_setup):
    """A page that closed after the worker took its session used to hold the worker's slot
    until the 180-s idle timeout."""
    layer, store, worker = worker_setup
    worker.config.connect_timeout_s = 0.5
    page = await layer.new_channel()
    await layer.group_add(session_group("s1"), page)
    task = asyncio.ensure_future(worker.run())
    try:
        await layer.send(
            START_CHANNEL,
            {
                "type": "engine.start",
                "session_id": "s1",
                "allowed_seconds": 60,
                "spec": {"seed": 1, "theme": "misty_coast"},
            },
        )
        await _next(layer, page, "engine.accepted")
        await _until(lambda: store.finished)
        [(session_id, reason, failed)] = store.finished
        assert failed and "never connected" in reason
        assert worker.sessions == {} and worker.free_slots == 1
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_closing_a_stale_tab_does_not_end_the_session_in_the_newer_one(worker_setup):
    """Two tabs on one session: the newer tab's offer replaced the older one's connection.
    Closing the older tab used to start the grace timer and end the session ('Player left.')."""
    layer, store, worker = worker_setup
    worker.config.reconnect_grace_s = 0.3
    page = await layer.new_channel()
    await layer.group_add(session_group("s1"), page)
    task = asyncio.ensure_future(worker.run())
    try:
        await layer.send(
            START_CHANNEL,
            {
                "type": "engine.start",
                "session_id": "s1",
                "allowed_seconds": 60,
                "spec": {"seed": 1, "theme": "misty_coast"},
            },
        )
        accepted = await _next(layer, page, "engine.accepted")
        old_tab, new_tab = await layer.new_channel(), await layer.new_channel()
        for tab in (old_tab, new_tab):
            await layer.send(
                accepted["worker_channel"],
                {
                    "type": "engine.offer",
                    "session_id": "s1",
                    "reply_channel": tab,
                    "sdp": "v=0\r\nnot really\r\n",
                },
            )
            await asyncio.wait_for(layer.receive(tab), 5)
        await layer.send(
            accepted["worker_channel"],
            {
                "type": "engine.detach",
                "session_id": "s1",
                "reply_channel": old_tab,
            },
        )
        await asyncio.sleep(1.5)  # several heartbeat rounds past the grace
        assert "s1" in worker.sessions and store.finished == []

        await layer.send(
            accepted["worker_channel"],
            {
                "type": "engine.detach",
                "session_id": "s1",
                "reply_channel": new_tab,
            },
        )
        await _until(lambda: store.finished)
        assert store.finished == [("s1", "Player left.", False)]
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_background_work_that_fails_is_logged_not_lost(worker_setup, caplog):
    _layer, _store, worker = worker_setup

    async def broken() -> None:
        raise RuntimeError("database went away")

    worker._in_background(broken(), "marking s1 live")
    await _until(lambda: not worker._finishing)
    assert "marking s1 live failed" in caplog.text and "database went away" in caplog.text


async def test_spectator_offers_for_gone_or_garbled_sessions_are_refused(worker_setup):
    """A live room's watch request: refused with a reason for a session the worker no longer
    runs, or for an offer that is not SDP; either way the session itself goes on."""
    layer, store, worker = worker_setup
    page = await layer.new_channel()
    await layer.group_add(session_group("s1"), page)
    task = asyncio.ensure_future(worker.run())
    try:
        await layer.send(
            START_CHANNEL,
            {"type": "engine.start", "session_id": "s1", "allowed_seconds": 60, "spec": {}},
        )
        accepted = await _next(layer, page, "engine.accepted")
        reply = await layer.new_channel()
        for session_id, sdp, expected in (
            ("ghost", "v=0\r\n", "no longer running"),
            ("s1", "v=0\r\nnot a session description\r\n", "could not be used"),
        ):
            await layer.send(
                accepted["worker_channel"],
                {
                    "type": "engine.watch",
                    "session_id": session_id,
                    "sdp": sdp,
                    "reply_channel": reply,
                    "viewer": "7",
                    "codec": "VP8",
                },
            )
            error = await asyncio.wait_for(layer.receive(reply), 5)
            assert error["type"] == "engine.error" and expected in error["message"]
        assert "s1" in worker.sessions and worker.sessions["s1"].audience.viewers == {}
        # Unwatching or ejecting nobody is harmless.
        for message in (
            {"type": "engine.unwatch", "session_id": "s1", "reply_channel": reply},
            {"type": "engine.eject", "session_id": "s1", "viewer": "7"},
        ):
            await layer.send(accepted["worker_channel"], message)
        await layer.send(
            accepted["worker_channel"],
            {"type": "engine.stop", "session_id": "s1", "reason": "Player left."},
        )
        await _until(lambda: store.finished)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
