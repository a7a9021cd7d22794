"""A real daphne with a live session: huge anonymous POSTs get a 413 before their body is held
or parsed, and a flood of malformed data-channel messages is refused one by one; through both,
the session's video keeps its pace and the session stays live. SIGTERM ends it cleanly."""

import asyncio
import json
import signal
import sys
import time

import pytest
from django.test import Client

from sessions import services
from sessions.models import PlaySession
from tests.factories import UserFactory, WorldFactory
from tests.play.recordings import recorded_session
from tools.fuzz import malformed_messages
from tools.player import PlayClient

pytestmark = [pytest.mark.play, pytest.mark.django_db(transaction=True)]

BIG = 60 * 1024 * 1024


def _login_cookie(user) -> str:
    client = Client()
    client.force_login(user)
    return client.cookies["sessionid"].value


POSTER = """
import http.client, json, sys, threading
host, port = sys.argv[1].split(":")
size = int(sys.argv[2])
boundary = b"xYzZY"
multipart = (b"--" + boundary + b'\\r\\nContent-Disposition: form-data; name="f"; filename="a"'
             b"\\r\\n\\r\\n" + b"a=1&" * (size // 4) + b"\\r\\n--" + boundary + b"--\\r\\n")
urlencoded = b"a=1&" * (size // 4)
jobs = [("multipart/form-data; boundary=xYzZY", multipart, False),
        ("application/x-www-form-urlencoded", urlencoded, False),
        ("application/x-www-form-urlencoded", urlencoded, True)]
results = [None] * len(jobs)
def post(i, content_type, body, chunked):
    connection = http.client.HTTPConnection(host, int(port), timeout=60)
    try:
        if chunked:
            connection.request("POST", "/beta/apply/", body=iter([body]),
                               headers={"Content-Type": content_type}, encode_chunked=True)
        else:
            connection.request("POST", "/beta/apply/", body=body,
                               headers={"Content-Type": content_type})
        response = connection.getresponse()
        results[i] = [response.status, response.read().decode()]
    except OSError as exc:
        results[i] = [0, repr(exc)]
threads = [threading.Thread(target=post, args=(i, *job)) for i, job in enumerate(jobs)]
sys.stdin.readline()  # bodies built: go
for t in threads: t.start()
for t in threads: t.join()
print(json.dumps(results))
"""


def kept_pace(baseline_fps: float) -> float:
    """The least frame rate that still counts as keeping the pace measured without the attack.

    A CI run once measured 15.8 fps before a flood and 10.3 after it on a box busy with other
    work; the failures these tests guard against drop the stream to about 1 fps or end it."""
    return min(18.0, baseline_fps / 2)


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

        # Anonymous POSTs of 60 MB (multipart, urlencoded, chunked), from another process so
        # building and sending them does not slow this player's decoding.
        poster = await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            POSTER,
            embedded_server,
            str(BIG),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
        )
        quiet = time.monotonic()
        await player.hold_for(["A"], 4.0)  # the pace without the attack, while it builds bodies
        baseline = len(player.frames_between(quiet, quiet + 4.0)) / 4.0
        started = time.monotonic()
        poster.stdin.write(b"go\n")
        await poster.stdin.drain()
        await player.hold_for(["W"], 5.0)
        results = json.loads((await asyncio.wait_for(poster.communicate(), 60))[0])
        frames = len(player.frames_between(started, started + 5.0))

        for status, body in results:
            assert status == 413, (status, body[:200])
            assert "too large" in body and "limit is 6.0 MB" in body
        fps = frames / 5.0
        print(f"decoded {baseline:.1f} fps before, {fps:.1f} fps during the POSTs")
        # >= 18 fps, or on a machine too busy to give 20 fps even without the attack (the shared
        # 2-core CI box, where other jobs come and go within seconds) at least half of what it
        # gave just before. Before the limit the loop froze: ~1 fps, then the session failed.
        assert fps >= kept_pace(baseline), f"video slowed to {fps:.1f} fps ({baseline})"

        # 3,000 malformed inputs on the data channel (deep nesting, 400-digit numbers, ...) at
        # ~1,000 a second: they used to raise inside aiortc's DTLS transport and kill the media.
        # (Unpaced, aiortc's own SCTP stack chokes on the burst before any parser sees it.)
        for index, raw in enumerate(malformed_messages(3000, seed=5)):
            player.input.send(raw if isinstance(raw, str) else raw.decode("latin-1"))
            if index % 50 == 0:
                await asyncio.sleep(0.05)
        await player.hold_for(["D"], 2.0)  # the flood drains through both SCTP stacks
        flooded = time.monotonic()
        await player.hold_for(["D"], 3.0)
        after = len(player.frames_between(flooded, flooded + 3.0)) / 3.0
        print(f"decoded {after:.1f} fps after 3,000 malformed inputs")
        assert after >= kept_pace(baseline), f"video fell to {after:.1f} fps after the flood"
        session = await asyncio.to_thread(PlaySession.objects.get, pk=session_id)
        assert session.state == "live"
        assert not player.final.is_set()
    finally:
        await player.close()


async def test_sigterm_ends_live_sessions_cleanly_and_exits_within_10_s(servers, settings):
    """daphne with the embedded engine used to keep generating frames for minutes after SIGTERM
    (a non-daemon wait on the engine thread); now the player is told, the recording closed, the
    row finished, and the process gone within 10 s."""
    host = servers.daphne(env={"REDIS_URL": "", "WORLDSITE_ENGINE_EMBEDDED": "1"})
    daphne = servers.processes[-1]
    world = await asyncio.to_thread(WorldFactory)
    user = await asyncio.to_thread(UserFactory)
    reservation = await asyncio.to_thread(services.session_reserve, user=user, world=world)
    session_id = str(reservation.session.pk)
    player = PlayClient(host, session_id, await asyncio.to_thread(_login_cookie, user))
    await player.connect()
    try:
        await asyncio.wait_for(player.live.wait(), timeout=120)
        await player.hold_until_frames(["W"], 30)  # the recording below wants 20 of them
        signalled = time.monotonic()
        daphne.send_signal(signal.SIGTERM)
        code = await asyncio.to_thread(daphne.wait, 15)
        took = time.monotonic() - signalled
        print(f"daphne exited {took:.1f} s after SIGTERM with code {code}")
        assert took <= 10.0
        await asyncio.wait_for(player.final.wait(), 5)
    finally:
        await player.close()

    told = [m for m in player.messages if m["type"] == "status" and m.get("reason")]
    told += [m for m in player.engine_messages if m.get("type") == "ended"]
    assert any("server is restarting" in m["reason"] for m in told), player.messages[-5:]
    session = await asyncio.to_thread(PlaySession.objects.get, pk=session_id)
    assert session.state == "ended" and "server is restarting" in session.end_reason
    frames, _ = await asyncio.to_thread(recorded_session, settings.RECORDINGS_ROOT / session_id, 2)
    meta = json.loads((settings.RECORDINGS_ROOT / session_id / "meta.json").read_text())
    assert "server is restarting" in meta["end_reason"] and len(frames) == meta["frames"] >= 20
