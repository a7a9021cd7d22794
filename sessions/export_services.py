"""Write-side logic for session exports: requests (owner, quota), the build, recovery, expiry."""

import logging
import tempfile
from datetime import timedelta
from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser
from django.core.files import File
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from sessions import selectors
from sessions.export_builder import (
    ExportError,
    build_export,
    decode_recording,
    open_recording,
    replay_inputs,
)
from sessions.models import PlaySession, SessionExport

logger = logging.getLogger(__name__)
Status = SessionExport.Status


class ExportRefused(Exception):
    """The export cannot be started; the message says why."""


def exports_today(*, user: AbstractBaseUser) -> int:
    return (
        SessionExport.objects.filter(owner=user, created_at__gte=selectors.day_start())
        .exclude(status=Status.FAILED)
        .count()
    )


def export_request(
    *, user: AbstractBaseUser, session: PlaySession, kind: str, quality: str = "standard"
) -> SessionExport:
    """Queue an export of the user's own finished session, within the daily export quota."""
    if session.owner_id != user.pk:
        raise ExportRefused("You can only export your own sessions.")
    if session.is_active:
        raise ExportRefused("End the session first; then it can be exported.")
    if kind not in SessionExport.Kind.values or quality not in SessionExport.Quality.values:
        raise ExportRefused("Unknown export kind or quality.")
    with transaction.atomic():
        # One user's requests are serialized on their own user row, so a double click cannot
        # slip past the quota.
        get_user_model().objects.select_for_update().filter(pk=user.pk).first()
        limit = selectors.quota_for(user=user).exports_per_day
        if selectors.exports_today(user=user) >= limit:
            raise ExportRefused(
                f"You have used today's {limit} export(s). The count resets at midnight UTC."
            )
        export = SessionExport.objects.create(
            session=session,
            owner=user,
            kind=kind,
            quality=quality,
            expires_at=timezone.now() + timedelta(days=settings.EXPORT_RETENTION_DAYS),
        )
        transaction.on_commit(lambda: _enqueue(export), robust=True)
    return export


def _enqueue(export: SessionExport) -> None:
    from sessions.tasks import export_build

    export_build.delay(str(export.pk))


def _update(export_id, **fields) -> None:
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
            from sessions.worker.engine_adapter import open_engine_session

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
    except ExportError as error:
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


def exports_recover_stalled() -> int:
    """Re-queue running exports whose job went quiet (a killed worker); returns how many."""
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
            transaction.on_commit(lambda export=export: _enqueue(export))
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
