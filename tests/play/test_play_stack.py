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
from tests.play.recordings import divergence, first_frame_with, recorded_session
from tools.player import PlayClient

pytestmark = [pytest.mark.play, pytest.mark.django_db(transaction=True)]


def _login_cookie(user) -> str:
    client = Client()
    client.force_login(user)
    return client.cookies["sessionid"].value


@pytest.fixture
def embedded_server(servers):
    # The embedded default: in-memory channel layer, the engine inside daphne.
    return servers.daphne(env={"REDIS_URL": "", "WORLDSITE_ENGINE_EMBEDDED": "1"})


async def _play(host: str, world, *, walk: bool) -> tuple[PlayClient, str]:
    """One session: 2 s idle, then 2 s holding W (or still idle), then a sentence, then End."""
    user = await asyncio.to_thread(UserFactory)
    reservation = await asyncio.to_thread(services.session_reserve, user=user, world=world)
    session_id = str(reservation.session.pk)
    player = PlayClient(host, session_id, await asyncio.to_thread(_login_cookie, user))
    await player.connect()
    try:
        await asyncio.wait_for(player.live.wait(), timeout=120)
        await player.hold_for([], 2.0)
        await player.hold_for(["W"] if walk else [], 2.0)
        await player.hold_for([], 0.5)
        player.prompt("make it night")
        await asyncio.sleep(2.0)
        await player.send({"type": "end"})
        await asyncio.wait_for(player.final.wait(), timeout=20)
    finally:
        await player.close()
    return player, session_id


async def test_stream_inputs_prompt_and_recording(embedded_server, settings):
    world = await asyncio.to_thread(WorldFactory, theme="misty_coast", seed=3)
    walker, walker_id = await _play(embedded_server, world, walk=True)

    assert len(walker.video) >= 80, "expected several seconds of video at 20 fps"
    assert walker.video[-1][1].shape == (128, 128, 3)
    assert walker.audio_rate == 48_000 and walker.audio_samples >= 4 * 48_000
    assert any(m.get("type") == "prompt_ack" for m in walker.engine_messages)
    stats = [m for m in walker.messages if m["type"] == "stats"]
    assert stats and max(m["last_seq"] for m in stats) >= walker.seq - 5

    session = await asyncio.to_thread(PlaySession.objects.get, pk=walker_id)
    assert session.state == "ended" and session.end_reason == "Player ended the session."
    assert session.started_at is not None and session.seconds_used >= 5

    folder = settings.RECORDINGS_ROOT / walker_id
    frames, inputs = await asyncio.to_thread(recorded_session, folder)
    meta = json.loads((folder / "meta.json").read_text())
    assert meta["end_reason"] == "Player ended the session." and len(frames) == meta["frames"]
    with av.open(str(folder / "av.mp4")) as container:
        assert container.streams.audio[0].codec_context.name == "aac"

    # Same world, same seed, never pressing W: the engine is deterministic, so the two
    # sessions match frame for frame until W was pressed, and part ways after it.
    _, idler_id = await _play(embedded_server, world, walk=False)
    idle_frames, _ = await asyncio.to_thread(recorded_session, settings.RECORDINGS_ROOT / idler_id)
    walk_from = first_frame_with(inputs, keys=["W"])
    before = divergence(frames, idle_frames, 0, walk_from)
    after = divergence(frames, idle_frames, walk_from + 5, walk_from + 40)
    assert before < 1.0, f"identical inputs must give identical pictures ({before})"
    assert after > before + 2.0, f"holding W must change the picture ({after} vs {before})"
