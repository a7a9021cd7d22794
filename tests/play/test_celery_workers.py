"""Real Celery workers on the Redis broker: an export and gallery media built out of process,
and an export whose worker is killed mid-way finishes on the next worker."""

import time

import av
import numpy as np
import pytest
from django.conf import settings as django_settings

from gallery.models import World
from sessions import export_services
from sessions.models import SessionExport
from tests.factories import UserFactory, WorldFactory
from tests.recorded import finished_session_with_recording
from worldsite.celery import app as celery_app

pytestmark = [pytest.mark.play, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def broker(servers, settings, tmp_path):
    if not django_settings.REDIS_URL:
        pytest.skip("set REDIS_URL to test real Celery workers")
    celery_app.conf.task_always_eager = False
    settings.EXPORTS_ROOT = tmp_path / "exports"
    servers.env.update(
        {
            "WORLDSITE_EXPORTS_ROOT": str(settings.EXPORTS_ROOT),
            "WORLDSITE_MEDIA_ROOT": str(settings.MEDIA_ROOT),
            "WORLDSITE_EXPORT_STALL_SECONDS": "3",
        }
    )
    settings.EXPORT_STALL_SECONDS = 3
    celery_app.control.purge()  # nothing left over from other tests
    return servers


def _start_worker(servers, name: str):
    return servers.start(
        f"celery-{name}",
        [
            "-m",
            "celery",
            "-A",
            "worldsite",
            "worker",
            "--pool",
            "solo",
            "--hostname",
            f"{name}@%h",
            "--loglevel",
            "INFO",
            "--without-gossip",
            "--without-mingle",
        ],
    )


def _wait(predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.25)
    raise TimeoutError(f"timed out waiting for {what}")


def _recorded_session(settings, frames: int):
    user = UserFactory()
    noise = np.random.default_rng(0)  # noisy frames make encoding take a little while
    session = finished_session_with_recording(
        user,
        WorldFactory(),
        settings.RECORDINGS_ROOT,
        frames,
        lambda index: noise.integers(0, 255, (128, 128, 3), np.uint8),
    )
    return user, session


def test_export_survives_a_killed_worker(broker, settings):
    user, session = _recorded_session(settings, frames=1200)
    first = _start_worker(broker, "first")
    export = export_services.export_request(user=user, session=session, kind="recording")
    _wait(
        lambda: SessionExport.objects.filter(
            pk=export.pk, status="running", progress__gt=0
        ).exists(),
        120,
        "a running export",
    )
    first.kill()  # SIGKILL mid-export: no cleanup, the message is never acknowledged
    first.wait()
    export.refresh_from_db()
    assert export.status == "running"

    _start_worker(broker, "second")  # on start it re-queues what the dead worker left running
    done = _wait(
        lambda: SessionExport.objects.filter(pk=export.pk, status="done").first(),
        240,
        "the export to finish on the second worker",
    )
    assert done.attempts == 2
    with av.open(done.file.path) as container:
        assert sum(1 for _ in container.decode(video=0)) == 1200 + 30


def test_gallery_media_are_drawn_by_a_worker(broker, settings):
    _start_worker(broker, "media")
    settings.WORLD_MEDIA_AUTO = True
    world = WorldFactory(theme="neon_night")
    ready = _wait(
        lambda: World.objects.filter(pk=world.pk, media_status="ready").first(),
        300,
        "the worker to draw the gallery media",
    )
    assert ready.thumbnail and ready.preview
    with av.open(ready.preview.path) as container:
        assert sum(1 for _ in container.decode(video=0)) == 40
