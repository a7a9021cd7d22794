"""Errors as RFC 9457 problem details (`application/problem+json`): every error the API answers,
whether raised in an operation, found by django-ninja (401, 422) or by Django itself (404 for an
unknown path, 405, 500), leaves in this one shape: type, title, status, detail."""

import json
from http import HTTPStatus
from typing import Any

from django.http import HttpRequest, HttpResponse

PROBLEM_CONTENT_TYPE = "application/problem+json"
API_PREFIX = "/api/v1/"
# Problem types the API defines; each `type` points at its explanation on the API guide.
PROBLEM_TYPES = {
    "unauthenticated": "Send a valid, unrevoked key as `Authorization: Bearer <key>`.",
    "invalid-request": "The body or a parameter failed validation; `errors` says where.",
    "invalid-input": "An input message failed the play page's validation; `index` says which.",
    "quota": "Your account's limits refuse this: `detail` says which and when it frees up.",
    "rate-limited": "Too many calls; wait `Retry-After` seconds.",
    "busy": "Every world engine is busy and the queue is full; try again in a few minutes.",
    "room-access": "The live room is private and you were not invited, or its host removed you.",
    "not-running": "The session is not running yet, or no longer: inputs need it live, media "
    "needs a world engine (follow `events_url`).",
}


class Problem(Exception):
    """Raised in an operation to answer with a problem; `kind` is one of PROBLEM_TYPES, or
    empty for a plain HTTP status (its type is then about:blank)."""

    def __init__(
        self,
        status: int,
        detail: str,
        *,
        kind: str = "",
        headers: dict[str, str] | None = None,
        **extensions: Any,
    ) -> None:
        super().__init__(detail)
        if kind and kind not in PROBLEM_TYPES:
            raise ValueError(f"unknown problem type {kind!r}")
        self.status, self.detail, self.kind = status, detail, kind
        self.headers = headers or {}
        self.extensions = extensions


def _status(code: int) -> HTTPStatus:
    """The standard status (a code Python does not know is described as its class: 4xx, 5xx)."""
    try:
        return HTTPStatus(code)
    except ValueError:
        return HTTPStatus.BAD_REQUEST if code < 500 else HTTPStatus.INTERNAL_SERVER_ERROR


def problem_type_url(kind: str) -> str:
    return f"/api/#problem-{kind}" if kind else "about:blank"


def problem_response(problem: Problem) -> HttpResponse:
    body = {
        "type": problem_type_url(problem.kind),
        "title": _status(problem.status).phrase,
        "status": problem.status,
        "detail": problem.detail,
        **problem.extensions,
    }
    response = HttpResponse(
        json.dumps(body), status=problem.status, content_type=PROBLEM_CONTENT_TYPE
    )
    for name, value in problem.headers.items():
        response[name] = value
    return response


DEFAULT_DETAILS = {
    401: PROBLEM_TYPES["unauthenticated"],
    404: "Nothing is at this address. The API's paths are listed at /api/v1/openapi.json.",
    405: "This address does not take that method.",
    500: "Something went wrong on our side. It has been logged; please try again.",
}


def as_problem(request: HttpRequest, response: HttpResponse) -> HttpResponse:
    """Turn an error response that did not come out of this module (Django's 404 page, a 405,
    a 500 page) into a problem, for API paths only."""
    if not request.path.startswith(API_PREFIX) or response.status_code < 400:
        return response
    if response.get("Content-Type", "").startswith(PROBLEM_CONTENT_TYPE):
        return response
    status = response.status_code
    detail = DEFAULT_DETAILS.get(status, _status(status).description)
    if status == 405 and response.get("Allow"):
        detail = f"This address takes {response['Allow']}."
    headers = {
        name: response[name] for name in ("Allow", "Retry-After") if response.has_header(name)
    }
    return problem_response(Problem(status, detail, headers=headers))
