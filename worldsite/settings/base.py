"""Worldsite settings: every environment variable the site reads is read here, and only here.

This is the base every settings module starts from, and `worldsite.settings` itself (make run,
.ci/run, manage.py). worldsite.settings.test adds what only the test suite wants;
worldsite.settings.production turns the secure defaults on and refuses to start half-configured.

Embedded default (no environment): SQLite, the in-memory channel layer, Celery tasks run eagerly
in-process, console e-mail. Scaled: DATABASE_URL -> PostgreSQL, REDIS_URL -> channels_redis and
the Celery broker, EMAIL_HOST -> SMTP. The README lists every variable.
"""

import json
import os
import secrets
from pathlib import Path
from typing import Any

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent.parent
VAR_DIR = Path(os.environ.get("WORLDSITE_VAR_DIR", BASE_DIR / "var"))


def private_var_dir() -> Path:
    """var/ holds local state (SQLite database, secret key, recordings, exports, media) and is
    for this account only. Made here, at import, on purpose: storages and recorders create their
    folders under it later, with the umask's permissions."""
    VAR_DIR.mkdir(parents=True, exist_ok=True, mode=0o700)
    if VAR_DIR.stat().st_uid == os.getuid():
        VAR_DIR.chmod(0o700)
    return VAR_DIR


private_var_dir()


def env_bool(name: str, default: bool) -> bool:
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


def env_int(name: str, default: int) -> int:
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    try:
        return int(value)
    except ValueError as exc:
        raise ImproperlyConfigured(f"{name} must be an integer, got {value!r}") from exc


def env_list(name: str, default: list[str]) -> list[str]:
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    return [item.strip() for item in value.split(",") if item.strip()]


def _local_secret_key() -> str:
    """A per-install key kept in var/ so sessions survive restarts without a committed secret."""
    key_file = private_var_dir() / "secret_key"
    if not key_file.exists():
        key_file.write_text(secrets.token_urlsafe(50))
        key_file.chmod(0o600)
    return key_file.read_text().strip()


DEBUG = env_bool("DJANGO_DEBUG", False)
SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY") or _local_secret_key()
ALLOWED_HOSTS = env_list("DJANGO_ALLOWED_HOSTS", ["127.0.0.1", "localhost", "[::1]"])
CSRF_TRUSTED_ORIGINS = env_list("DJANGO_CSRF_TRUSTED_ORIGINS", [])
# Absolute base for links in e-mails (invitations, password resets sent outside a request).
SITE_URL = os.environ.get("WORLDSITE_SITE_URL", "http://127.0.0.1:8000").rstrip("/")

INSTALLED_APPS = [
    "daphne",
    # First, so its templates (login, password reset) win over the admin's look-alikes.
    "frontend",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "channels",
    "django_ratelimit",
    "accounts",
    "gallery",
    "sessions.apps.PlaySessionsConfig",
    "api",
]

MIDDLEWARE = [
    "api.middleware.problem_details_middleware",  # /api/v1/ errors as problem+json, all of them
    "django.middleware.security.SecurityMiddleware",
    "worldsite.middleware.ContentSecurityPolicyMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]


# --- Production switches -------------------------------------------------------------------------
# DJANGO_SECURE=1: the site is served over HTTPS by a TLS-terminating proxy that sets
# X-Forwarded-Proto. Cookies only travel over TLS, plain http is redirected, browsers are told to
# stick to https (HSTS), and request.is_secure() trusts the proxy's header.
def tls_switches(*, secure: bool, site_url: str) -> tuple[Any, ...]:
    """(SESSION_COOKIE_SECURE, CSRF_COOKIE_SECURE, SECURE_SSL_REDIRECT, SECURE_HSTS_SECONDS,
    SECURE_PROXY_SSL_HEADER): all on together, or Django's defaults."""
    if not secure:
        return False, False, False, 0, None
    if not site_url.startswith("https://"):
        raise ImproperlyConfigured(
            "DJANGO_SECURE=1 needs WORLDSITE_SITE_URL to start with https:// (e-mailed links)."
        )
    hsts = env_int("DJANGO_HSTS_SECONDS", 365 * 24 * 3600)
    return True, True, True, hsts, ("HTTP_X_FORWARDED_PROTO", "https")


SECURE = env_bool("DJANGO_SECURE", False)
(
    SESSION_COOKIE_SECURE,
    CSRF_COOKIE_SECURE,
    SECURE_SSL_REDIRECT,
    SECURE_HSTS_SECONDS,
    SECURE_PROXY_SSL_HEADER,
) = tls_switches(secure=SECURE, site_url=SITE_URL)
SECURE_REFERRER_POLICY = "same-origin"
# Scripts and styles from our own static files only (no inline scripts anywhere; style
# attributes are allowed for progress meters); the play page's WebSocket is same-origin, and
# WebRTC media is not governed by CSP. Uploaded media gets a stricter policy of its own.
CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; style-src-attr 'unsafe-inline'; "
    "img-src 'self' data: blob:; media-src 'self' blob:; connect-src 'self'; "
    "object-src 'none'; base-uri 'self'; form-action 'self'; frame-ancestors 'none'"
)

ROOT_URLCONF = "worldsite.urls"
ASGI_APPLICATION = "worldsite.asgi.application"
WSGI_APPLICATION = "worldsite.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

# --- Database ---------------------------------------------------------------------------------
DATABASE_URL = os.environ.get("DATABASE_URL", "")
if DATABASE_URL:
    DATABASES = {"default": dj_database_url.parse(DATABASE_URL, conn_max_age=60)}
else:
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": str(Path(os.environ.get("WORLDSITE_SQLITE_PATH", VAR_DIR / "db.sqlite3"))),
            # A file, not memory: tests start real daphne and engine-worker processes on it.
            "TEST": {"NAME": VAR_DIR / f"test_db_{os.getpid()}.sqlite3"},
            # IMMEDIATE: a transaction takes the write lock when it begins, so quota decisions
            # made inside one are serialized (PostgreSQL uses an advisory lock instead).
            "OPTIONS": {"transaction_mode": "IMMEDIATE", "timeout": 20},
        }
    }
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- Channels and Celery ------------------------------------------------------------------------
REDIS_URL = os.environ.get("REDIS_URL", "")
if REDIS_URL:
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            "CONFIG": {"hosts": [REDIS_URL]},
        }
    }
    CELERY_BROKER_URL = REDIS_URL
    CELERY_RESULT_BACKEND = REDIS_URL
    CELERY_TASK_ALWAYS_EAGER = False
else:
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    CELERY_BROKER_URL = "memory://"
    CELERY_RESULT_BACKEND = "cache+memory://"
    CELERY_TASK_ALWAYS_EAGER = True
# The cache holds rate-limit counters (worldsite/ratelimits.py): shared through Redis when
# scaled, so every daphne process counts together; the one process's memory when embedded.
if REDIS_URL:
    CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": REDIS_URL,
            "KEY_PREFIX": "worldsite",
        }
    }
else:
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
    # django-ratelimit warns that memory is not shared between processes: embedded has one.
    SILENCED_SYSTEM_CHECKS = ["django_ratelimit.E003", "django_ratelimit.W001"]
CELERY_TASK_EAGER_PROPAGATES = True
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TIMEZONE = "UTC"
# With `celery -A worldsite beat` running (scaled deployments), housekeeping runs every minute.
CELERY_BEAT_SCHEDULE = {
    "exports-housekeeping": {"task": "sessions.tasks.exports_housekeeping", "schedule": 60.0},
    "sessions-housekeeping": {"task": "sessions.tasks.sessions_housekeeping", "schedule": 10.0},
}

# --- Auth ---------------------------------------------------------------------------------------
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
LOGIN_URL = "/accounts/login/"
LOGIN_REDIRECT_URL = "/worlds/"
LOGOUT_REDIRECT_URL = "/"

# --- E-mail -------------------------------------------------------------------------------------
DEFAULT_FROM_EMAIL = os.environ.get("WORLDSITE_FROM_EMAIL", "Worldsite <beta@worldsite.local>")
EMAIL_HOST = os.environ.get("EMAIL_HOST", "")
if EMAIL_HOST:
    EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    EMAIL_PORT = env_int("EMAIL_PORT", 587)
    EMAIL_HOST_USER = os.environ.get("EMAIL_HOST_USER", "")
    EMAIL_HOST_PASSWORD = os.environ.get("EMAIL_HOST_PASSWORD", "")
    EMAIL_USE_TLS = env_bool("EMAIL_USE_TLS", True)
else:
    EMAIL_BACKEND = "django.core.mail.backends.console.EmailBackend"

# --- Static and media ---------------------------------------------------------------------------
STATIC_URL = "/static/"
STATIC_ROOT = VAR_DIR / "static"
MEDIA_URL = "/media/"
MEDIA_ROOT = Path(os.environ.get("WORLDSITE_MEDIA_ROOT", VAR_DIR / "media"))
# Single-machine installs serve uploads themselves; behind a real web server, turn this off.
SERVE_MEDIA = env_bool("WORLDSITE_SERVE_MEDIA", True)
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": (
            "django.contrib.staticfiles.storage.StaticFilesStorage"
            if DEBUG
            else "whitenoise.storage.CompressedManifestStaticFilesStorage"
        )
    },
}
# Request bodies above this get a 413 from daphne before they are held in memory or parsed
# (worldsite/http_limits.py); the default leaves room for the largest reference image.
MAX_REQUEST_BYTES = env_int("WORLDSITE_MAX_REQUEST_BYTES", 6 * 1024 * 1024)
MAX_WEBSOCKET_MESSAGE_BYTES = 128 * 1024  # the play socket's parser allows 64 KB
DATA_UPLOAD_MAX_MEMORY_SIZE = MAX_REQUEST_BYTES
FILE_UPLOAD_MAX_MEMORY_SIZE = MAX_REQUEST_BYTES

# --- Internationalisation -----------------------------------------------------------------------
LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

# --- Worldsite product limits -------------------------------------------------------------------
# Site-wide quota defaults; admins override them per user (sessions.UserQuota).
QUOTA_PLAY_SECONDS_PER_DAY = env_int("WORLDSITE_QUOTA_PLAY_SECONDS_PER_DAY", 3600)
QUOTA_CONCURRENT_SESSIONS = env_int("WORLDSITE_QUOTA_CONCURRENT_SESSIONS", 1)
QUOTA_MAX_SESSION_SECONDS = env_int("WORLDSITE_QUOTA_MAX_SESSION_SECONDS", 1200)
QUOTA_EXPORTS_PER_DAY = env_int("WORLDSITE_QUOTA_EXPORTS_PER_DAY", 5)
# Players waiting beyond this are refused rather than queued.
QUEUE_MAX_LENGTH = env_int("WORLDSITE_QUEUE_MAX_LENGTH", 20)
INVITATION_TTL_DAYS = env_int("WORLDSITE_INVITATION_TTL_DAYS", 7)

# --- Engine workers and WebRTC -----------------------------------------------------------------
# Without REDIS_URL the engine worker runs inside the daphne process (the embedded default);
# with it, start workers with `manage.py engine_worker` (any number, on any machine).
ENGINE_EMBEDDED = env_bool("WORLDSITE_ENGINE_EMBEDDED", not REDIS_URL)
ENGINE_WORKER_CAPACITY = env_int("WORLDSITE_ENGINE_WORKER_CAPACITY", 1)
# How many sessions the engine workers can run live at once, across the whole site. Embedded,
# that is the one worker's capacity (admitting more only made players wait 30 s and fail);
# scaled, the sum over the workers you start. sessions/checks.py warns about a mismatch.
ENGINE_CAPACITY = env_int(
    "WORLDSITE_ENGINE_CAPACITY", ENGINE_WORKER_CAPACITY if ENGINE_EMBEDDED else 2
)
ENGINE_WEIGHTS_DIR = os.environ.get("WORLDSITE_ENGINE_WEIGHTS", "") or None  # engine default
ENGINE_THREADS = env_int("WORLDSITE_ENGINE_THREADS", 1)  # the other core encodes VP8
ENGINE_START_TIMEOUT = env_int("WORLDSITE_ENGINE_START_TIMEOUT", 30)  # s to find a worker
ENGINE_HEARTBEAT_TIMEOUT = env_int("WORLDSITE_ENGINE_HEARTBEAT_TIMEOUT", 5)  # s of silence
ENGINE_IDLE_TIMEOUT = env_int("WORLDSITE_ENGINE_IDLE_TIMEOUT", 180)  # s without any input
ENGINE_RECONNECT_GRACE = env_int("WORLDSITE_ENGINE_RECONNECT_GRACE", 15)  # s to come back
# A running session whose worker has not written a heartbeat for this long has failed.
ENGINE_STALE_AFTER = max(10, 2 * ENGINE_HEARTBEAT_TIMEOUT)
# An admitted session no page ever opened (or a queued one whose page never connected) is
# ended after this long, giving its capacity back (housekeeping runs every few seconds).
ENGINE_ABANDONED_AFTER = env_int("WORLDSITE_ENGINE_ABANDONED_AFTER", 2 * ENGINE_START_TIMEOUT)
# Bench mode: frames carry the last applied input's sequence number (tools.bench reads it).
ENGINE_BENCH_STAMP = env_bool("WORLDSITE_BENCH_STAMP", False)
RECORDINGS_ROOT = Path(os.environ.get("WORLDSITE_RECORDINGS_ROOT", VAR_DIR / "recordings"))
WEBRTC_VIDEO_CODEC = os.environ.get("WORLDSITE_VIDEO_CODEC", "VP8")  # or H264
# JSON list of RTCIceServer dicts, e.g. [{"urls": "turn:turn.example.com", "username": ...}].
# None by default: aiortc's own default would contact a public STUN server.
WEBRTC_ICE_SERVERS = json.loads(os.environ.get("WORLDSITE_ICE_SERVERS", "[]"))
# Offer 127.0.0.1 ICE candidates (aioice skips loopback): single-machine installs and tests.
WEBRTC_LOOPBACK = env_bool("WORLDSITE_WEBRTC_LOOPBACK", True)
# Offer nothing but 127.0.0.1 (tests: media never leaves the loopback interface).
WEBRTC_LOOPBACK_ONLY = env_bool("WORLDSITE_WEBRTC_LOOPBACK_ONLY", False)

# Session exports: private files, kept this many days, then deleted.
EXPORTS_ROOT = Path(os.environ.get("WORLDSITE_EXPORTS_ROOT", VAR_DIR / "exports"))
EXPORT_RETENTION_DAYS = env_int("WORLDSITE_EXPORT_RETENTION_DAYS", 7)
# A running export whose job has not reported for this long is presumed dead and retried.
EXPORT_STALL_SECONDS = env_int("WORLDSITE_EXPORT_STALL_SECONDS", 120)
EXPORT_MAX_ATTEMPTS = 3

# Draw gallery thumbnails + previews with the model whenever a world's look changes.
WORLD_MEDIA_AUTO = env_bool("WORLDSITE_WORLD_MEDIA_AUTO", True)

# Reference images for worlds: what the upload validator accepts.
REFERENCE_IMAGE_MAX_BYTES = env_int("WORLDSITE_REFERENCE_IMAGE_MAX_BYTES", 4 * 1024 * 1024)
REFERENCE_IMAGE_MAX_SIDE = 4096
REFERENCE_IMAGE_MIN_SIDE = 16
REFERENCE_IMAGE_MAX_PIXELS = 16_000_000

if not DEBUG and SECRET_KEY.startswith("django-insecure"):
    raise ImproperlyConfigured("Refusing to run with an insecure SECRET_KEY while DEBUG is off.")

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": os.environ.get("WORLDSITE_LOG_LEVEL", "INFO")},
}
