"""Read-side queries for play sessions and quotas."""

from dataclasses import dataclass
from datetime import UTC, datetime

from django.conf import settings
from django.contrib.auth.models import User
from django.db.models import QuerySet
from django.utils import timezone

from sessions.models import PlaySession, SessionExport, UserQuota


@dataclass(frozen=True)
class Quota:
    play_seconds_per_day: int
    concurrent_sessions: int
    max_session_seconds: int
    exports_per_day: int


@dataclass(frozen=True)
class QuotaUsage:
    quota: Quota
    play_seconds_today: int
    active_sessions: int
    sessions_today: int
    exports_today: int

    @property
    def play_seconds_left(self) -> int:
        return max(0, self.quota.play_seconds_per_day - self.play_seconds_today)

    @property
    def play_percent(self) -> int:
        if self.quota.play_seconds_per_day == 0:
            return 100
        return min(100, round(100 * self.play_seconds_today / self.quota.play_seconds_per_day))


def quota_for(*, user: User) -> Quota:
    """The user's limits: their overrides where set, the site-wide defaults elsewhere."""
    override = UserQuota.objects.filter(user=user).first()

    def pick(field: str, default: int) -> int:
        value = getattr(override, field, None) if override else None
        return default if value is None else value

    return Quota(
        play_seconds_per_day=pick("play_seconds_per_day", settings.QUOTA_PLAY_SECONDS_PER_DAY),
        concurrent_sessions=pick("concurrent_sessions", settings.QUOTA_CONCURRENT_SESSIONS),
        max_session_seconds=pick("max_session_seconds", settings.QUOTA_MAX_SESSION_SECONDS),
        exports_per_day=pick("exports_per_day", settings.QUOTA_EXPORTS_PER_DAY),
    )


def day_start(now: datetime | None = None) -> datetime:
    """Quotas reset at midnight UTC."""
    now = now or timezone.now()
    return now.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)


def play_seconds_today(*, user: User, now: datetime | None = None) -> int:
    """Seconds played in sessions that went live today, counting live ones up to now."""
    now = now or timezone.now()
    total = 0
    sessions = PlaySession.objects.filter(owner=user, started_at__gte=day_start(now))
    for state, started_at, seconds_used in sessions.values_list(
        "state", "started_at", "seconds_used"
    ):
        if state == PlaySession.State.LIVE and started_at is not None:
            total += max(0, int((now - started_at).total_seconds()))
        else:
            total += seconds_used
    return total


def quota_usage(*, user: User) -> QuotaUsage:
    now = timezone.now()
    owned = PlaySession.objects.filter(owner=user)
    return QuotaUsage(
        quota=quota_for(user=user),
        play_seconds_today=play_seconds_today(user=user, now=now),
        active_sessions=owned.filter(state__in=PlaySession.ACTIVE_STATES).count(),
        sessions_today=owned.filter(created_at__gte=day_start(now)).count(),
        exports_today=exports_today(user=user, now=now),
    )


def exports_today(*, user: User, now: datetime | None = None) -> int:
    """Exports that count against today's quota (failed ones are given back)."""
    return (
        SessionExport.objects.filter(owner=user, created_at__gte=day_start(now))
        .exclude(status=SessionExport.Status.FAILED)
        .count()
    )


def export_list_for_owner(*, owner: User) -> QuerySet[SessionExport]:
    return SessionExport.objects.filter(owner=owner).select_related("session__world")


def session_list_for_owner(*, owner: User) -> QuerySet[PlaySession]:
    return PlaySession.objects.filter(owner=owner).select_related("world")


def running_session_count() -> int:
    return PlaySession.objects.filter(state__in=PlaySession.RUNNING_STATES).count()


def queued_sessions() -> QuerySet[PlaySession]:
    """Waiting sessions, first come first served."""
    return PlaySession.objects.filter(state=PlaySession.State.QUEUED).order_by("created_at", "id")


def queue_position(*, session: PlaySession) -> int | None:
    """1 for the next session to be admitted; None when the session is not waiting."""
    if session.state != PlaySession.State.QUEUED:
        return None
    ahead = PlaySession.objects.filter(
        state=PlaySession.State.QUEUED, created_at__lt=session.created_at
    ).count()
    return ahead + 1


def queue_eta_seconds(*, position: int) -> int:
    """Rough wait for the `position`-th queued session: when enough running sessions run out.

    Running sessions end at the latest when their allowed time is up, so this is an upper bound
    unless players leave early (they usually do)."""
    now = timezone.now()
    remaining = sorted(
        max(0, allowed - int((now - (started or now)).total_seconds()))
        for allowed, started in PlaySession.objects.filter(
            state__in=PlaySession.RUNNING_STATES
        ).values_list("allowed_seconds", "started_at")
    )
    if not remaining:
        return 0
    rounds, index = divmod(position - 1, len(remaining))
    return remaining[index] + rounds * settings.QUOTA_MAX_SESSION_SECONDS


def session_get_for_owner(*, session_id: str, owner: User) -> PlaySession | None:
    return PlaySession.objects.filter(pk=session_id, owner=owner).select_related("world").first()


def session_seconds_left(*, session: PlaySession) -> int:
    """Play time this session still has: its allowed time, less what it has played so far."""
    if not session.is_active:
        return 0
    if session.state != PlaySession.State.LIVE or session.started_at is None:
        return session.allowed_seconds
    played = int((timezone.now() - session.started_at).total_seconds())
    return max(0, session.allowed_seconds - played)
