"""examples/play_world.py, run as a developer runs it (its own process, a key from
`apikey_create`) against a real daphne with the embedded engine worker: it plays a session
through WHEP and leaves an MP4 that PyAV reads back; a wrong key ends it with the problem's
title and a non-zero exit."""

import asyncio
import subprocess
import sys

import av
import pytest

from sessions.models import PlaySession
from tests.factories import UserFactory, WorldFactory
from tests.play.conftest import REPO
from tests.play.test_api_stack import _new_key

pytestmark = [pytest.mark.play, pytest.mark.django_db(transaction=True)]

EXAMPLE = REPO / "examples" / "play_world.py"
SESSION_SIZE = (128, 128)  # the shipped model's resolution, as test_play_stack.py sees it


@pytest.fixture
def embedded_server(servers):
    return servers.daphne(env={"REDIS_URL": "", "WORLDSITE_ENGINE_EMBEDDED": "1"})


def _run_example(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(EXAMPLE), *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )


async def test_the_example_plays_a_world_and_saves_an_mp4(embedded_server, server_env, tmp_path):
    host = embedded_server
    user = await asyncio.to_thread(UserFactory, username="developer")
    await asyncio.to_thread(WorldFactory, slug="coast", theme="misty_coast", seed=3)
    key = await asyncio.to_thread(_new_key, server_env, "developer")
    out = tmp_path / "walk.mp4"

    done = await asyncio.to_thread(
        _run_example,
        {**server_env, "WORLDSITE_API_KEY": key},
        "--base-url",
        f"http://{host}",
        "--seconds",
        "3",
        "--out",
        str(out),
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "world coast" in done.stdout, done.stdout
    assert "the world heard: 'make it rain'" in done.stdout, done.stdout
    assert "session ended" in done.stdout and "input refused" not in done.stderr, done.stderr

    with av.open(str(out)) as container:
        assert container.streams.audio, "the MP4 has no audio stream"
        frames = list(container.decode(video=0))
        container.seek(0)
        assert any(True for _ in container.decode(audio=0)), "the audio stream is empty"
    assert len(frames) >= 10, len(frames)
    assert {(frame.width, frame.height) for frame in frames} == {SESSION_SIZE}

    session = await asyncio.to_thread(PlaySession.objects.get, owner=user)
    assert session.state == PlaySession.State.ENDED
    assert session.end_reason == "Ended through the API."


async def test_a_wrong_key_prints_the_problem_and_exits_non_zero(embedded_server, server_env):
    done = await asyncio.to_thread(
        _run_example, server_env, "--base-url", f"http://{embedded_server}", "--key", "wsk_wrong"
    )
    assert done.returncode != 0
    assert "401 Unauthorized" in done.stderr and "unknown or has been revoked" in done.stderr, (
        done.stderr
    )
    assert "Traceback" not in done.stderr
