from django.apps import AppConfig


class GalleryConfig(AppConfig):
    """Worlds: what players pick from, what the engine starts from."""

    name = "gallery"

    def ready(self) -> None:
        from gallery import signals  # noqa: F401  (connects the receivers)
