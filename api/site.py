"""The API itself: one django-ninja NinjaAPI under /api/v1/, its routers, its error shape."""

import logging
from typing import Any

from django.http import Http404, HttpRequest, HttpResponse
from ninja import NinjaAPI
from ninja.errors import AuthenticationError, HttpError
from ninja.errors import ValidationError as NinjaValidationError

from api import events, rooms, sessions, whep, worlds
from api.auth import ApiKeyAuth
from api.problems import DEFAULT_DETAILS, Problem, problem_response
from sessions.protocol import MAX_CAMERA_DELTA, MAX_PROMPT_CHARS
from worldsite.engine_gateway.constants import KEY_BITS

logger = logging.getLogger(__name__)

# Components the operations refer to by name: the problem shape, and the play page's input
# messages as sessions/protocol.py accepts them (the parser stays the one judge).
EXTRA_COMPONENTS = {
    "Problem": {
        "type": "object",
        "description": "RFC 9457 problem details (application/problem+json).",
        "properties": {
            "type": {"type": "string"},
            "title": {"type": "string"},
            "status": {"type": "integer"},
            "detail": {"type": "string"},
        },
        "required": ["type", "title", "status", "detail"],
    },
    "InputMessage": {
        "oneOf": [
            {
                "type": "object",
                "title": "Movement and camera",
                "properties": {
                    "type": {"const": "input"},
                    "keys": {
                        "oneOf": [
                            {"type": "array", "items": {"enum": list(KEY_BITS)}},
                            {"type": "integer", "description": "bitmask"},
                        ],
                        "description": "The keys held down now (an empty list releases all).",
                    },
                    "yaw": {"type": "number", "maximum": MAX_CAMERA_DELTA},
                    "pitch": {"type": "number", "maximum": MAX_CAMERA_DELTA},
                },
                "required": ["type"],
            },
            {
                "type": "object",
                "title": "A sentence that changes the world",
                "properties": {
                    "type": {"const": "prompt"},
                    "text": {"type": "string", "maxLength": MAX_PROMPT_CHARS},
                },
                "required": ["type", "text"],
            },
        ]
    },
}


class WorldsiteApi(NinjaAPI):
    def get_openapi_schema(self, **kwargs: Any) -> Any:
        schema = super().get_openapi_schema(**kwargs)
        schema["components"].setdefault("schemas", {}).update(EXTRA_COMPONENTS)
        return schema


api = WorldsiteApi(
    title="Worldsite API",
    version="1",
    description="Play Worldsite's generated worlds from your own programs. Guide: /api/",
    auth=ApiKeyAuth(),
    urls_namespace="api",
    docs_url=None,  # the guide at /api/ is a server-rendered page (no CDN scripts, CSP-clean)
)
api.add_router("/worlds", worlds.router)
api.add_router("/sessions", sessions.router)
api.add_router("/sessions", events.router)
api.add_router("/sessions", whep.router)
api.add_router("", rooms.router)


@api.exception_handler(Problem)
def _problem(request: HttpRequest, exc: Problem) -> HttpResponse:
    return problem_response(exc)


@api.exception_handler(AuthenticationError)
def _unauthenticated(request: HttpRequest, exc: AuthenticationError) -> HttpResponse:
    detail = DEFAULT_DETAILS[401]
    if request.headers.get("Authorization"):
        detail = "This key is unknown or has been revoked. " + detail
    return problem_response(
        Problem(401, detail, kind="unauthenticated", headers={"WWW-Authenticate": "Bearer"})
    )


@api.exception_handler(NinjaValidationError)
def _invalid(request: HttpRequest, exc: NinjaValidationError) -> HttpResponse:
    errors = [
        {"where": _where(error.get("loc", [])), "message": error["msg"]} for error in exc.errors
    ]
    detail = "; ".join(f"{e['where']}: {e['message']}" for e in errors) or "Invalid request."
    return problem_response(Problem(422, detail, kind="invalid-request", errors=errors))


def _where(location: list | tuple) -> str:
    """pydantic's location without django-ninja's parts: ("body", "body", "seed") -> "seed"."""
    parts = [str(part) for part in location]
    if parts[:1] == ["body"]:
        parts = parts[2:] or ["body"]
    elif parts:
        parts = parts[1:] or parts
    return ".".join(parts)


@api.exception_handler(Http404)
def _not_found(request: HttpRequest, exc: Http404) -> HttpResponse:
    return problem_response(Problem(404, str(exc) or DEFAULT_DETAILS[404]))


@api.exception_handler(HttpError)
def _http_error(request: HttpRequest, exc: HttpError) -> HttpResponse:
    return problem_response(Problem(exc.status_code, str(exc)))


@api.exception_handler(Exception)
def _server_error(request: HttpRequest, exc: Exception) -> HttpResponse:
    logger.exception("API call %s %s failed", request.method, request.path, exc_info=exc)
    return problem_response(Problem(500, DEFAULT_DETAILS[500]))
