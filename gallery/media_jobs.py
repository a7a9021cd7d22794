"""What the gallery media job runs: draw a world's pictures for one version and store them."""

import tempfile
from pathlib import Path

from django.core.files.base import ContentFile
from django.db import transaction

from gallery import media
from gallery.models import MediaStatus, World
from worldsite.engine_gateway.world_spec import engine_spec_for


def world_media_render(*, world_id: int, version: int) -> str:
    """Draw and store the media for `version`; 'stale' when a newer version was asked for."""
    world = World.objects.filter(pk=world_id).first()
    if world is None or world.media_version != version:
        return "stale"
    World.objects.filter(pk=world_id, media_version=version).update(
        media_status=MediaStatus.RENDERING
    )
    spec = engine_spec_for(world)
    with tempfile.TemporaryDirectory() as workdir:
        drawn = media.render_world_media(spec, Path(workdir))

    with transaction.atomic():
        world = World.objects.select_for_update().get(pk=world_id)
        if world.media_version != version:
            return "stale"
        old = [world.thumbnail.name, world.preview.name]
        world.thumbnail.save(
            f"{world.slug}-v{version}.png", ContentFile(drawn.thumbnail_png), save=False
        )
        world.preview.save(
            f"{world.slug}-v{version}.mp4", ContentFile(drawn.preview_mp4), save=False
        )
        World.objects.filter(pk=world_id).update(
            thumbnail=world.thumbnail.name,
            preview=world.preview.name,
            media_rendered_version=version,
            media_status=MediaStatus.READY,
            media_error="",
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
