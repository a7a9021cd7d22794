"""A huge anonymous POST against a real daphne with a live session: the request gets a 413
before its body is held or parsed, and the session's video keeps its pace."""

import asyncio
import http.client
import time

import pytest
from django.test import Client

from sessions import services
from sessions.models import PlaySession
from tests.factories import UserFactory, WorldFactory
from tests.play.client import PlayClient

pytestmark = [pytest.mark.play, pytest.mark.django_db(transaction=True)]

BIG = 60 * 1024 * 1024


def _login_cookie(user) -> str:
    client = Client()
    client.force_login(user)
    return client.cookies["sessionid"].value


def _post(host: str, content_type: str, body: bytes, chunked: bool = False) -> tuple[int, str]:
    name, port = host.split(":")
    connection = http.client.HTTPConnection(name, int(port), timeout=60)
    try:
        headers = {"Content-Type": content_type}
        if chunked:
            connection.request("POST", "/beta/apply/", body=iter([body]), headers=headers,
                               encode_chunked=True)
        else:
            connection.request("POST", "/beta/apply/", body=body, headers=headers)
        response = connection.getresponse()
        return response.status, response.read().decode()
    except (BrokenPipeError, ConnectionResetError) as exc:  # the server hung up mid-body
        return 0, str(exc)
    finally:
        connection.close()


def _multipart(size: int) -> bytes:
    boundary = b"xYzZY"
    return (
        b"--" + boundary + b'\r\nContent-Disposition: form-data; name="f"; filename="a.bin"\r\n'
        b"Content-Type: application/octet-stream\r\n\r\n" + b"a=1&" * (size // 4)
        + b"\r\n--" + boundary + b"--\r\n"
    )


@pytest.fixture
def embedded_server(servers):
    return servers.daphne(env={"REDIS_URL": "", "WORLDSITE_ENGINE_EMBEDDED": "1"})


async def test_huge_posts_get_413_and_live_video_keeps_its_pace(embedded_server):
    world = await asyncio.to_thread(WorldFactory)
    user = await asyncio.to_thread(UserFactory)
    reservation = await asyncio.to_thread(services.session_reserve, user=user, world=world)
    session_id = str(reservation.session.pk)
    player = PlayClient(embedded_server, session_id, await asyncio.to_thread(_login_cookie, user))
    await player.connect()
    try:
        await asyncio.wait_for(player.live.wait(), timeout=120)
        await player.hold_for([], 2.0)  # settle

        started = time.monotonic()
        sending = asyncio.gather(
            asyncio.to_thread(
                _post, embedded_server, "multipart/form-data; boundary=xYzZY", _multipart(BIG)
            ),
            asyncio.to_thread(
                _post, embedded_server, "application/x-www-form-urlencoded", b"a=1&" * (BIG // 4)
            ),
            asyncio.to_thread(
                _post, embedded_server, "application/x-www-form-urlencoded",
                b"a=1&" * (BIG // 4), True,
            ),
        )
        await player.hold_for(["W"], 5.0)
        results = await sending
        frames = len(player.frames_between(started, started + 5.0))

        for status, body in results:
            assert status == 413, (status, body[:200])
            assert "too large" in body and "limit is 6.0 MB" in body
        print(f"decoded {frames / 5:.1f} fps during the POSTs")
        assert frames >= 18 * 5, f"video slowed to {frames / 5:.1f} fps during the POSTs"
        session = await asyncio.to_thread(PlaySession.objects.get, pk=session_id)
        assert session.state == "live"
        assert not player.final.is_set()
    finally:
        await player.close()
