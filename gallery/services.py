"""Write-side logic for worlds: keeping their gallery media in step with how they look."""

import logging
import tempfile
from pathlib import Path

from django.core.files.base import ContentFile
from django.db import transaction
from django.db.models import F

from gallery import selectors
from gallery.models import MediaStatus, World

logger = logging.getLogger(__name__)


def world_media_schedule(*, world: World) -> int:
    """Ask for fresh gallery media; returns the version the job will draw.

    The version number is what keeps a slow, stale job from overwriting newer pictures.
    """
    from gallery.tasks import world_render_media

    World.objects.filter(pk=world.pk).update(
        media_version=F("media_version") + 1, media_status=MediaStatus.PENDING, media_error=""
    )
    version = World.objects.values_list("media_version", flat=True).get(pk=world.pk)
    # robust: a failed eager render (no Redis) is recorded on the world, not raised at save.
    transaction.on_commit(lambda: world_render_media.delay(world.pk, version), robust=True)
    return version


def world_media_render(*, world_id: int, version: int) -> str:
    """Draw and store the media for `version`; 'stale' when a newer version was asked for."""
    from gallery.media import render_world_media

    world = World.objects.filter(pk=world_id).first()
    if world is None or world.media_version != version:
        return "stale"
    World.objects.filter(pk=world_id, media_version=version).update(
        media_status=MediaStatus.RENDERING
    )
    spec = selectors.world_engine_spec(world)
    with tempfile.TemporaryDirectory() as workdir:
        media = render_world_media(spec, Path(workdir))

    with transaction.atomic():
        world = World.objects.select_for_update().get(pk=world_id)
        if world.media_version != version:
            return "stale"
        old = [world.thumbnail.name, world.preview.name]
        world.thumbnail.save(f"{world.slug}-v{version}.png", ContentFile(media.thumbnail_png),
                             save=False)
        world.preview.save(f"{world.slug}-v{version}.mp4", ContentFile(media.preview_mp4),
                           save=False)
        World.objects.filter(pk=world_id).update(
            thumbnail=world.thumbnail.name, preview=world.preview.name,
            media_rendered_version=version, media_status=MediaStatus.READY, media_error="",
        )
    storage = World._meta.get_field("thumbnail").storage
    for name in old:  # re-running replaces, never piles up files
        if name and name not in (world.thumbnail.name, world.preview.name):
            storage.delete(name)
    return "ready"


def world_media_failed(*, world_id: int, version: int, reason: str, final: bool) -> None:
    status = MediaStatus.FAILED if final else MediaStatus.PENDING
    World.objects.filter(pk=world_id, media_version=version).update(
        media_status=status, media_error=reason[:300]
    )
