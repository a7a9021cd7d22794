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
