"""The developer API against a real daphne with the embedded engine worker: a key made by
`apikey_create`, a session started, followed (server-sent events), steered and ended through
the API while a player's page shows its picture, a race of parallel starts that never exceeds
the quota, and a revoked key refused."""

import asyncio
import http.client
import json
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
from django.test import Client

from accounts.models import ApiKey
from accounts.services import api_key_revoke
from sessions.models import PlaySession
from tests.factories import UserFactory, WorldFactory
from tests.play.conftest import REPO
from tools.player import PlayClient

pytestmark = [pytest.mark.play, pytest.mark.django_db(transaction=True)]


def _new_key(env: dict[str, str], username: str) -> str:
    """`manage.py apikey_create`, as a script would run it, on the servers' database."""
    done = subprocess.run(
        [sys.executable, "manage.py", "apikey_create", "--user", username, "--name", "stack"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


def _call(host: str, key: str, method: str, path: str, body=None) -> tuple[int, dict, dict]:
    connection = http.client.HTTPConnection(host, timeout=30)
    headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
    connection.request(method, path, json.dumps(body) if body is not None else None, headers)
    response = connection.getresponse()
    payload = json.loads(response.read() or b"null")
    connection.close()
    return response.status, dict(response.getheaders()), payload


class EventStream:
    """Reads a server-sent event stream on a thread; `events` fills as they arrive."""

    def __init__(self, host: str, key: str, path: str) -> None:
        self.connection = http.client.HTTPConnection(host, timeout=120)
        self.connection.request("GET", path, headers={"Authorization": f"Bearer {key}"})
        self.response = self.connection.getresponse()
        self.events: list[tuple[str, dict]] = []
        self.closed = threading.Event()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        name = ""
        for raw in self.response:
            line = raw.decode().rstrip("\n")
            if line.startswith("event: "):
                name = line[7:]
            elif line.startswith("data: "):
                self.events.append((name, json.loads(line[6:])))
        self.closed.set()  # the server ended the stream

    async def wait_for(self, name: str, timeout: float = 60, **expected) -> dict:
        deadline = asyncio.get_running_loop().time() + timeout
        while asyncio.get_running_loop().time() < deadline:
            for event, data in self.events:
                if event == name and all(data.get(k) == v for k, v in expected.items()):
                    return data
            await asyncio.sleep(0.1)
        raise AssertionError(f"no {name} {expected} event within {timeout} s: {self.events}")


def _login_cookie(user) -> str:
    client = Client()
    client.force_login(user)
    return client.cookies["sessionid"].value


async def test_an_api_client_starts_follows_steers_and_ends_a_session(embedded_server, server_env):
    host = embedded_server
    user = await asyncio.to_thread(UserFactory, username="developer")
    await asyncio.to_thread(WorldFactory, slug="coast", theme="misty_coast", seed=3)
    key = await asyncio.to_thread(_new_key, server_env, "developer")

    status, _, worlds = await asyncio.to_thread(_call, host, key, "GET", "/api/v1/worlds/")
    assert status == 200 and [w["slug"] for w in worlds["items"]] == ["coast"]
    stored_key = await asyncio.to_thread(ApiKey.objects.get, owner=user)
    assert stored_key.last_used_at is not None

    status, headers, session = await asyncio.to_thread(
        _call, host, key, "POST", "/api/v1/sessions/", {"world": "coast"}
    )
    assert status == 201 and session["state"] == "starting"
    path = f"/api/v1/sessions/{session['id']}/"
    assert headers["Location"] == path

    stream = await asyncio.to_thread(EventStream, host, key, f"{path}events/")
    assert stream.response.status == 200
    assert stream.response.getheader("Content-Type") == "text/event-stream"
    await stream.wait_for("state", state="starting")

    # The play page shows the picture (the API has no media of its own yet); the API steers.
    player = PlayClient(host, session["id"], await asyncio.to_thread(_login_cookie, user))
    await player.connect()
    try:
        await asyncio.wait_for(player.live.wait(), timeout=120)
        await stream.wait_for("state", state="live")
        status, _, accepted = await asyncio.to_thread(
            _call,
            host,
            key,
            "POST",
            f"{path}inputs/",
            [{"type": "input", "keys": ["W"]}, {"type": "prompt", "text": "make it rain"}],
        )
        assert status == 202 and accepted == {"ids": [1, 2]}
        applied = await stream.wait_for("inputs_applied", timeout=20)
        assert applied["up_to"] >= 1

        status, _, ended = await asyncio.to_thread(_call, host, key, "DELETE", path)
        assert status == 200 and ended["state"] == "ended"
        final = await stream.wait_for("ended", timeout=20)
        assert final["reason"] == "Ended through the API."
        assert await asyncio.to_thread(stream.closed.wait, 10), "the stream stayed open"
        await asyncio.wait_for(player.final.wait(), timeout=20)
    finally:
        await player.close()

    status, _, detail = await asyncio.to_thread(_call, host, key, "GET", path)
    assert status == 200 and detail["state"] == "ended" and detail["seconds_left"] == 0

    await asyncio.to_thread(api_key_revoke, key=stored_key)
    status, headers, problem = await asyncio.to_thread(_call, host, key, "GET", path)
    assert status == 401 and headers["Content-Type"] == "application/problem+json"
    assert problem["status"] == 401


async def test_parallel_starts_never_exceed_the_quota(embedded_server, server_env):
    host = embedded_server
    user = await asyncio.to_thread(UserFactory, username="racer")
    await asyncio.to_thread(WorldFactory, slug="coast", theme="misty_coast")
    key = await asyncio.to_thread(_new_key, server_env, "racer")

    def start(_):
        return _call(host, key, "POST", "/api/v1/sessions/", {"world": "coast"})

    with ThreadPoolExecutor(8) as pool:
        answers = await asyncio.to_thread(lambda: list(pool.map(start, range(8))))
    statuses = sorted(status for status, _, _ in answers)
    assert statuses == [201] + [403] * 7, statuses
    refusals = [body for status, _, body in answers if status == 403]
    assert all(body["type"] == "/api/#problem-quota" for body in refusals)
    active = await asyncio.to_thread(
        lambda: PlaySession.objects.filter(owner=user, state__in=PlaySession.ACTIVE_STATES).count()
    )
    assert active == 1


async def test_the_event_stream_ends_when_the_client_goes_away(
    embedded_server, server_env, servers
):
    """A client that hangs up leaves nothing running: the server's stream is cancelled, and
    the session goes on (it is ended by DELETE or the usual timeouts, not by a dropped stream)."""
    host = embedded_server
    await asyncio.to_thread(UserFactory, username="leaver")
    await asyncio.to_thread(WorldFactory, slug="coast", theme="misty_coast")
    key = await asyncio.to_thread(_new_key, server_env, "leaver")
    _, _, session = await asyncio.to_thread(
        _call, host, key, "POST", "/api/v1/sessions/", {"world": "coast"}
    )
    path = f"/api/v1/sessions/{session['id']}/"
    for _ in range(3):  # open and drop the stream a few times; the server keeps answering
        stream = await asyncio.to_thread(EventStream, host, key, f"{path}events/")
        await stream.wait_for("state", state="starting")
        stream.connection.sock.close()
    status, _, detail = await asyncio.to_thread(_call, host, key, "GET", path)
    assert status == 200 and detail["state"] in ("starting", "live")
    status, _, ended = await asyncio.to_thread(_call, host, key, "DELETE", path)
    assert ended["state"] == "ended"
    log = servers.log(f"daphne-{host.rsplit(':', 1)[1]}")
    assert "Traceback" not in log and "Task was destroyed" not in log, log[-3000:]


class WhepViewer:
    """A WHEP player in a few lines of aiortc: receive-only video and audio, plus the `input`
    data channel."""

    def __init__(self) -> None:
        from aiortc import RTCPeerConnection

        self.pc = RTCPeerConnection()
        self.pc.addTransceiver("video", direction="recvonly")
        self.pc.addTransceiver("audio", direction="recvonly")
        self.channel = self.pc.createDataChannel("input")
        self.video_frames = 0
        self.replies: list[dict] = []
        self._readers: list[asyncio.Task] = []
        self.pc.on("track", self._track)
        self.channel.on("message", lambda raw: self.replies.append(json.loads(raw)))

    def _track(self, track) -> None:
        if track.kind == "video":
            self._readers.append(asyncio.ensure_future(self._read(track)))

    async def _read(self, track) -> None:
        while True:
            try:
                await track.recv()
            except Exception:  # the track ended
                return
            self.video_frames += 1

    async def offer(self) -> str:
        await self.pc.setLocalDescription(await self.pc.createOffer())
        return self.pc.localDescription.sdp

    async def answer(self, sdp: str) -> None:
        from aiortc import RTCSessionDescription

        await self.pc.setRemoteDescription(RTCSessionDescription(sdp=sdp, type="answer"))

    async def close(self) -> None:
        for reader in self._readers:
            reader.cancel()
        await self.pc.close()


def _post_sdp(host: str, key: str, path: str, sdp: str) -> tuple[int, dict, str]:
    connection = http.client.HTTPConnection(host, timeout=60)
    headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/sdp"}
    connection.request("POST", path, sdp.encode(), headers)
    response = connection.getresponse()
    body = response.read().decode()
    connection.close()
    return response.status, dict(response.getheaders()), body


async def test_whep_plays_a_session_and_its_input_channel_steers_it(any_server, server_env):
    host = any_server
    await asyncio.to_thread(UserFactory, username="viewer")
    await asyncio.to_thread(WorldFactory, slug="coast", theme="misty_coast", seed=5)
    key = await asyncio.to_thread(_new_key, server_env, "viewer")
    _, _, session = await asyncio.to_thread(
        _call, host, key, "POST", "/api/v1/sessions/", {"world": "coast"}
    )
    path = f"/api/v1/sessions/{session['id']}/"
    whep_path = session["whep_url"].split(host, 1)[1]
    stream = await asyncio.to_thread(EventStream, host, key, f"{path}events/")

    viewer = WhepViewer()
    try:
        status, headers, answer = await asyncio.to_thread(
            _post_sdp, host, key, whep_path, await viewer.offer()
        )
        assert status == 201, answer
        assert headers["Content-Type"] == "application/sdp" and answer.startswith("v=0")
        resource = headers["Location"]
        assert resource.startswith(whep_path) and resource != whep_path
        await viewer.answer(answer)

        await stream.wait_for("state", state="live", timeout=60)
        deadline = asyncio.get_running_loop().time() + 30
        while viewer.channel.readyState != "open" or viewer.video_frames < 20:
            assert asyncio.get_running_loop().time() < deadline, "no picture over WHEP"
            await asyncio.sleep(0.1)

        status, _, accepted = await asyncio.to_thread(
            _call, host, key, "POST", f"{path}inputs/", {"type": "input", "keys": ["D"]}
        )
        assert status == 202 and accepted == {"ids": [1]}
        assert (await stream.wait_for("inputs_applied", timeout=20))["up_to"] >= 1
        viewer.channel.send(json.dumps({"type": "input", "keys": ["W"], "seq": 500}))
        await stream.wait_for("inputs_applied", timeout=20, up_to=500)
        viewer.channel.send(json.dumps({"type": "input", "keys": ["Q"]}))
        await asyncio.sleep(0.5)
        assert {"type": "error", "code": "bad_field", "message": "Unknown key 'Q'."} in (
            viewer.replies
        )

        connection = http.client.HTTPConnection(host, timeout=30)
        await asyncio.to_thread(
            connection.request, "DELETE", resource, None, {"Authorization": f"Bearer {key}"}
        )
        hung_up = await asyncio.to_thread(connection.getresponse)
        assert hung_up.status == 200
        deadline = asyncio.get_running_loop().time() + 15
        while viewer.pc.connectionState not in ("closed", "failed"):
            assert asyncio.get_running_loop().time() < deadline, viewer.pc.connectionState
            await asyncio.sleep(0.2)
        status, _, detail = await asyncio.to_thread(_call, host, key, "GET", path)
        assert detail["state"] == "live"  # hanging up leaves the session running
    finally:
        await viewer.close()
    status, _, ended = await asyncio.to_thread(_call, host, key, "DELETE", path)
    assert ended["state"] == "ended"
    await stream.wait_for("ended", timeout=20)
