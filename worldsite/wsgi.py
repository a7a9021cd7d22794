"""WSGI entry point (management tooling only; the site is served by daphne via asgi.py)."""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "worldsite.settings")
application = get_wsgi_application()
