"""The embedded and scaled configurations wire up what they promise."""

import pytest
from channels.layers import get_channel_layer
from django.conf import settings
from django.db import connection

from worldsite.celery import app as celery_app


def test_database_follows_database_url():
    if settings.DATABASE_URL:
        assert settings.DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql"
    else:
        assert settings.DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3"


@pytest.mark.django_db
def test_database_answers():
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
        assert cursor.fetchone() == (1,)


async def test_channel_layer_round_trip():
    """A message sent on the configured layer (Redis when REDIS_URL is set) comes back."""
    layer = get_channel_layer()
    expected = "RedisChannelLayer" if settings.REDIS_URL else "InMemoryChannelLayer"
    assert type(layer).__name__ == expected
    channel = await layer.new_channel()
    await layer.send(channel, {"type": "ping", "n": 7})
    assert await layer.receive(channel) == {"type": "ping", "n": 7}


def test_celery_is_eager_only_without_redis():
    # (tests/conftest.py makes the app eager for unit tests; the configuration is what counts)
    assert settings.CELERY_TASK_ALWAYS_EAGER is (not settings.REDIS_URL)
    if settings.REDIS_URL:
        assert celery_app.conf.broker_url == settings.REDIS_URL


def test_asgi_application_routes_http_and_websocket():
    from worldsite.asgi import application

    assert set(application.application_mapping) == {"http", "websocket"}


def test_settings_reject_a_malformed_integer(monkeypatch):
    from django.core.exceptions import ImproperlyConfigured

    from worldsite.settings import env_int

    monkeypatch.setenv("WORLDSITE_ENGINE_CAPACITY", "lots")
    with pytest.raises(ImproperlyConfigured, match="WORLDSITE_ENGINE_CAPACITY"):
        env_int("WORLDSITE_ENGINE_CAPACITY", 2)


def _settings_in_fresh_process(**env: str) -> dict:
    import json
    import os
    import subprocess
    import sys

    clean = {k: v for k, v in os.environ.items() if not k.startswith(("WORLDSITE_", "REDIS"))}
    script = (
        "import django, json; django.setup(); from django.conf import settings as s; "
        "print(json.dumps([s.ENGINE_CAPACITY, s.ENGINE_WORKER_CAPACITY, s.ENGINE_EMBEDDED]))"
    )
    out = subprocess.run(
        [sys.executable, "-c", script],
        env={**clean, **env, "DJANGO_SETTINGS_MODULE": "worldsite.settings"},
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout.splitlines()[-1])


def test_embedded_defaults_admit_no_more_sessions_than_the_worker_runs():
    """The site admitted 2 while the embedded worker ran 1: the second player failed after
    30 s with 'No world engine is free' instead of being queued."""
    capacity, worker_capacity, embedded = _settings_in_fresh_process()
    assert embedded and capacity == worker_capacity == 1
    capacity, worker_capacity, _ = _settings_in_fresh_process(WORLDSITE_ENGINE_WORKER_CAPACITY="3")
    assert capacity == worker_capacity == 3


def test_a_contradicting_capacity_is_reported_by_the_system_check(settings):
    from sessions.checks import engine_capacity_check

    settings.ENGINE_EMBEDDED, settings.ENGINE_WORKER_CAPACITY = True, 1
    settings.ENGINE_CAPACITY = 1
    assert engine_capacity_check() == []
    settings.ENGINE_CAPACITY = 2
    [warning] = engine_capacity_check()
    assert warning.id == "play_sessions.W001" and "No world engine is free" in warning.msg
    settings.ENGINE_EMBEDDED = False  # scaled: the fleet's size is the operator's to state
    assert engine_capacity_check() == []
