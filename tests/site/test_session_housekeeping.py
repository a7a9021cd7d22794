"""The lifecycle's periodic job: silent workers, abandoned sessions, and the queue behind them."""

from datetime import timedelta

import pytest
from django.utils import timezone

from sessions import services
from sessions.models import PlaySession
from sessions.services import Decision
from tests.factories import UserFactory, WorldFactory

pytestmark = pytest.mark.django_db
State = PlaySession.State


@pytest.fixture(autouse=True)
def _limits(settings):
    settings.ENGINE_CAPACITY = 2
    settings.QUEUE_MAX_LENGTH = 20
    settings.ENGINE_ABANDONED_AFTER = 60
    settings.ENGINE_STALE_AFTER = 10


def _age(session: PlaySession, **fields_seconds_ago: int) -> None:
    now = timezone.now()
    PlaySession.objects.filter(pk=session.pk).update(
        **{field: now - timedelta(seconds=ago) for field, ago in fields_seconds_ago.items()}
    )


def test_abandoned_sessions_give_their_capacity_back_within_the_bound():
    """Two admitted sessions whose pages never connected (tab closed, double-click then Back)
    used to hold the whole site's capacity for ever; the next player queued behind them."""
    world = WorldFactory()
    abandoned = [services.session_reserve(user=UserFactory(), world=world) for _ in range(2)]
    assert all(r.decision == Decision.ADMIT for r in abandoned)
    gone_queued = services.session_reserve(user=UserFactory(), world=world)  # Play, then Back
    waiting = services.session_reserve(user=UserFactory(), world=world)
    services.session_page_seen(session=waiting.session)  # this one's page is open
    assert gone_queued.decision == waiting.decision == Decision.QUEUE

    # Before the bound nothing is touched: a slow page may still connect.
    assert services.sessions_housekeeping() == {"stale": 0, "abandoned": 0}
    for reservation in abandoned:
        _age(reservation.session, admitted_at=61)
    _age(gone_queued.session, created_at=61)
    _age(waiting.session, created_at=61)

    assert services.sessions_housekeeping() == {"stale": 0, "abandoned": 3}
    for reservation in [*abandoned, gone_queued]:
        reservation.session.refresh_from_db()
        assert reservation.session.state == State.FAILED
        assert "never opened" in reservation.session.end_reason
    waiting.session.refresh_from_db()
    assert waiting.session.state == State.STARTING  # admitted into the freed capacity
    assert services.session_reserve(user=UserFactory(), world=world).decision == Decision.ADMIT


def test_a_claimed_session_is_left_to_its_worker():
    """Once a worker has claimed a session, the worker's own connect timeout and heartbeats
    decide; the abandoned-session sweep does not."""
    reservation = services.session_reserve(user=UserFactory(), world=WorldFactory())
    assert services.session_claim_worker(
        session_id=str(reservation.session.pk), worker_name="w", worker_channel="c"
    )
    _age(reservation.session, admitted_at=600)
    assert services.sessions_housekeeping() == {"stale": 0, "abandoned": 0}


def test_a_silent_workers_sessions_fail_and_a_beating_ones_do_not():
    world = WorldFactory()
    quiet = services.session_reserve(user=UserFactory(), world=world).session
    beating = services.session_reserve(user=UserFactory(), world=world).session
    for session, name in ((quiet, "dead"), (beating, "alive")):
        services.session_claim_worker(
            session_id=str(session.pk), worker_name=name, worker_channel=name
        )
    _age(quiet, heartbeat_at=11)
    _age(beating, heartbeat_at=11)
    services.sessions_heartbeat(session_ids=[str(beating.pk)])

    assert services.sessions_housekeeping()["stale"] == 1
    quiet.refresh_from_db()
    beating.refresh_from_db()
    assert quiet.state == State.FAILED and "stopped responding" in quiet.end_reason
    assert beating.state == State.STARTING
