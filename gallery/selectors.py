"""Read-side queries for worlds."""

from django.db.models import QuerySet

from gallery.models import Tag, World


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
