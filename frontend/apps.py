from django.apps import AppConfig


class FrontendConfig(AppConfig):
    """Holds the site's templates and static assets (CSS, JS); no models."""

    name = "frontend"
