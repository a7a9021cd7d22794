"""Session exports: quota, ownership, the MP4 built from a recording, failures, recovery, expiry."""

import json
from datetime import timedelta

import av
import numpy as np
import pytest
from django.urls import reverse
from django.utils import timezone

from sessions import export_jobs, export_services, services
from sessions.export_builder import TITLE_SECONDS
from sessions.models import PlaySession, SessionExport, UserQuota
from tests.factories import UserFactory
from tests.recorded import finished_session_with_recording

pytestmark = pytest.mark.django_db
FRAMES = 60


@pytest.fixture(autouse=True)
def _folders(settings, tmp_path):
    settings.RECORDINGS_ROOT = tmp_path / "recordings"
    settings.EXPORTS_ROOT = tmp_path / "exports"


def _color(index: int) -> tuple[int, int, int]:
    return (index * 4 % 256, 255 - index * 4 % 256, (index * 37) % 256)


def _recorded_session(user, world, settings, frames: int = FRAMES) -> PlaySession:
    """A finished session with a real recording: each frame a flat colour, audio a tone."""
    tone = (np.sin(np.arange(800) * 2 * np.pi * 440 / 16_000) * 8000).astype(np.int16)
    return finished_session_with_recording(
        user,
        world,
        settings.RECORDINGS_ROOT,
        frames,
        lambda index: np.full((128, 128, 3), _color(index), np.uint8),
        tone,
    )


def _export(user, session, django_capture_on_commit_callbacks, kind="recording"):
    with django_capture_on_commit_callbacks(execute=True):
        export = export_services.export_request(user=user, session=session, kind=kind)
    export.refresh_from_db()
    return export


def test_export_is_a_faithful_mp4_with_title_card(
    member, world, settings, django_capture_on_commit_callbacks
):
    session = _recorded_session(member, world, settings)
    export = _export(member, session, django_capture_on_commit_callbacks)
    assert export.status == "done" and export.progress == 100, export.error

    with av.open(export.file.path) as container:
        assert container.format.name.startswith("mov")
        video, audio = container.streams.video[0], container.streams.audio[0]
        assert (video.codec_context.name, audio.codec_context.name) == ("h264", "aac")
        frames = [f.to_ndarray(format="rgb24") for f in container.decode(video=0)]
    expected = int(TITLE_SECONDS * 20) + FRAMES
    assert abs(len(frames) - expected) <= 1
    assert frames[0].shape == (512, 512, 3)
    card = int(TITLE_SECONDS * 20)
    for index in (0, 17, FRAMES - 1):  # the picture after the card is the recording's
        got = frames[card + index].reshape(-1, 3).mean(axis=0)
        assert np.abs(got - np.array(_color(index))).max() < 12, (index, got)
    with av.open(export.file.path) as container:
        samples = sum(f.samples for f in container.decode(audio=0))
    assert abs(samples / 16_000 - expected / 20) <= 1 / 20 + 1024 / 16_000  # AAC priming
    with open(export.file.path, "rb") as handle:  # faststart: the index comes first
        head = handle.read(64 * 1024)
    assert head.find(b"moov") < head.find(b"mdat")


def test_only_the_owner_or_an_admin_downloads(
    client, member, world, admin_user, settings, django_capture_on_commit_callbacks
):
    export = _export(
        member, _recorded_session(member, world, settings), django_capture_on_commit_callbacks
    )
    url = reverse("sessions:export_download", args=[export.pk])
    assert client.get(url).status_code == 302  # login first
    client.force_login(UserFactory())
    assert client.get(url).status_code == 404
    client.force_login(member)
    response = client.get(url)
    assert response.status_code == 200 and response["Content-Type"] == "video/mp4"
    assert b"".join(response.streaming_content)[:12].find(b"ftyp") == 4
    client.force_login(admin_user)
    assert client.get(url).status_code == 200


def test_exports_count_against_the_daily_quota(member, world, settings):
    UserQuota.objects.create(user=member, exports_per_day=2)
    session = _recorded_session(member, world, settings)
    for _ in range(2):
        export_services.export_request(user=member, session=session, kind="recording")
    with pytest.raises(export_services.ExportRefused, match="today's 2 export"):
        export_services.export_request(user=member, session=session, kind="recording")
    SessionExport.objects.filter(owner=member).update(status="failed")  # failures are given back
    export_services.export_request(user=member, session=session, kind="recording")


def test_refusals(member, world, settings):
    other = UserFactory()
    session = _recorded_session(member, world, settings)
    with pytest.raises(export_services.ExportRefused, match="your own"):
        export_services.export_request(user=other, session=session, kind="recording")
    live = services.session_reserve(user=other, world=world).session
    with pytest.raises(export_services.ExportRefused, match="End the session"):
        export_services.export_request(user=other, session=live, kind="recording")
    with pytest.raises(export_services.ExportRefused, match="Unknown"):
        export_services.export_request(user=member, session=session, kind="gif")


@pytest.mark.parametrize("damage", ["missing", "corrupt", "no_av"])
def test_broken_recordings_fail_with_a_reason(
    member, world, settings, django_capture_on_commit_callbacks, damage
):
    session = _recorded_session(member, world, settings)
    folder = settings.RECORDINGS_ROOT / str(session.pk)
    if damage == "missing":
        for path in folder.iterdir():
            path.unlink()
        folder.rmdir()
    elif damage == "corrupt":
        (folder / "av.mp4").write_bytes(b"\x00\x00\x00\x18ftypisom" + b"garbage" * 500)
    else:
        (folder / "av.mp4").unlink()
    export = _export(member, session, django_capture_on_commit_callbacks)
    assert export.status == "failed"
    assert {"missing": "no recording", "corrupt": "damaged", "no_av": "re-render"}[damage] in (
        export.error
    )
    assert not export.file


def test_view_starts_an_export_and_reports_progress(
    client, member, world, settings, django_capture_on_commit_callbacks
):
    session = _recorded_session(member, world, settings)
    client.force_login(member)
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(
            reverse("sessions:export_start", args=[session.pk]),
            {"kind": "recording", "quality": "high"},
        )
    assert response.status_code == 302 and response["Location"].endswith("#exports")
    export = SessionExport.objects.get()
    status = client.get(reverse("sessions:export_status", args=[export.pk])).json()
    assert status["status"] == "done" and status["progress"] == 100
    assert status["download_url"] == reverse("sessions:export_download", args=[export.pk])
    profile = client.get(reverse("accounts:profile")).content.decode()
    assert "Download MP4" in profile and '1 <span class="muted">of 5 today' in profile


def test_a_stalled_export_is_requeued_and_finishes(
    member, world, settings, django_capture_on_commit_callbacks
):
    session = _recorded_session(member, world, settings)
    export = SessionExport.objects.create(
        session=session,
        owner=member,
        status="running",
        attempts=1,
        heartbeat_at=timezone.now() - timedelta(minutes=10),
        expires_at=timezone.now() + timedelta(days=1),
    )
    with django_capture_on_commit_callbacks(execute=True):
        assert export_services.exports_recover_stalled() == 1
    export.refresh_from_db()
    assert export.status == "done" and export.attempts == 2


def test_repeated_stalls_give_up_with_a_reason(member, world, settings):
    session = _recorded_session(member, world, settings)
    export = SessionExport.objects.create(
        session=session,
        owner=member,
        status="running",
        attempts=settings.EXPORT_MAX_ATTEMPTS,
        heartbeat_at=timezone.now() - timedelta(minutes=10),
        expires_at=timezone.now() + timedelta(days=1),
    )
    assert export_services.exports_recover_stalled() == 0
    export.refresh_from_db()
    assert export.status == "failed" and "stopped several times" in export.error


def test_finished_exports_are_not_rebuilt(
    member, world, settings, django_capture_on_commit_callbacks
):
    export = _export(
        member, _recorded_session(member, world, settings), django_capture_on_commit_callbacks
    )
    name = export.file.name
    assert export_jobs.export_run(export_id=str(export.pk)) == "done"
    export.refresh_from_db()
    assert export.file.name == name and export.attempts == 1


def test_expired_exports_lose_their_files(
    client, member, world, settings, django_capture_on_commit_callbacks
):
    export = _export(
        member, _recorded_session(member, world, settings), django_capture_on_commit_callbacks
    )
    path = export.file.path
    SessionExport.objects.filter(pk=export.pk).update(expires_at=timezone.now())
    assert export_jobs.exports_expire() == 1
    export.refresh_from_db()
    assert export.status == "expired" and not export.file
    import os

    assert not os.path.exists(path)
    client.force_login(member)
    assert client.get(reverse("sessions:export_download", args=[export.pk])).status_code == 404


def test_rerender_replays_the_inputs_with_the_model(
    member, world, settings, django_capture_on_commit_callbacks
):
    session = _recorded_session(member, world, settings, frames=20)
    (settings.RECORDINGS_ROOT / str(session.pk) / "av.mp4").unlink()  # the A/V has expired
    export = _export(member, session, django_capture_on_commit_callbacks, kind="rerender")
    assert export.status == "done", export.error
    with av.open(export.file.path) as container:
        frames = sum(1 for _ in container.decode(video=0))
    assert abs(frames - (int(TITLE_SECONDS * 20) + 20)) <= 1
    meta = json.loads((settings.RECORDINGS_ROOT / str(session.pk) / "meta.json").read_text())
    assert meta["frames"] == 20
