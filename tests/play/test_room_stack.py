"""A live room against the real server stack (embedded, and daphne plus an engine-worker process
on Redis): the host plays through WHEP, opens a room through the API, and a spectator's aiortc
client pulls decoded frames through the room's viewer WHEP URL, cannot steer, and is hung up
when the host ends the session. Another member's key cannot open a room on the session, nor
watch a private room it was not invited to."""

import asyncio
import json

import pytest

from tests.factories import UserFactory, WorldFactory
from tests.play.test_api_stack import EventStream, WhepViewer, _call, _new_key, _post_sdp

pytestmark = [pytest.mark.play, pytest.mark.django_db(transaction=True)]


class Spectator(WhepViewer):
    """A WHEP viewer that keeps the last picture it decoded."""

    last_picture = None

    async def _read(self, track) -> None:
        while True:
            try:
                frame = await track.recv()
            except Exception:  # the track ended
                return
            self.video_frames += 1
            self.last_picture = frame.to_ndarray(format="rgb24")


async def _until(condition, timeout: float, what: str) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, what
        await asyncio.sleep(0.1)


async def test_a_spectator_watches_a_room_through_its_viewer_whep_url(any_server, server_env):
    host = any_server
    for name in ("streamer", "fan", "stranger"):
        await asyncio.to_thread(UserFactory, username=name)
    await asyncio.to_thread(WorldFactory, slug="coast", theme="misty_coast", seed=5)
    streamer, fan, stranger = [
        await asyncio.to_thread(_new_key, server_env, name)
        for name in ("streamer", "fan", "stranger")
    ]
    _, _, session = await asyncio.to_thread(
        _call, host, streamer, "POST", "/api/v1/sessions/", {"world": "coast"}
    )
    path = f"/api/v1/sessions/{session['id']}/"
    stream = await asyncio.to_thread(EventStream, host, streamer, f"{path}events/")

    player = WhepViewer()  # the host plays through their own WHEP URL
    spectator = Spectator()
    try:
        status, _, answer = await asyncio.to_thread(
            _post_sdp, host, streamer, session["whep_url"].split(host, 1)[1], await player.offer()
        )
        assert status == 201, answer
        await player.answer(answer)
        await stream.wait_for("state", state="live", timeout=90)

        status, _, problem = await asyncio.to_thread(
            _call, host, stranger, "POST", f"{path}room", {"visibility": "listed"}
        )
        assert status == 404 and problem["status"] == 404  # not the stranger's session
        status, _, room = await asyncio.to_thread(
            _call, host, streamer, "POST", f"{path}room", {"invite": ["fan"]}
        )
        assert status == 201, room
        assert room["url"].endswith(f"/live/{room['room']}/") and room["visibility"] == "private"
        viewer_path = room["whep_url"].split(host, 1)[1]

        status, _, body = await asyncio.to_thread(
            _post_sdp, host, stranger, viewer_path, await WhepViewer().offer()
        )
        assert status == 403 and json.loads(body)["type"] == "/api/#problem-room-access"

        status, headers, answer = await asyncio.to_thread(
            _post_sdp, host, fan, viewer_path, await spectator.offer()
        )
        assert status == 201, answer
        assert headers["Content-Type"] == "application/sdp" and headers["Location"]
        await spectator.answer(answer)
        await _until(lambda: spectator.video_frames >= 40, 40, "no decoded frames for the fan")
        frames_before, player_before = spectator.video_frames, player.video_frames
        await asyncio.sleep(3.0)
        spectator_fps = (spectator.video_frames - frames_before) / 3.0
        player_fps = (player.video_frames - player_before) / 3.0
        print("decoded fps: spectator", spectator_fps, "player", player_fps)
        # The spectator gets every new picture the engine makes (the player's track also
        # repeats the last one when the engine falls behind, so its count runs higher under
        # load); a stalled relay would decode nothing here.
        assert spectator_fps >= 5, (spectator_fps, player_fps)
        picture = spectator.last_picture
        assert picture.shape[:2] == (128, 128) and picture.mean() > 10  # the world, not black

        _, _, room_now = await asyncio.to_thread(_call, host, streamer, "POST", f"{path}room", {})
        assert room_now["viewer_count"] == 1

        # The spectator's data channel cannot move the player.
        await _until(lambda: spectator.channel.readyState == "open", 20, "no data channel")
        spectator.channel.send(json.dumps({"type": "input", "keys": ["W"], "seq": 9}))
        await _until(lambda: any(r.get("code") == "spectator" for r in spectator.replies), 10, "x")

        status, _, ended = await asyncio.to_thread(_call, host, streamer, "DELETE", path)
        assert ended["state"] == "ended"
        await _until(
            lambda: (
                spectator.pc.connectionState in ("closed", "failed")
                or any(r.get("type") == "ended" for r in spectator.replies)
            ),
            20,
            "the spectator was not hung up when the host ended the session",
        )
        assert any(r.get("type") == "ended" for r in spectator.replies), spectator.replies
    finally:
        await spectator.close()
        await player.close()
