import pytest
from channels.layers import channel_layers

from tests.factories import UserFactory, WorldFactory
from worldsite.celery import app as celery_app


@pytest.fixture(autouse=True)
def _isolated_files(settings, tmp_path):
    """Uploads never land in the developer's var/media; static files come from the app folders
    (tests do not depend on a prior collectstatic)."""
    settings.MEDIA_ROOT = tmp_path / "media"
    settings.WORLD_MEDIA_AUTO = False  # tests that want gallery media switch it back on
    settings.STORAGES = {
        **settings.STORAGES,
        "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
    }


@pytest.fixture
def member(db):
    return UserFactory(username="member")


@pytest.fixture
def admin_user(db):
    return UserFactory(username="boss", is_staff=True, is_superuser=True)


@pytest.fixture
def world(db):
    return WorldFactory(slug="ember", title="Ember Forest")


@pytest.fixture(autouse=True)
def _celery_eager():
    """Tasks run in-process unless a test starts real Celery workers (tests/play)."""
    previous = celery_app.conf.task_always_eager
    celery_app.conf.task_always_eager = True
    yield
    celery_app.conf.task_always_eager = previous


@pytest.fixture
def one_rate_window(monkeypatch):
    """django-ratelimit counts in fixed windows; on a slow machine a test's requests could
    straddle a window boundary and see its count reset. Hold its clock still."""
    import types

    import django_ratelimit.core

    monkeypatch.setattr(django_ratelimit.core, "time", types.SimpleNamespace(time=lambda: 1e9))


@pytest.fixture(autouse=True)
def _fresh_rate_limits(settings):
    """Each test counts from zero (the Redis cache of a scaled run outlives a test)."""
    import uuid

    settings.RATELIMIT_CACHE_PREFIX = f"rl:{uuid.uuid4().hex}:"


@pytest.fixture(autouse=True)
def _fresh_channel_layer():
    """Each test gets its own channel layer. channels_redis keeps per-channel asyncio locks on
    the layer object; a receive cancelled while it waits leaves its lock behind, bound to the
    event loop of the test that made it, and the next test to contend for it fails with "bound
    to a different event loop". Tests run one event loop each; the server runs one for its life."""
    yield
    channel_layers.backends.clear()


@pytest.fixture(scope="session")
def django_db_setup(django_db_setup, django_db_blocker):
    """pytest-django's test database, and before it is dropped, no session left on it.

    Under PostgreSQL the backends of server and worker processes a test killed close a moment
    after their process exits, and threads that ran ORM calls for async tests keep theirs: the
    drop then failed ("being accessed by other users") and left `test_<name>` behind."""
    yield
    from django.db import connection

    with django_db_blocker.unblock():
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                    " WHERE datname = current_database() AND pid <> pg_backend_pid()"
                )
        connection.close()
