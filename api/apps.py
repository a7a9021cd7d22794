from django.apps import AppConfig


class ApiConfig(AppConfig):
    """The developer API under /api/v1/ and its guide at /api/ (docs/architecture.md)."""

    name = "api"
    verbose_name = "Developer API"
