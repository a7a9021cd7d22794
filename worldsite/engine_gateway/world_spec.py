"""A gallery world as the engine opens it: the one spec shape the web side hands over.

The reference picture travels as small PNG bytes, never a path: engine and Celery workers may
not share this machine's storage. Shrinking it decodes the whole upload, so it is done once per
world version and kept in the cache.
"""

from datetime import datetime
from typing import Protocol, TypedDict

from django.core.cache import cache
from django.db.models.fields.files import FieldFile

from worldsite.engine_gateway.pictures import shrink_to_png

REFERENCE_CACHE_SECONDS = 7 * 24 * 3600


class EngineSpec(TypedDict, total=False):
    seed: int
    theme: str
    initial_prompt: str
    reference_png: bytes | None
    world: str  # the gallery slug, for logs and recordings


class WorldLook(Protocol):
    """What a gallery world offers the engine (gallery.models.World has it)."""

    pk: int
    slug: str
    seed: int
    theme: str
    initial_prompt: str
    reference_image: FieldFile
    updated_at: datetime


def engine_spec_for(world: WorldLook) -> EngineSpec:
    """What the world model needs to open this world."""
    return {
        "seed": world.seed,
        "theme": world.theme,
        "initial_prompt": world.initial_prompt,
        "reference_png": reference_png_for(world),
        "world": world.slug,
    }


def reference_png_for(world: WorldLook) -> bytes | None:
    """The world's reference picture as small PNG bytes, computed once per world version."""
    if not world.reference_image:
        return None
    key = f"engine-reference:{world.pk}:{world.reference_image.name}:{world.updated_at.timestamp()}"
    picture = cache.get(key)
    if picture is None:
        with world.reference_image.open("rb") as source:
            picture = shrink_to_png(source)[0]
        cache.set(key, picture, REFERENCE_CACHE_SECONDS)
    return picture
