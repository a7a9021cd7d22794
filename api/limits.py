"""The site's rate-limit table (worldsite/ratelimits.py) applied to API operations, answered as
a problem instead of the site's page."""

from django.http import HttpRequest

from api.problems import Problem
from worldsite.ratelimits import retry_after, retry_message


def enforce_rate_limit(name: str, request: HttpRequest) -> None:
    """Count this call against RATE_LIMITS[name]; raise a 429 problem when over a limit."""
    wait = retry_after(name, request)
    if wait is not None:
        raise Problem(
            429, retry_message(wait), kind="rate-limited", headers={"Retry-After": str(wait)}
        )
