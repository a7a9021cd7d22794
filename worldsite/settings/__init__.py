"""`worldsite.settings`: the base settings as they are (make run, .ci/run, manage.py).

worldsite.settings.base        everything the site reads from the environment
worldsite.settings.test        the test suite (pytest's DJANGO_SETTINGS_MODULE)
worldsite.settings.production  deployments: secure defaults, no local fallbacks
"""

from worldsite.settings.base import *  # noqa: F403
