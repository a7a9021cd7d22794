"""The API guide at /api/: a server-rendered page built from the OpenAPI document itself, so
the list of operations on it can never drift from what the API serves."""

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse

from api.problems import PROBLEM_TYPES
from api.sessions import MAX_INPUTS_PER_CALL
from api.site import api

METHODS = ("get", "post", "delete")


def _operations() -> list[dict[str, str]]:
    schema = api.get_openapi_schema(path_prefix=reverse("api:api-root"))
    return [
        {
            "method": method.upper(),
            "path": path,
            "summary": operation.get("summary", ""),
            "description": operation.get("description", ""),
        }
        for path, item in schema["paths"].items()
        for method in METHODS
        if (operation := item.get(method))
    ]


def api_docs(request: HttpRequest) -> HttpResponse:
    context = {
        "operations": _operations(),
        "problem_types": PROBLEM_TYPES,
        "max_inputs": MAX_INPUTS_PER_CALL,
        "base_url": request.build_absolute_uri("/api/v1/"),
        "openapi_url": reverse("api:openapi-json"),
    }
    return render(request, "api/docs.html", context)
