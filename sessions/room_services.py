"""Write-side logic for live rooms: opening a session to an audience, who may watch, the
audience's prompt queue and its rounds. Every change is announced to the room's pages
(sessions.notify, after the transaction commits); a prompt that is applied goes to the session's
engine worker as the player's own sentence would.

A room costs nothing of the engine's capacity or the quota: it is one session, watched."""

from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone

from sessions import room_selectors
from sessions.models import AudiencePrompt, LiveRoom, PlaySession, RoomViewer
from sessions.room_selectors import ROUND_SECONDS

MAX_PENDING_PER_VIEWER = 3
MAX_PENDING_PER_ROOM = 40
MAX_INVITES_PER_CALL = 50


class RoomRefused(Exception):
    """A room change that is not allowed; the message says why, for the person who asked."""


def _announce(room: LiveRoom) -> None:
    from sessions import notify  # channel-layer plumbing, as in services.session_finish

    transaction.on_commit(lambda: notify.room_changed(room=room))


def room_open(
    *,
    session: PlaySession,
    visibility: str | None = None,
    invite: list[str] | None = None,
) -> LiveRoom:
    """Open `session` as a live room (or change its room): the share link, who may watch.
    `invite` names members (usernames) who may watch a private room; unknown names are
    refused, nothing is changed then."""
    if not session.is_active:
        raise RoomRefused("This session is over; start a new one to open a live room.")
    if visibility is not None and visibility not in LiveRoom.Visibility.values:
        raise RoomRefused("Visibility must be 'private' or 'listed'.")
    names = sorted({name.strip() for name in invite or [] if name.strip()})
    if len(names) > MAX_INVITES_PER_CALL:
        raise RoomRefused(f"Invite at most {MAX_INVITES_PER_CALL} members at once.")
    members = list(User.objects.filter(username__in=names, is_active=True))
    unknown = sorted(set(names) - {member.username for member in members})
    if unknown:
        raise RoomRefused(f"No member is called {', '.join(unknown)}.")
    with transaction.atomic():
        room, _ = LiveRoom.objects.get_or_create(session=session)
        if visibility is not None and visibility != room.visibility:
            room.visibility = visibility
            room.save(update_fields=["visibility"])
        invited = [member for member in members if member.pk != session.owner_id]
        room.invited.add(*invited)
        room.removed.remove(*invited)  # inviting someone again takes them back
        _announce(room)
    return room


def room_set_steering(*, room: LiveRoom, mode: str) -> LiveRoom:
    """`host`: the host applies prompts; `audience`: every ROUND_SECONDS the most-supported
    waiting prompt is applied (rounds count from the switch)."""
    if mode not in LiveRoom.Steering.values:
        raise RoomRefused("Steering must be 'host' or 'audience'.")
    room.steering = mode
    room.round_started_at = timezone.now() if mode == LiveRoom.Steering.AUDIENCE else None
    room.save(update_fields=["steering", "round_started_at"])
    _announce(room)
    return room


def room_viewer_joined(*, room: LiveRoom, user: User, channel: str) -> None:
    RoomViewer.objects.update_or_create(
        channel=channel[:200], defaults={"room": room, "user": user}
    )
    _announce(room)


def room_viewer_left(*, room: LiveRoom, channel: str) -> None:
    if RoomViewer.objects.filter(channel=channel[:200]).delete()[0]:
        _announce(room)


def room_viewer_gone(*, channel: str) -> None:
    """A viewer's connection died without a goodbye (the engine worker saw it): whichever room
    counted it counts it no more."""
    viewer = RoomViewer.objects.select_related("room").filter(channel=channel[:200]).first()
    if viewer is not None:
        room_viewer_left(room=viewer.room, channel=channel)


def room_remove_viewer(*, room: LiveRoom, username: str) -> User:
    """The host removes a spectator: every connection of theirs is closed (the pages and the
    engine worker are told) and they cannot come back, unless invited again."""
    viewer = User.objects.filter(username=username).first()
    if viewer is None:
        raise RoomRefused(f"No member is called {username}.")
    if viewer.pk == room.session.owner_id:
        raise RoomRefused("The host cannot remove themselves; end the session instead.")
    from sessions import notify

    with transaction.atomic():
        room.removed.add(viewer)
        room.invited.remove(viewer)
        RoomViewer.objects.filter(room=room, user=viewer).delete()
        session = room.session
        transaction.on_commit(lambda: notify.room_viewer_removed(session=session, viewer=viewer))
        _announce(room)
    return viewer


def room_prompt_submit(*, room: LiveRoom, author: User, text: str) -> AudiencePrompt:
    """A spectator's sentence (already validated by sessions.protocol) joins the queue, with
    its author's support."""
    if not room_selectors.room_is_open(room=room):
        raise RoomRefused("This live room has ended.")
    pending = AudiencePrompt.objects.filter(room=room, status=AudiencePrompt.Status.PENDING)
    if pending.filter(author=author).count() >= MAX_PENDING_PER_VIEWER:
        raise RoomRefused(
            f"You have {MAX_PENDING_PER_VIEWER} prompts waiting; wait until one is applied."
        )
    with transaction.atomic():
        prompt = AudiencePrompt.objects.create(room=room, author=author, text=text[:300])
        prompt.supporters.add(author)
        overflow = pending.order_by("-created_at").values_list("pk", flat=True)[
            MAX_PENDING_PER_ROOM:
        ]
        AudiencePrompt.objects.filter(pk__in=list(overflow)).update(
            status=AudiencePrompt.Status.DROPPED
        )
        _announce(room)
    return prompt


def room_prompt_support(*, room: LiveRoom, user: User, prompt_id: int) -> bool:
    """`user` supports a waiting prompt (once; supporting again changes nothing)."""
    prompt = AudiencePrompt.objects.filter(
        room=room, pk=prompt_id, status=AudiencePrompt.Status.PENDING
    ).first()
    if prompt is None:
        return False
    prompt.supporters.add(user)
    _announce(room)
    return True


def room_prompt_apply(*, room: LiveRoom, prompt_id: int, by: str) -> AudiencePrompt | None:
    """Apply a waiting prompt: it goes to the engine as the player's sentence would, and every
    page in the room is told which prompt changed the world and who sent it. None if it is not
    waiting any more (applied by someone else a moment earlier, or dropped)."""
    from sessions import notify

    session = room.session
    if not session.is_active:
        return None
    now = timezone.now()
    with transaction.atomic():
        claimed = AudiencePrompt.objects.filter(
            room=room, pk=prompt_id, status=AudiencePrompt.Status.PENDING
        ).update(status=AudiencePrompt.Status.APPLIED, applied_by=by, applied_at=now)
        if not claimed:
            return None
        prompt = AudiencePrompt.objects.select_related("author").get(pk=prompt_id)
        transaction.on_commit(lambda: notify.room_prompt_applied(session=session, prompt=prompt))
        _announce(room)
    return prompt


def room_round_tick(*, room: LiveRoom) -> AudiencePrompt | None:
    """Audience steering: if the room's round is over, apply its most-supported waiting prompt
    (ties: the oldest) and start the next round. Any of the room's consumers may call this
    every second; the round's end is claimed by one compare-and-set, so it is applied once."""
    ends_at = room_selectors.round_ends_at(room=room)
    now = timezone.now()
    if ends_at is None or ends_at > now:
        return None
    claimed = LiveRoom.objects.filter(
        pk=room.pk,
        steering=LiveRoom.Steering.AUDIENCE,
        round_started_at=room.round_started_at,
    ).update(round_started_at=now)
    if not claimed:
        return None
    room.round_started_at = now
    winner = room_selectors.room_pending_prompts(room=room).first()
    if winner is None:
        _announce(room)  # the pages' round clock starts again
        return None
    return room_prompt_apply(room=room, prompt_id=winner.pk, by=AudiencePrompt.AppliedBy.AUDIENCE)


__all__ = ["ROUND_SECONDS", "RoomRefused"]
