"""examples/play_world.py, run as a developer runs it (its own process, a key from
`apikey_create`) against a real daphne with the embedded engine worker: it waits its turn in the
queue, plays the session through WHEP and leaves an MP4 that PyAV reads back; a wrong key ends
it with the problem's title and a non-zero exit."""

import asyncio
import subprocess
import sys
import threading

import av
import pytest

from sessions.models import PlaySession
from tests.factories import UserFactory, WorldFactory
from tests.play.conftest import REPO
from tests.play.test_api_stack import _call, _new_key

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


def _start_example(env: dict[str, str], *args: str) -> tuple[subprocess.Popen, list[str]]:
    """The example running; its stdout lines fill the list as they come."""
    process = subprocess.Popen(
        [sys.executable, str(EXAMPLE), *args],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines: list[str] = []
    threading.Thread(target=lambda: lines.extend(process.stdout or ()), daemon=True).start()
    return process, lines


async def test_the_example_waits_its_turn_plays_a_world_and_saves_an_mp4(
    embedded_server, server_env, tmp_path
):
    host = embedded_server
    user = await asyncio.to_thread(UserFactory, username="developer")
    await asyncio.to_thread(UserFactory, username="other")
    await asyncio.to_thread(WorldFactory, slug="coast", theme="misty_coast", seed=3)
    key = await asyncio.to_thread(_new_key, server_env, "developer")
    # Someone else holds the one engine slot, so the example's session is queued at first.
    other_key = await asyncio.to_thread(_new_key, server_env, "other")
    status, _, other = await asyncio.to_thread(
        _call, host, other_key, "POST", "/api/v1/sessions/", {"world": "coast"}
    )
    assert status == 201 and other["state"] == "starting"
    out = tmp_path / "walk.mp4"

    process, lines = _start_example(
        {**server_env, "WORLDSITE_API_KEY": key},
        "--base-url",
        f"http://{host}",
        "--seconds",
        "3",
        "--out",
        str(out),
    )
    try:
        deadline = asyncio.get_running_loop().time() + 60
        while not any(line.startswith("queued: position 1") for line in lines):
            assert process.poll() is None, lines + [process.stderr.read()]  # type: ignore[union-attr]
            assert asyncio.get_running_loop().time() < deadline, lines
            await asyncio.sleep(0.2)
        await asyncio.to_thread(
            _call, host, other_key, "DELETE", f"/api/v1/sessions/{other['id']}/"
        )
        returncode = await asyncio.to_thread(process.wait, 180)
    finally:
        if process.poll() is None:
            process.kill()
    stdout, stderr = "".join(lines), process.stderr.read()  # type: ignore[union-attr]
    assert returncode == 0, stdout + stderr
    assert "world coast" in stdout and "session is live" in stdout, stdout
    assert "the world heard: 'make it rain'" in stdout, stdout
    assert "session ended" in stdout and "input refused" not in stderr, stderr

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
