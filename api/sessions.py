"""Play sessions through the API: start one (the site's own reservation rules and rate limits),
read it, end it, and send it inputs. Everything here translates and delegates to
sessions.services / selectors, like the play page's views."""

import base64
import binascii
import json
from uuid import UUID

from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.core.files.base import ContentFile
from django.http import HttpRequest, HttpResponse
from django.urls import reverse
from ninja import Router, Status

from api.limits import enforce_rate_limit
from api.problems import Problem
from api.schemas import InputsAccepted, SessionCreateIn, SessionOut
from gallery import selectors as gallery_selectors
from gallery.validators import validate_reference_image
from sessions import notify, selectors, services
from sessions.models import PlaySession
from sessions.protocol import ProtocolError, engine_event, parse_data_message
from sessions.services import Decision, Refusal
from worldsite.engine_gateway.pictures import shrink_to_png

router = Router(tags=["sessions"])

MAX_INPUTS_PER_CALL = 50
ENDED_BY_API_REASON = "Ended through the API."
# A refused reservation's status: the caller's own limits are 403, a full house is 429.
REFUSAL_STATUS = {
    Refusal.NOT_PUBLISHED: (403, "quota"),
    Refusal.CONCURRENT_LIMIT: (403, "quota"),
    Refusal.DAILY_LIMIT: (403, "quota"),
    Refusal.QUEUE_FULL: (429, "busy"),
}
QUEUE_FULL_RETRY_S = 60


def session_out(request: HttpRequest, session: PlaySession) -> SessionOut:
    position = selectors.queue_position(session=session)
    session_id = str(session.pk)
    return SessionOut(
        id=session.pk,
        world=session.world.slug,
        state=session.state,
        queue_position=position,
        eta_s=selectors.queue_eta_seconds(position=position) if position else None,
        seconds_used=session.seconds_used,
        seconds_left=selectors.session_seconds_left(session=session),
        end_reason=session.end_reason,
        created_at=session.created_at,
        whep_url=request.build_absolute_uri(reverse("api:session_whep", args=[session_id])),
        input_url=request.build_absolute_uri(reverse("api:session_input", args=[session_id])),
        events_url=request.build_absolute_uri(reverse("api:session_events", args=[session_id])),
    )


def caller(request: HttpRequest) -> User:
    """The member the call's key belongs to (api.auth.ApiKeyAuth put it there)."""
    user = getattr(request, "auth", None)
    assert isinstance(user, User), "an API operation ran without ApiKeyAuth"
    return user


def owned_session(request: HttpRequest, session_id: UUID) -> PlaySession:
    """The caller's session; someone else's answers exactly like a missing one (ids don't leak)."""
    session = selectors.session_get_for_owner(session_id=str(session_id), owner=caller(request))
    if session is None:
        raise Problem(404, "You have no play session with this id.")
    return session


def _reference_png(encoded: str) -> bytes:
    try:
        raw = base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError) as error:
        raise Problem(
            422, "'reference_image' is not valid base64.", kind="invalid-request"
        ) from error
    try:
        validate_reference_image(ContentFile(raw, name="reference"))
    except ValidationError as error:
        raise Problem(422, error.messages[0], kind="invalid-request") from error
    return shrink_to_png(ContentFile(raw))[0]


@router.post(
    "/",
    response={201: SessionOut},
    url_name="sessions",
    summary="Start a session",
    openapi_extra={
        "responses": {
            403: {"description": "Refused by your quota"},
            429: {"description": "Rate-limited or the queue is full"},
        }
    },
)
def session_create(request: HttpRequest, body: SessionCreateIn, response: HttpResponse):
    """Reserve a world for play under your quota: admitted (`starting`), or `queued` with a
    position. Open `events_url` next: it starts the world and reports what happens."""
    enforce_rate_limit("play_start", request)
    world = gallery_selectors.world_get_published(slug=body.world)
    if world is None:
        raise Problem(422, f"No published world is called {body.world!r}.", kind="invalid-request")
    reference_png = _reference_png(body.reference_image) if body.reference_image else None
    reservation = services.session_reserve(
        user=caller(request), world=world, seed=body.seed, reference_png=reference_png
    )
    if reservation.decision == Decision.REFUSE:
        status, kind = REFUSAL_STATUS[reservation.refusal or Refusal.NOT_PUBLISHED]
        headers = {"Retry-After": str(QUEUE_FULL_RETRY_S)} if status == 429 else None
        raise Problem(status, reservation.reason, kind=kind, headers=headers)
    session = reservation.session
    assert session is not None
    response["Location"] = reverse("api:session", args=[str(session.pk)])
    return Status(201, session_out(request, session))


@router.get("/{session_id}/", response=SessionOut, url_name="session", summary="Read a session")
def session_detail(request: HttpRequest, session_id: UUID) -> SessionOut:
    return session_out(request, owned_session(request, session_id))


@router.delete("/{session_id}/", response=SessionOut, summary="End a session")
def session_delete(request: HttpRequest, session_id: UUID) -> SessionOut:
    """End the session now (a session already over is returned as it is)."""
    session = owned_session(request, session_id)
    services.session_finish(session=session, reason=ENDED_BY_API_REASON)
    session.refresh_from_db()
    return session_out(request, session)


INPUT_BODY_SCHEMA = {
    "oneOf": [
        {"$ref": "#/components/schemas/InputMessage"},
        {
            "type": "array",
            "items": {"$ref": "#/components/schemas/InputMessage"},
            "maxItems": MAX_INPUTS_PER_CALL,
        },
    ]
}


@router.post(
    "/{session_id}/inputs/",
    response={202: InputsAccepted},
    url_name="session_input",
    summary="Send inputs",
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": INPUT_BODY_SCHEMA}},
        }
    },
)
def session_input(request: HttpRequest, session_id: UUID):
    """One input message or a list of up to 50: the play page's data-channel messages. All are
    checked before any is sent; one bad message refuses the call (422, with its `index`)."""
    session = owned_session(request, session_id)
    enforce_rate_limit("api_input", request)
    messages = _parsed_inputs(request.body)
    if session.state != PlaySession.State.LIVE or not session.worker_channel:
        # (before `live` the engine is still opening the world, and an input would be lost)
        raise Problem(
            409,
            f"The session is {session.state}; inputs are taken while it is live.",
            kind="not-running",
        )
    ids = services.session_input_ids(session=session, count=len(messages))
    notify.engine_inputs(
        session=session,
        events=[(seq, engine_event(m)) for seq, m in zip(ids, messages, strict=True)],
    )
    return Status(202, InputsAccepted(ids=ids))


def _parsed_inputs(body: bytes) -> list[dict]:
    try:
        payload = json.loads(body)
    except (ValueError, RecursionError) as error:
        raise Problem(400, "The body is not valid JSON.") from error
    items = payload if isinstance(payload, list) else [payload]
    if not 1 <= len(items) <= MAX_INPUTS_PER_CALL:
        raise Problem(
            422,
            f"Send between 1 and {MAX_INPUTS_PER_CALL} inputs in one call.",
            kind="invalid-request",
        )
    parsed = []
    for index, item in enumerate(items):
        try:
            parsed.append(parse_data_message(json.dumps(item)))
        except ProtocolError as error:
            raise Problem(
                422, error.message, kind="invalid-input", index=index, code=error.code
            ) from error
    return parsed
