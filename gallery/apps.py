from django.apps import AppConfig


class GalleryConfig(AppConfig):
    """Worlds: what players pick from, what the engine starts from."""

    name = "gallery"
