"""Rate limits: the one declared table, and the decorator that applies an entry to a view.

Counting is django-ratelimit's (fixed windows in Django's cache: Redis when REDIS_URL is set, so
every daphne process shares the counts; the process's memory in the embedded default, where
there is one process). Only POSTs count. Each entry limits per address and, where a request
names one, per account or e-mail address, so neither a botnet on one account nor one address
across many accounts gets through. Over a limit: 429 with Retry-After and a message that says
when to try again.
"""

from collections.abc import Callable
from dataclasses import dataclass
from functools import wraps
from typing import Any

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django_ratelimit.core import get_usage


def _posted(field: str) -> Callable[[str, HttpRequest], str]:
    def key(group: str, request: HttpRequest) -> str:
        return request.POST.get(field, "").strip().lower()

    return key


def _account(group: str, request: HttpRequest) -> str:
    return str(request.user.pk) if request.user.is_authenticated else ""


@dataclass(frozen=True)
class Limit:
    key: str | Callable[[str, HttpRequest], str]  # django-ratelimit key: "ip" or a function
    rate: str  # "5/m", "10/h", "20/10m"


PER_ADDRESS = "ip"

# view name -> limits, each counted separately; the first one exceeded answers.
RATE_LIMITS: dict[str, tuple[Limit, ...]] = {
    "login": (Limit(PER_ADDRESS, "20/10m"), Limit(_posted("username"), "8/10m")),
    "password_reset": (Limit(PER_ADDRESS, "6/h"), Limit(_posted("email"), "3/h")),
    "beta_apply": (Limit(PER_ADDRESS, "5/h"), Limit(_posted("email"), "3/h")),
    "play_image": (Limit(PER_ADDRESS, "40/m"), Limit(_account, "20/m")),
    "play_start": (Limit(PER_ADDRESS, "30/m"), Limit(_account, "10/m")),
    "export_start": (Limit(PER_ADDRESS, "30/h"), Limit(_account, "20/h")),
    # Opening a live room or changing who may watch it (the play page and the API's room call).
    "room_open": (Limit(PER_ADDRESS, "30/m"), Limit(_account, "10/m")),
    # The developer API (api/): starting a session counts as "play_start" above; each call to
    # a session's input_url (up to 50 inputs) counts here.
    "api_input": (Limit(PER_ADDRESS, "1200/m"), Limit(_account, "600/m")),
    "api_whep": (Limit(PER_ADDRESS, "60/m"), Limit(_account, "30/m")),
}
JSON_VIEWS = {"play_image", "room_open"}


def retry_after(name: str, request: HttpRequest) -> int | None:
    """Count this request against `name`'s limits; seconds to wait if one is exceeded."""
    wait = None
    for index, limit in enumerate(RATE_LIMITS[name]):
        group = f"{name}.{index}"
        if callable(limit.key) and not limit.key(group, request):
            continue  # nothing to count by (anonymous, or the field left empty)
        usage = get_usage(
            request, group=group, key=limit.key, rate=limit.rate, method="POST", increment=True
        )
        if usage is not None and usage["should_limit"]:
            wait = max(wait or 1, usage["time_left"], 1)
    return wait


def retry_message(wait: int) -> str:
    minutes = (wait + 59) // 60
    when = f"{wait} seconds" if wait < 120 else f"{minutes} minutes"
    return f"Too many attempts. Please wait {when} and try again."


def too_many_requests(request: HttpRequest, name: str, wait: int) -> HttpResponse:
    message = retry_message(wait)
    response: HttpResponse
    if name in JSON_VIEWS:
        response = JsonResponse({"error": message}, status=429)
    else:
        response = render(request, "429.html", {"message": message}, status=429)
    response["Retry-After"] = str(wait)
    return response


def rate_limited(name: str) -> Callable:
    """Apply RATE_LIMITS[name] to a view (function, or a class-based view's as_view())."""
    if name not in RATE_LIMITS:
        raise KeyError(f"{name!r} is not in RATE_LIMITS")

    def decorate(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
        @wraps(view)
        def limited(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            if request.method == "POST":
                wait = retry_after(name, request)
                if wait is not None:
                    return too_many_requests(request, name, wait)
            return view(request, *args, **kwargs)

        return limited

    return decorate
