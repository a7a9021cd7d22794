"""Read-side queries for live rooms: who may watch, and what a room's pages show."""

from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

from django.contrib.auth.models import User
from django.db.models import Count, QuerySet
from django.utils import timezone

from sessions.models import AudiencePrompt, LiveRoom, PlaySession, RoomViewer

ROUND_SECONDS = 10  # audience steering: one prompt applied per round
QUEUE_SHOWN = 20  # pending prompts a room's pages list


class RoomAccess(StrEnum):
    HOST = "host"
    VIEWER = "viewer"
    PRIVATE = "private"  # a private room, and this member was not invited
    REMOVED = "removed"  # the host removed this member


ACCESS_REFUSALS = {
    RoomAccess.PRIVATE: "This live room is private: only members the host invited can watch.",
    RoomAccess.REMOVED: "The host removed you from this live room.",
}


def room_get(*, code: str) -> LiveRoom | None:
    return (
        LiveRoom.objects.filter(code=code)
        .select_related("session__owner", "session__world")
        .first()
    )


def room_for_session(*, session: PlaySession) -> LiveRoom | None:
    return LiveRoom.objects.filter(session=session).first()


def room_access(*, room: LiveRoom, user: User) -> RoomAccess:
    if room.session.owner_id == user.pk:
        return RoomAccess.HOST
    if room.removed.filter(pk=user.pk).exists():
        return RoomAccess.REMOVED
    if room.visibility == LiveRoom.Visibility.LISTED or room.invited.filter(pk=user.pk).exists():
        return RoomAccess.VIEWER
    return RoomAccess.PRIVATE


def room_is_open(*, room: LiveRoom) -> bool:
    """A room is open while its session runs."""
    return room.session.is_active


def rooms_live_now() -> QuerySet[LiveRoom]:
    """Listed rooms whose session is live: the gallery's Live now strip."""
    return LiveRoom.objects.filter(
        visibility=LiveRoom.Visibility.LISTED, session__state=PlaySession.State.LIVE
    ).select_related("session__owner", "session__world")


def room_viewer_names(*, room: LiveRoom) -> list[str]:
    """Spectators connected now (each once, however many tabs), the host not counted."""
    return list(
        RoomViewer.objects.filter(room=room)
        .exclude(user_id=room.session.owner_id)
        .values_list("user__username", flat=True)
        .distinct()
        .order_by("user__username")
    )


def room_pending_prompts(*, room: LiveRoom) -> QuerySet[AudiencePrompt]:
    """The queue, best supported first, then oldest first (the order a round picks in)."""
    return (
        AudiencePrompt.objects.filter(room=room, status=AudiencePrompt.Status.PENDING)
        .annotate(support=Count("supporters"))
        .select_related("author")
        .order_by("-support", "created_at", "id")
    )


def round_ends_at(*, room: LiveRoom) -> datetime | None:
    if room.steering != LiveRoom.Steering.AUDIENCE or room.round_started_at is None:
        return None
    return room.round_started_at + timedelta(seconds=ROUND_SECONDS)


def prompt_summary(prompt: AudiencePrompt) -> dict[str, Any]:
    return {
        "id": prompt.pk,
        "text": prompt.text,
        "author": prompt.author.username,
        "support": getattr(prompt, "support", None) or prompt.supporters.count(),
        "applied_by": prompt.applied_by,
    }


def room_state(*, room: LiveRoom) -> dict[str, Any]:
    """Everything a room's pages show, as one JSON-able dict (sent on every change)."""
    viewers = room_viewer_names(room=room)
    applied = (
        AudiencePrompt.objects.filter(room=room, status=AudiencePrompt.Status.APPLIED)
        .select_related("author")
        .order_by("-applied_at")
        .first()
    )
    ends_at = round_ends_at(room=room)
    return {
        "room": room.code,
        "visibility": room.visibility,
        "steering": room.steering,
        "viewer_count": len(viewers),
        "viewers": viewers,
        "queue": [prompt_summary(p) for p in room_pending_prompts(room=room)[:QUEUE_SHOWN]],
        "last_applied": prompt_summary(applied) if applied else None,
        "round_ends_in": (
            max(0, round((ends_at - timezone.now()).total_seconds())) if ends_at else None
        ),
    }
