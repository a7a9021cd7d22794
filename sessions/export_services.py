"""Write-side logic for session exports asked for on the site: requests (owner, quota) and the
recovery of stalled jobs. What the export job itself runs lives in sessions.export_jobs."""

from datetime import timedelta

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone

from sessions import export_jobs, selectors
from sessions.models import PlaySession, SessionExport
from sessions.tasks import export_build

Status = SessionExport.Status


class ExportRefused(Exception):
    """The export cannot be started; the message says why."""


def export_request(
    *, user: User, session: PlaySession, kind: str, quality: str = "standard"
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
        transaction.on_commit(lambda: _enqueue(str(export.pk)), robust=True)
    return export


def _enqueue(export_id: str) -> None:
    export_build.delay(export_id)


def exports_recover_stalled() -> int:
    """Re-queue running exports whose job went quiet (a killed worker); returns how many."""
    return export_jobs.exports_recover_stalled(enqueue=_enqueue)
