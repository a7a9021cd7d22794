"""The Celery app. Without REDIS_URL tasks run eagerly in-process (the embedded default)."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "worldsite.settings")

app = Celery("worldsite")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
