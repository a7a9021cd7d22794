"""Settings for a deployment: DJANGO_SETTINGS_MODULE=worldsite.settings.production.

Secure unless told otherwise: DEBUG can not be turned on, the secret key and the host names must
come from the environment (no key file made up in var/), and the TLS switches are on unless
DJANGO_SECURE=0 says a proxy in front does not speak HTTPS.
"""

import os

from django.core.exceptions import ImproperlyConfigured

from worldsite.settings.base import *  # noqa: F403
from worldsite.settings.base import SITE_URL, env_bool, env_list, tls_switches

if env_bool("DJANGO_DEBUG", False):
    raise ImproperlyConfigured("worldsite.settings.production never runs with DJANGO_DEBUG on.")
DEBUG = False

SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY", "")
if len(SECRET_KEY) < 32:
    raise ImproperlyConfigured("worldsite.settings.production needs DJANGO_SECRET_KEY (32+ chars).")

ALLOWED_HOSTS = env_list("DJANGO_ALLOWED_HOSTS", [])
if not ALLOWED_HOSTS:
    raise ImproperlyConfigured("worldsite.settings.production needs DJANGO_ALLOWED_HOSTS.")

SECURE = env_bool("DJANGO_SECURE", True)
(
    SESSION_COOKIE_SECURE,
    CSRF_COOKIE_SECURE,
    SECURE_SSL_REDIRECT,
    SECURE_HSTS_SECONDS,
    SECURE_PROXY_SSL_HEADER,
) = tls_switches(secure=SECURE, site_url=SITE_URL)
