"""What the export job runs: build one export's MP4, record crashes, recover stalled jobs and
expire old files. Called by sessions.tasks; it never enqueues a task itself."""

import tempfile
from collections.abc import Callable
from datetime import timedelta
from functools import partial
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.files import File
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from sessions.export_builder import ExportError, build_export, replay_inputs
from sessions.models import SessionExport
from worldsite.engine_gateway.recording import RecordingError, decode_recording, open_recording

Status = SessionExport.Status


def _update(export_id: Any, **fields: Any) -> None:
    SessionExport.objects.filter(pk=export_id).update(**fields)


def export_run(*, export_id: str) -> str:
    """Build one export. Idempotent: a finished or expired export is left as it is."""
    with transaction.atomic():
        export = (
            SessionExport.objects.select_for_update()
            .select_related("session__world")
            .filter(pk=export_id)
            .first()
        )
        if export is None or export.status in (Status.DONE, Status.EXPIRED, Status.FAILED):
            return export.status if export else "missing"
        now = timezone.now()
        _update(
            export_id,
            status=Status.RUNNING,
            started_at=now,
            heartbeat_at=now,
            progress=0,
            attempts=F("attempts") + 1,
            error="",
        )

    session = export.session
    recording_folder = Path(settings.RECORDINGS_ROOT) / str(session.pk)

    def report(percent: int) -> None:
        _update(export_id, progress=min(99, percent), heartbeat_at=timezone.now())

    try:
        recording = open_recording(recording_folder)
        if export.kind == SessionExport.Kind.RECORDING:
            source, encode_from = decode_recording(recording), 0
        else:
            from worldsite.engine_gateway.runtime import open_engine_session  # loads torch

            source = replay_inputs(
                recording,
                open_engine_session,
                on_frame=lambda done, total: report(50 * done // total),
            )
            encode_from = 50  # re-rendering was the first half of the work

        with tempfile.TemporaryDirectory() as workdir:
            output = Path(workdir) / "export.mp4"
            build_export(
                recording,
                output,
                title=session.world.title,
                subtitle=f"played {timezone.localtime(session.created_at):%Y-%m-%d %H:%M} UTC",
                quality=export.quality,
                source=source,
                on_progress=lambda percent: report(
                    encode_from + percent * (100 - encode_from) // 100
                ),
            )
            name = f"{session.world.slug}-{str(export.pk)[:8]}.mp4"
            with output.open("rb") as handle:
                export.file.save(name, File(handle), save=False)
    except (ExportError, RecordingError) as error:
        _update(export_id, status=Status.FAILED, error=str(error)[:300], finished_at=timezone.now())
        return Status.FAILED
    _update(
        export_id,
        status=Status.DONE,
        progress=100,
        file=export.file.name,
        finished_at=timezone.now(),
        heartbeat_at=timezone.now(),
    )
    return Status.DONE


def export_crashed(*, export_id: str, reason: str, final: bool) -> None:
    """An unexpected error: queue again, or fail for good after the last attempt."""
    if final:
        _update(
            export_id,
            status=Status.FAILED,
            finished_at=timezone.now(),
            error=f"The export failed: {reason}"[:300],
        )
    else:
        _update(export_id, status=Status.QUEUED, error="")


def exports_recover_stalled(*, enqueue: Callable[[str], None]) -> int:
    """Re-queue running exports whose job went quiet (a killed worker); returns how many.

    `enqueue(export_id)` starts the job again (the caller passes the Celery task's delay)."""
    cutoff = timezone.now() - timedelta(seconds=settings.EXPORT_STALL_SECONDS)
    stalled = SessionExport.objects.filter(status=Status.RUNNING, heartbeat_at__lt=cutoff)
    recovered = 0
    for export in stalled:
        if export.attempts >= settings.EXPORT_MAX_ATTEMPTS:
            _update(
                export.pk,
                status=Status.FAILED,
                finished_at=timezone.now(),
                error="The export job stopped several times; please try again later.",
            )
            continue
        claimed = SessionExport.objects.filter(
            pk=export.pk, status=Status.RUNNING, heartbeat_at__lt=cutoff
        ).update(status=Status.QUEUED)
        if claimed:
            recovered += 1
            transaction.on_commit(partial(enqueue, str(export.pk)))
    return recovered


def exports_expire() -> int:
    """Delete the files of exports past their retention; returns how many expired."""
    expired = 0
    for export in SessionExport.objects.filter(expires_at__lt=timezone.now()).exclude(
        status=Status.EXPIRED
    ):
        if export.file:
            export.file.delete(save=False)
        _update(export.pk, status=Status.EXPIRED, file="")
        expired += 1
    return expired
