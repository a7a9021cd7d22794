"""Many players pressing Play at the same instant must never push the site past a limit."""

import threading
from collections import Counter

import pytest
from django.db import connection

from sessions import services
from sessions.models import PlaySession
from sessions.services import Decision
from tests.factories import UserFactory, WorldFactory

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

CAPACITY = 3
QUEUE_MAX = 4
PER_USER = 2
PLAYERS = 6
ATTEMPTS_PER_PLAYER = 4  # 24 simultaneous reservations


@pytest.fixture(autouse=True)
def _require_postgres():
    if connection.vendor != "postgresql":
        pytest.skip("set DATABASE_URL to a PostgreSQL database to run the concurrency test")


def test_concurrent_reservations_never_exceed_any_limit(settings):
    settings.ENGINE_CAPACITY = CAPACITY
    settings.QUEUE_MAX_LENGTH = QUEUE_MAX
    settings.QUOTA_CONCURRENT_SESSIONS = PER_USER
    world = WorldFactory()
    players = UserFactory.create_batch(PLAYERS)
    attempts = [player for player in players for _ in range(ATTEMPTS_PER_PLAYER)]
    start = threading.Barrier(len(attempts))
    results: list = []
    errors: list = []

    def reserve(player) -> None:
        try:
            start.wait(timeout=30)
            results.append(services.session_reserve(user=player, world=world))
        except Exception as exc:  # surfaced by the assertion below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=reserve, args=(player,)) for player in attempts]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)

    assert errors == []
    assert len(results) == len(attempts)
    decisions = Counter(result.decision for result in results)
    sessions = PlaySession.objects.all()
    running = sessions.filter(state__in=PlaySession.RUNNING_STATES).count()
    queued = sessions.filter(state=PlaySession.State.QUEUED).count()

    assert running == CAPACITY == decisions[Decision.ADMIT]
    assert queued == QUEUE_MAX == decisions[Decision.QUEUE]
    assert decisions[Decision.REFUSE] == len(attempts) - CAPACITY - QUEUE_MAX
    per_user = Counter(sessions.values_list("owner_id", flat=True))
    assert max(per_user.values()) <= PER_USER
    positions = sorted(r.queue_position for r in results if r.decision == Decision.QUEUE)
    assert positions == list(range(1, QUEUE_MAX + 1))
