"""Settings for the test suite (pyproject's DJANGO_SETTINGS_MODULE; the server processes the
play tests start inherit it). Per-test changes belong in fixtures (tests/conftest.py)."""

from worldsite.settings.base import *  # noqa: F403

# Tests create hundreds of accounts; the production hasher's cost only slows them down.
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
