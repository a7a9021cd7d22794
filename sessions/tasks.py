"""Celery jobs for play sessions. Tasks translate and delegate to sessions.export_jobs and
sessions.services."""

from celery import shared_task
from celery.signals import worker_ready
from django.conf import settings

from sessions import export_jobs, services


@shared_task(
    bind=True, acks_late=True, reject_on_worker_lost=True, max_retries=settings.EXPORT_MAX_ATTEMPTS
)
def export_build(self, export_id: str) -> str:
    """acks_late is safe: export_run does nothing for an export that is already finished."""
    try:
        return export_jobs.export_run(export_id=export_id)
    except Exception as exc:
        final = self.request.retries >= self.max_retries
        export_jobs.export_crashed(export_id=export_id, reason=str(exc), final=final)
        if final:
            raise
        raise self.retry(exc=exc, countdown=5 * 2**self.request.retries) from exc


@shared_task
def exports_housekeeping() -> dict:
    """Re-queue exports stranded by a killed worker and delete expired files."""
    return {
        "recovered": export_jobs.exports_recover_stalled(enqueue=export_build.delay),
        "expired": export_jobs.exports_expire(),
    }


@shared_task
def sessions_housekeeping() -> dict:
    """Fail sessions of silent workers, end abandoned ones, advance the queue."""
    return services.sessions_housekeeping()


@worker_ready.connect
def _recover_on_start(sender=None, **kwargs) -> None:
    # A worker that comes back after a crash picks up what the dead one left running: now,
    # and once more when a job killed just before this start has had time to look stalled.
    exports_housekeeping.delay()
    exports_housekeeping.apply_async(countdown=settings.EXPORT_STALL_SECONDS + 2)
