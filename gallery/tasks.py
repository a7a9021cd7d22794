"""Celery jobs for the gallery. Tasks translate and delegate to gallery.media_jobs."""

from celery import shared_task

from gallery import media_jobs

MAX_RETRIES = 4


@shared_task(bind=True, acks_late=True, max_retries=MAX_RETRIES)
def world_render_media(self, world_id: int, version: int) -> str:
    """Idempotent: drawing the same version twice replaces the files with equal ones."""
    try:
        return media_jobs.world_media_render(world_id=world_id, version=version)
    except Exception as exc:
        final = self.request.retries >= MAX_RETRIES
        reason = f"{type(exc).__name__}: {exc}"
        media_jobs.world_media_failed(
            world_id=world_id, version=version, reason=reason, final=final
        )
        if final:
            raise
        raise self.retry(exc=exc, countdown=min(300, 10 * 2**self.request.retries)) from exc
