"""Write-side logic for worlds: saving them, and asking for gallery media when their look changes.

The drawing itself runs in a Celery job (gallery.tasks -> gallery.media_jobs).
"""

from django.conf import settings
from django.db import transaction
from django.db.models import F

from gallery.models import MediaStatus, World
from gallery.tasks import world_render_media


def world_save(*, world: World) -> World:
    """Save a world; a new one, or one whose look changed, gets its gallery media drawn again
    (when settings.WORLD_MEDIA_AUTO is on). Every write of a world's fields goes through here."""
    look_changed = world._state.adding or world.look_changed()
    world.save()
    if settings.WORLD_MEDIA_AUTO and look_changed:
        world_media_schedule(world=world)
        world.mark_look_saved()
    return world


def world_media_schedule(*, world: World) -> int:
    """Ask for fresh gallery media; returns the version the job will draw.

    The version number is what keeps a slow, stale job from overwriting newer pictures.
    """
    World.objects.filter(pk=world.pk).update(
        media_version=F("media_version") + 1, media_status=MediaStatus.PENDING, media_error=""
    )
    version = World.objects.values_list("media_version", flat=True).get(pk=world.pk)
    # robust: a failed eager render (no Redis) is recorded on the world, not raised at save.
    transaction.on_commit(lambda: world_render_media.delay(world.pk, version), robust=True)
    return version
