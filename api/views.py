"""The API guide at /api/: a server-rendered page built from the OpenAPI document itself, so
the list of operations on it can never drift from what the API serves."""

import re

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

from api.problems import PROBLEM_TYPES
from api.sessions import MAX_INPUTS_PER_CALL
from api.site import api
from gallery import selectors as gallery_selectors

METHODS = ("get", "post", "delete")
EXAMPLE_WORLD = "misty-valley"  # the quick start's slug when no world is published yet


def inline_code(text: str) -> SafeString:
    """Docstrings and problem texts mark code with `backticks`; show it as <code>."""
    return mark_safe(re.sub(r"`([^`]+)`", r"<code>\1</code>", escape(text)))


def _operations() -> list[dict[str, str]]:
    schema = api.get_openapi_schema(path_prefix=reverse("api:api-root"))
    return [
        {
            "method": method.upper(),
            "path": path,
            "summary": operation.get("summary", ""),
            "description": inline_code(operation.get("description", "")),
        }
        for path, item in schema["paths"].items()
        for method in METHODS
        if (operation := item.get(method))
    ]


def api_docs(request: HttpRequest) -> HttpResponse:
    context = {
        "operations": _operations(),
        "problem_types": {kind: inline_code(text) for kind, text in PROBLEM_TYPES.items()},
        "example_world": getattr(gallery_selectors.world_list_published().first(), "slug", "")
        or EXAMPLE_WORLD,
        "max_inputs": MAX_INPUTS_PER_CALL,
        "base_url": request.build_absolute_uri("/api/v1/"),
        "openapi_url": reverse("api:openapi-json"),
    }
    return render(request, "api/docs.html", context)
