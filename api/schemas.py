"""The API's request and response bodies (pydantic, through django-ninja): what the OpenAPI
document describes. Input messages are not modelled here: they go through the play page's own
parser (sessions/protocol.py), the one definition of what an input may be."""

from datetime import datetime
from uuid import UUID

from ninja import Field, Schema

MAX_SEED = 2**31 - 1


class WorldOut(Schema):
    slug: str
    title: str
    description: str
    tags: list[str]
    theme: str
    thumbnail_url: str | None = Field(description="A still of the world; null until drawn.")


class WorldPage(Schema):
    items: list[WorldOut]
    count: int = Field(description="Published worlds in all pages.")
    page: int
    pages: int
    next: str | None = Field(description="The next page's URL; null on the last page.")


class SessionCreateIn(Schema):
    world: str = Field(description="The world's slug, from GET /api/v1/worlds/.", max_length=80)
    seed: int | None = Field(None, ge=0, le=MAX_SEED, description="Replaces the world's own seed.")
    reference_image: str | None = Field(
        None,
        description="A picture to steer the look: base64 PNG, JPEG or WebP, "
        "under the site's size limits.",
    )


class SessionOut(Schema):
    id: UUID
    world: str
    state: str = Field(description="queued | starting | live | ended | failed")
    queue_position: int | None = Field(description="1 = next to start; null unless queued.")
    eta_s: int | None = Field(description="Rough wait in seconds; null unless queued.")
    seconds_used: int
    seconds_left: int
    end_reason: str
    created_at: datetime
    whep_url: str = Field(description="POST an SDP offer here for video, audio and inputs.")
    input_url: str
    events_url: str


class InputsAccepted(Schema):
    ids: list[int] = Field(
        description="One per input, in order. The events stream's `inputs_applied` reports the "
        "highest id the engine has applied."
    )


class RoomIn(Schema):
    visibility: str | None = Field(
        None,
        description="`private` (only invited members watch; the default) or `listed` (any "
        "member, and the gallery's Live now strip shows it).",
        pattern="^(private|listed)$",
    )
    invite: list[str] = Field(
        default_factory=list,
        max_length=50,
        description="Usernames of members who may watch a private room.",
    )


class RoomOut(Schema):
    room: str = Field(description="The room's code, the last part of its share link.")
    url: str = Field(description="The share link: /live/<room>/, for logged-in members.")
    whep_url: str = Field(
        description="POST an SDP offer here (any key whose owner may watch) for the room's "
        "picture and sound; receive-only: viewers never move the player."
    )
    visibility: str
    steering: str = Field(description="host | audience")
    viewer_count: int
    invited: list[str]
