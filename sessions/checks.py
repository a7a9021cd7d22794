"""System checks (`manage.py check`, and every daphne start) for settings that contradict."""

from typing import Any

from django.conf import settings
from django.core.checks import Warning, register


@register()
def engine_capacity_check(app_configs: Any = None, **kwargs: Any) -> list[Warning]:
    """The embedded worker runs ENGINE_WORKER_CAPACITY sessions; admitting more than that makes
    the extra players wait for an engine that never frees and fail instead of queueing."""
    if settings.ENGINE_EMBEDDED and settings.ENGINE_CAPACITY > settings.ENGINE_WORKER_CAPACITY:
        return [
            Warning(
                f"WORLDSITE_ENGINE_CAPACITY is {settings.ENGINE_CAPACITY} but the embedded engine "
                f"worker runs {settings.ENGINE_WORKER_CAPACITY} session(s) at once: the extra "
                "players would be admitted and then fail with 'No world engine is free'.",
                hint="Leave WORLDSITE_ENGINE_CAPACITY unset, or raise "
                "WORLDSITE_ENGINE_WORKER_CAPACITY to match it.",
                id="play_sessions.W001",
            )
        ]
    return []
