"""Write-side business logic for play sessions: reservations, the state machine, the queue.

Every decision that compares counts against limits runs under one reservation lock, so many
players pressing Play at once can never push the site past a limit.
"""

from dataclasses import dataclass
from datetime import timedelta
from enum import StrEnum

from django.conf import settings
from django.contrib.auth.models import User
from django.db import connection, transaction
from django.db.models import F
from django.utils import timezone

from gallery.models import World
from sessions import selectors
from sessions.models import PlaySession

State = PlaySession.State

ALLOWED_TRANSITIONS: dict[str, frozenset[str]] = {
    State.QUEUED: frozenset({State.STARTING, State.ENDED, State.FAILED}),
    State.STARTING: frozenset({State.LIVE, State.ENDED, State.FAILED}),
    State.LIVE: frozenset({State.ENDED, State.FAILED}),
    State.ENDED: frozenset(),
    State.FAILED: frozenset(),
}

# Any constant works; it names the one PostgreSQL advisory lock the reservation logic uses.
RESERVATION_LOCK_KEY = 0x57_6F_72_6C_64  # "World"


class IllegalTransition(Exception):
    """A state change the session state machine does not allow."""


class Decision(StrEnum):
    ADMIT = "admit"
    QUEUE = "queue"
    REFUSE = "refuse"


class Refusal(StrEnum):
    """Why a reservation was refused, for callers that answer differently (the API's status)."""

    NOT_PUBLISHED = "not_published"
    CONCURRENT_LIMIT = "concurrent_limit"
    DAILY_LIMIT = "daily_limit"
    QUEUE_FULL = "queue_full"


@dataclass(frozen=True)
class Reservation:
    decision: Decision
    session: PlaySession | None = None
    queue_position: int | None = None
    reason: str = ""
    refusal: Refusal | None = None


def _lock_reservations() -> None:
    """Serialize quota decisions until the surrounding transaction ends.

    PostgreSQL: a transaction-scoped advisory lock. SQLite: the settings open every transaction
    with BEGIN IMMEDIATE, which already takes the database's single write lock.
    """
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [RESERVATION_LOCK_KEY])


def _transition(session: PlaySession, to_state: str, *, reason: str = "") -> PlaySession:
    """Move a session to `to_state`, re-reading its state under a row lock first."""
    with transaction.atomic():
        locked = PlaySession.objects.select_for_update().get(pk=session.pk)
        if to_state not in ALLOWED_TRANSITIONS[locked.state]:
            raise IllegalTransition(
                f"A {locked.state} session cannot become {to_state} (session {locked.pk})."
            )
        now = timezone.now()
        locked.state = to_state
        if to_state == State.STARTING:
            locked.admitted_at = now
        if to_state == State.LIVE:
            locked.started_at = now
        if to_state in (State.ENDED, State.FAILED):
            locked.ended_at = now
            locked.end_reason = reason[:200]
            if locked.started_at:
                locked.seconds_used = max(0, int((now - locked.started_at).total_seconds()))
        locked.save()
    session.refresh_from_db()
    return session


def _admit(session: PlaySession) -> Reservation | None:
    """Admit a queued session if its owner still has play time; None when they have none."""
    usage = selectors.quota_usage(user=session.owner)
    allowed = min(usage.quota.max_session_seconds, usage.play_seconds_left)
    if allowed <= 0:
        return None
    session.allowed_seconds = allowed
    session.save(update_fields=["allowed_seconds"])
    _transition(session, State.STARTING)
    return Reservation(decision=Decision.ADMIT, session=session)


def _refusal(*, user: User, world: World) -> Reservation | None:
    if not world.is_published:
        return _refused(Refusal.NOT_PUBLISHED, "This world is not open for play right now.")
    usage = selectors.quota_usage(user=user)
    if usage.active_sessions >= usage.quota.concurrent_sessions:
        return _refused(
            Refusal.CONCURRENT_LIMIT,
            f"You already have {usage.active_sessions} session(s) running; your limit is "
            f"{usage.quota.concurrent_sessions}. End one to start another.",
        )
    if usage.play_seconds_left <= 0:
        return _refused(
            Refusal.DAILY_LIMIT, "You have used today's play time. It resets at midnight UTC."
        )
    return None


def _refused(refusal: Refusal, reason: str) -> Reservation:
    return Reservation(decision=Decision.REFUSE, reason=reason, refusal=refusal)


def _advance_queue_locked() -> None:
    """Admit waiting sessions, oldest first, while engine capacity is free (lock held)."""
    free = settings.ENGINE_CAPACITY - selectors.running_session_count()
    for session in selectors.queued_sessions().select_related("owner")[: max(free, 0) + 10]:
        if free <= 0:
            break
        if _admit(session) is None:
            _transition(session, State.ENDED, reason="Daily play time ran out while queued.")
            continue
        free -= 1


def session_reserve(
    *, user: User, world: World, seed: int | None = None, reference_png: bytes | None = None
) -> Reservation:
    """Decide whether `user` may play `world` now: admit, queue (with position) or refuse.

    `seed` and `reference_png` (already validated and shrunk) replace the world's own."""
    choices = {"seed": seed, "reference_png": reference_png}
    with transaction.atomic():
        _lock_reservations()
        _advance_queue_locked()
        refused = _refusal(user=user, world=world)
        if refused is not None:
            return refused

        waiting = selectors.queued_sessions().count()
        has_capacity = selectors.running_session_count() < settings.ENGINE_CAPACITY
        if not has_capacity or waiting:
            if waiting >= settings.QUEUE_MAX_LENGTH:
                return _refused(
                    Refusal.QUEUE_FULL,
                    "Every world engine is busy and the queue is full. "
                    "Please try again in a few minutes.",
                )
            session = PlaySession.objects.create(owner=user, world=world, **choices)
            return Reservation(
                decision=Decision.QUEUE,
                session=session,
                queue_position=selectors.queue_position(session=session),
            )

        session = PlaySession.objects.create(owner=user, world=world, **choices)
        admitted = _admit(session)
        assert admitted is not None  # _refusal checked the play time under the lock
        return admitted


def session_advance_queue() -> None:
    """Admit waiting sessions into freed capacity (after a session ends, or periodically)."""
    with transaction.atomic():
        _lock_reservations()
        _advance_queue_locked()


def session_mark_live(*, session: PlaySession) -> PlaySession:
    return _transition(session, State.LIVE)


def session_end(*, session: PlaySession, reason: str) -> PlaySession:
    """End a session normally (admin, player); raises IllegalTransition if it already finished."""
    if not session_finish(session=session, reason=reason):
        raise IllegalTransition(f"Session {session.pk} had already finished.")
    return session


# --- engine workers ------------------------------------------------------------------------------

STALE_WORKER_REASON = (
    "The world engine serving this session stopped responding. Everything recorded up to that "
    "moment is kept."
)


def _notify_session_closed(session: PlaySession, *, tell_worker: bool) -> None:
    """Tell the player's page (and the worker, unless it reported the end itself), once the
    transaction has committed."""
    from sessions import notify  # channel-layer plumbing; imported late to keep services light

    worker_channel = session.worker_channel if tell_worker else ""
    transaction.on_commit(
        lambda: notify.session_closed(
            session_id=str(session.pk),
            worker_channel=worker_channel,
            reason=session.end_reason,
            failed=session.state == State.FAILED,
        )
    )


def session_finish(
    *, session: PlaySession, reason: str, failed: bool = False, by_worker: bool = False
) -> bool:
    """The one way a session ends (player, worker, admin, housekeeping, shutdown): the state
    changes once, the page hears it once (`session.closed`), the worker is told to stop unless
    it is the one reporting the end (`by_worker`), and the queue moves up. False, and nothing
    sent, if the session had already finished."""
    try:
        _transition(session, State.FAILED if failed else State.ENDED, reason=reason)
    except IllegalTransition:
        return False
    _notify_session_closed(session, tell_worker=not by_worker)
    session_advance_queue()
    return True


def session_claim_worker(*, session_id: str, worker_name: str, worker_channel: str) -> bool:
    """A worker takes a starting session that no worker runs yet; False for anything else
    (a stale request for a session that ended, or one another worker already took)."""
    claimed = PlaySession.objects.filter(
        pk=session_id, state=State.STARTING, worker_name=""
    ).update(
        worker_name=worker_name[:100],
        worker_channel=worker_channel[:200],
        heartbeat_at=timezone.now(),
    )
    return claimed == 1


def sessions_heartbeat(*, session_ids: list[str]) -> int:
    """A worker says these sessions are alive."""
    return PlaySession.objects.filter(
        pk__in=session_ids, state__in=PlaySession.RUNNING_STATES
    ).update(heartbeat_at=timezone.now())


NEVER_CONNECTED_REASON = (
    "The world was never opened: the page that asked for it did not connect in time."
)


def sessions_fail_stale(*, older_than_seconds: float) -> int:
    """Fail running sessions whose worker has gone quiet (a crashed or killed worker).

    `heartbeat_at` is written by the worker from its own loop, so a web process whose event
    loop stalled for a while never makes a healthy session look dead here."""
    cutoff = timezone.now() - timedelta(seconds=older_than_seconds)
    stale = PlaySession.objects.filter(
        state__in=PlaySession.RUNNING_STATES, heartbeat_at__lt=cutoff
    )
    failed = 0
    for session in stale:
        failed += session_finish(session=session, reason=STALE_WORKER_REASON, failed=True)
    return failed


def sessions_end_abandoned(*, unclaimed_after_seconds: float, unseen_after_seconds: float) -> int:
    """End sessions no page will ever use, so their capacity and queue places come back.

    A session admitted to `starting` that no worker has claimed after `unclaimed_after_seconds`
    (its page closed before it asked for an engine, or it was promoted from the queue after its
    page had gone), and a queued session whose page never connected within
    `unseen_after_seconds` (Play pressed, then Back)."""
    now = timezone.now()
    unclaimed = PlaySession.objects.filter(
        state=State.STARTING,
        worker_name="",
        admitted_at__lt=now - timedelta(seconds=unclaimed_after_seconds),
    )
    unseen = PlaySession.objects.filter(
        state=State.QUEUED,
        page_seen_at__isnull=True,
        created_at__lt=now - timedelta(seconds=unseen_after_seconds),
    )
    ended = 0
    for session in [*unclaimed, *unseen]:
        ended += session_finish(session=session, reason=NEVER_CONNECTED_REASON, failed=True)
    return ended


def session_input_ids(*, session: PlaySession, count: int) -> list[int]:
    """Ids for `count` inputs about to be sent to the session's worker: increasing, never
    reused, so the worker's `last_seq` (the highest id applied) says which have been applied."""
    with transaction.atomic():
        PlaySession.objects.filter(pk=session.pk).update(
            api_inputs_sent=F("api_inputs_sent") + count
        )
        last = PlaySession.objects.values_list("api_inputs_sent", flat=True).get(pk=session.pk)
    return list(range(last - count + 1, last + 1))


def session_page_seen(*, session: PlaySession) -> None:
    """The player's page connected to this session (a queued session is not abandoned)."""
    PlaySession.objects.filter(pk=session.pk).update(page_seen_at=timezone.now())


def sessions_housekeeping() -> dict[str, int]:
    """The one periodic job of the session lifecycle: fail sessions whose worker went quiet,
    end abandoned ones, and admit the queue into whatever capacity that freed.

    Run every few seconds by each engine worker (embedded or not) and by Celery beat."""
    result = {
        "stale": sessions_fail_stale(older_than_seconds=settings.ENGINE_STALE_AFTER),
        "abandoned": sessions_end_abandoned(
            unclaimed_after_seconds=settings.ENGINE_ABANDONED_AFTER,
            unseen_after_seconds=settings.ENGINE_ABANDONED_AFTER,
        ),
    }
    session_advance_queue()
    return result
