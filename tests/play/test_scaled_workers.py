"""The scaled configuration: daphne and two engine-worker processes on Redis. Sessions spread
across the workers; killing one fails its player's session clearly, the other plays on."""

import asyncio

import pytest
from django.conf import settings as django_settings
from django.test import Client

from sessions import services
from sessions.models import PlaySession
from tests.factories import UserFactory, WorldFactory
from tools.player import PlayClient

pytestmark = [pytest.mark.play, pytest.mark.django_db(transaction=True)]


def _login_cookie(user) -> str:
    client = Client()
    client.force_login(user)
    return client.cookies["sessionid"].value


@pytest.fixture
def scaled(servers, settings):
    if not django_settings.REDIS_URL:
        pytest.skip("set REDIS_URL to test engine workers as separate processes")
    settings.ENGINE_CAPACITY = 2
    host = servers.daphne()
    workers = {name: servers.engine_worker(name) for name in ("alpha", "beta")}
    for name in workers:
        servers.wait_for_log(f"worker-{name}", "ready")
    return host, workers


async def _start_player(host: str, world) -> tuple[PlayClient, str]:
    user = await asyncio.to_thread(UserFactory)
    reservation = await asyncio.to_thread(services.session_reserve, user=user, world=world)
    assert reservation.decision == services.Decision.ADMIT
    player = PlayClient(
        host, str(reservation.session.pk), await asyncio.to_thread(_login_cookie, user)
    )
    await player.connect()
    return player, str(reservation.session.pk)


async def test_sessions_spread_and_a_killed_worker_fails_only_its_own(scaled):
    host, workers = scaled
    world = await asyncio.to_thread(WorldFactory)
    first, first_id = await _start_player(host, world)
    second, second_id = await _start_player(host, world)
    try:
        await asyncio.wait_for(asyncio.gather(first.live.wait(), second.live.wait()), 120)
        sessions = {
            s.pk: s
            for s in await asyncio.to_thread(
                lambda: list(PlaySession.objects.filter(pk__in=[first_id, second_id]))
            )
        }
        names = {str(pk): s.worker_name for pk, s in sessions.items()}
        assert set(names.values()) == {"alpha", "beta"}, names

        doomed_name = names[first_id]
        workers[doomed_name].kill()  # SIGKILL: no goodbye, the heartbeats just stop
        await asyncio.wait_for(first.final.wait(), 30)
        failed = first.status("failed")
        assert failed is not None and "stopped responding" in failed["reason"]

        before = len(second.video)
        await second.hold_for(["W"], 2.0)
        assert len(second.video) - before >= 20, "the other worker's session must keep streaming"
        assert not second.final.is_set()
    finally:
        await first.close()
        await second.close()

    first_row = await asyncio.to_thread(PlaySession.objects.get, pk=first_id)
    second_row = await asyncio.to_thread(PlaySession.objects.get, pk=second_id)
    assert first_row.state == "failed"
    assert second_row.state == "live"
