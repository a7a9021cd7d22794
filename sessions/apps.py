from django.apps import AppConfig


class PlaySessionsConfig(AppConfig):
    """Play sessions and quotas. Labelled apart: `sessions` belongs to django.contrib.sessions."""

    name = "sessions"
    label = "play_sessions"
    verbose_name = "Play sessions"

    def ready(self) -> None:
        from sessions import checks  # noqa: F401  (registers the system checks)
