"""Read-side queries for worlds."""

from typing import Any

from django.db.models import QuerySet

from gallery.models import Tag, World
from sessions.images import shrink_to_png


def world_list_published(*, tag: str = "", query: str = "") -> QuerySet[World]:
    worlds = World.objects.filter(is_published=True).prefetch_related("tags")
    if tag:
        worlds = worlds.filter(tags__slug=tag)
    if query:
        worlds = worlds.filter(title__icontains=query.strip())
    return worlds.order_by("sort_order", "title").distinct()


def world_list_featured(*, limit: int = 3) -> QuerySet[World]:
    return world_list_published().filter(is_featured=True)[:limit]


def world_get_published(*, slug: str) -> World | None:
    return World.objects.filter(slug=slug, is_published=True).prefetch_related("tags").first()


def tag_list_in_use() -> QuerySet[Tag]:
    return Tag.objects.filter(worlds__is_published=True).distinct().order_by("name")


def world_engine_spec(world: World) -> dict[str, Any]:
    """What the world model needs to open this world. The reference picture travels as small
    PNG bytes, never a path: engine and Celery workers may not share this machine's storage."""
    picture = None
    if world.reference_image:
        with world.reference_image.open("rb") as source:
            picture = shrink_to_png(source)[0]
    return {
        "seed": world.seed,
        "theme": world.theme,
        "initial_prompt": world.initial_prompt,
        "reference_png": picture,
    }
