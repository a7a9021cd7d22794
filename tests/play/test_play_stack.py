"""A Python aiortc player through the whole stack: daphne, PlayConsumer, the embedded engine
worker and the shipped world model; media stays on 127.0.0.1."""

import asyncio
import json

import av
import pytest
from django.test import Client

from sessions import services
from sessions.models import PlaySession
from tests.factories import UserFactory, WorldFactory
from tests.play.client import PlayClient, motion

pytestmark = [pytest.mark.play, pytest.mark.django_db(transaction=True)]


def _login_cookie(user) -> str:
    client = Client()
    client.force_login(user)
    return client.cookies["sessionid"].value


@pytest.fixture
def embedded_server(servers):
    # The embedded default: in-memory channel layer, the engine inside daphne.
    return servers.daphne(env={"REDIS_URL": "", "WORLDSITE_ENGINE_EMBEDDED": "1"})


async def test_stream_inputs_prompt_and_recording(embedded_server, settings):
    user = await asyncio.to_thread(UserFactory)
    world = await asyncio.to_thread(WorldFactory, theme="misty_coast", seed=3)
    reservation = await asyncio.to_thread(services.session_reserve, user=user, world=world)
    session_id = str(reservation.session.pk)
    cookie = await asyncio.to_thread(_login_cookie, user)

    player = PlayClient(embedded_server, session_id, cookie)
    await player.connect()
    try:
        await asyncio.wait_for(player.live.wait(), timeout=90)
        await asyncio.sleep(2.5)
        assert len(player.video) >= 30, "expected >= 2 s of video at 20 fps"
        assert player.video[-1][1].shape == (128, 128, 3)
        assert player.audio_rate == 48_000
        assert player.audio_samples >= 2 * 48_000

        loop = asyncio.get_running_loop()
        idle_start = loop.time()
        await player.hold_for([], 2.0)
        idle = motion(player.frames_between(idle_start + 0.5, loop.time()))
        walk_start = loop.time()
        await player.hold_for(["W"], 2.0)
        walking = motion(player.frames_between(walk_start + 0.5, loop.time()))
        assert walking > idle * 1.2, f"holding W should change the picture: {walking} vs {idle}"

        player.prompt("make it night")
        await asyncio.sleep(1.0)
        assert any(m.get("type") == "prompt_ack" for m in player.engine_messages)

        await player.send({"type": "end"})
        await asyncio.wait_for(player.final.wait(), timeout=20)
    finally:
        await player.close()

    session = await asyncio.to_thread(PlaySession.objects.get, pk=session_id)
    assert session.state == "ended" and session.end_reason == "Player ended the session."
    assert session.started_at is not None and session.seconds_used >= 5

    folder = settings.RECORDINGS_ROOT / session_id
    for _ in range(50):  # the worker closes the recording just after it reports the end
        if json.loads((folder / "meta.json").read_text()).get("end_reason"):
            break
        await asyncio.sleep(0.1)
    meta = json.loads((folder / "meta.json").read_text())
    assert meta["end_reason"] == "Player ended the session."
    inputs = [json.loads(line) for line in (folder / "inputs.jsonl").read_text().splitlines()]
    assert any(entry.get("keys") == ["W"] for entry in inputs)
    assert any(entry.get("text") == "make it night" for entry in inputs)
    with av.open(str(folder / "av.mp4")) as container:
        decoded = sum(1 for _ in container.decode(video=0))
    assert decoded == meta["frames"] >= 100
