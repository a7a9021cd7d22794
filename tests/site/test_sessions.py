"""Play sessions: the state machine, reservations (admit / queue / refuse) and quotas."""

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from sessions import selectors, services
from sessions.models import PlaySession, UserQuota
from sessions.services import Decision, IllegalTransition
from tests.factories import UserFactory, WorldFactory

pytestmark = pytest.mark.django_db
State = PlaySession.State


@pytest.fixture(autouse=True)
def _limits(settings):
    settings.ENGINE_CAPACITY = 2
    settings.QUEUE_MAX_LENGTH = 3
    settings.QUOTA_CONCURRENT_SESSIONS = 1
    settings.QUOTA_PLAY_SECONDS_PER_DAY = 600
    settings.QUOTA_MAX_SESSION_SECONDS = 300


def _live(user, world) -> PlaySession:
    reservation = services.session_reserve(user=user, world=world)
    assert reservation.decision == Decision.ADMIT
    return services.session_mark_live(session=reservation.session)


def test_admitted_session_walks_the_state_machine(member, world):
    reservation = services.session_reserve(user=member, world=world)
    session = reservation.session
    assert reservation.decision == Decision.ADMIT
    assert session.state == State.STARTING
    assert session.allowed_seconds == 300
    services.session_mark_live(session=session)
    assert session.state == State.LIVE and session.started_at is not None
    PlaySession.objects.filter(pk=session.pk).update(
        started_at=timezone.now() - timedelta(seconds=42)
    )
    services.session_end(session=session, reason="Player left.")
    assert session.state == State.ENDED
    assert session.end_reason == "Player left."
    assert 42 <= session.seconds_used <= 44


@pytest.mark.parametrize(
    ("path", "illegal"),
    [
        ([], State.LIVE),  # a queued session must be admitted (starting) before it goes live
        ([State.STARTING, State.LIVE, State.ENDED], State.LIVE),
        ([State.STARTING, State.LIVE, State.FAILED], State.ENDED),
        ([State.ENDED], State.STARTING),
    ],
)
def test_illegal_transitions_raise_and_change_nothing(member, world, path, illegal):
    session = PlaySession.objects.create(owner=member, world=world)
    for state in path:
        services._transition(session, state, reason="test")
    with pytest.raises(IllegalTransition):
        services._transition(session, illegal)
    session.refresh_from_db()
    assert session.state == (path[-1] if path else State.QUEUED)


def test_concurrent_session_limit_refuses_with_reason(member, world):
    services.session_reserve(user=member, world=world)
    second = services.session_reserve(user=member, world=world)
    assert second.decision == Decision.REFUSE
    assert "already have 1 session" in second.reason
    assert PlaySession.objects.filter(owner=member).count() == 1


def test_override_raises_a_users_concurrent_limit(member, world):
    UserQuota.objects.create(user=member, concurrent_sessions=2)
    decisions = [services.session_reserve(user=member, world=world).decision for _ in range(3)]
    assert decisions == [Decision.ADMIT, Decision.ADMIT, Decision.REFUSE]


def test_daily_play_time_is_enforced(member, world):
    session = _live(member, world)
    PlaySession.objects.filter(pk=session.pk).update(
        started_at=timezone.now() - timedelta(seconds=600)
    )
    services.session_end(session=session, reason="done")
    refused = services.session_reserve(user=member, world=world)
    assert refused.decision == Decision.REFUSE
    assert "today's play time" in refused.reason


def test_allowed_length_is_capped_by_remaining_daily_time(member, world):
    session = _live(member, world)
    PlaySession.objects.filter(pk=session.pk).update(
        started_at=timezone.now() - timedelta(seconds=500)
    )
    services.session_end(session=session, reason="done")
    again = services.session_reserve(user=member, world=world)
    assert again.decision == Decision.ADMIT
    assert 99 <= again.session.allowed_seconds <= 100


def test_unpublished_world_is_refused(member):
    hidden = WorldFactory(is_published=False)
    refused = services.session_reserve(user=member, world=hidden)
    assert refused.decision == Decision.REFUSE
    assert "not open" in refused.reason


def test_full_engine_queues_in_order_and_advances_when_a_slot_frees(world):
    players = UserFactory.create_batch(5)
    results = [services.session_reserve(user=p, world=world) for p in players]
    assert [r.decision for r in results] == [
        Decision.ADMIT,
        Decision.ADMIT,
        Decision.QUEUE,
        Decision.QUEUE,
        Decision.QUEUE,
    ]
    assert [r.queue_position for r in results[2:]] == [1, 2, 3]

    services.session_end(session=results[0].session, reason="Player left.")
    first_waiting = PlaySession.objects.get(pk=results[2].session.pk)
    assert first_waiting.state == State.STARTING
    assert selectors.queue_position(session=results[3].session) == 1
    assert selectors.running_session_count() == 2


def test_queue_has_a_maximum_length(world):
    players = UserFactory.create_batch(6)
    decisions = [services.session_reserve(user=p, world=world).decision for p in players]
    assert decisions[-1] == Decision.REFUSE
    assert PlaySession.objects.filter(state=State.QUEUED).count() == 3


def test_newcomer_does_not_jump_the_queue_when_a_slot_frees(world):
    players = UserFactory.create_batch(4)
    results = [services.session_reserve(user=p, world=world) for p in players[:3]]
    # A slot frees without the queue being advanced (e.g. a crashed worker marked it directly).
    PlaySession.objects.filter(pk=results[0].session.pk).update(state=State.ENDED)
    late = services.session_reserve(user=players[3], world=world)
    assert late.decision == Decision.QUEUE
    assert PlaySession.objects.get(pk=results[2].session.pk).state == State.STARTING


def test_profile_shows_quota_use_and_past_sessions(client, member, world):
    session = _live(member, world)
    PlaySession.objects.filter(pk=session.pk).update(
        started_at=timezone.now() - timedelta(seconds=120)
    )
    services.session_end(session=session, reason="Player left.")
    client.force_login(member)
    response = client.get(reverse("accounts:profile"))
    assert response.status_code == 200
    usage = response.context["usage"]
    assert 120 <= usage.play_seconds_today <= 122
    assert usage.play_seconds_left == 600 - usage.play_seconds_today
    assert b"Player left." in response.content
    assert b"Ember Forest" in response.content


def test_profile_needs_login(client):
    response = client.get(reverse("accounts:profile"))
    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/")


def test_admin_lists_and_ends_live_sessions(client, admin_user, world):
    session = _live(UserFactory(), world)
    client.force_login(admin_user)
    listing = client.get(reverse("admin:play_sessions_playsession_changelist"), {"state": "live"})
    assert str(session.pk) in listing.content.decode()
    response = client.post(
        reverse("admin:play_sessions_playsession_changelist"),
        {"action": "end_sessions", "_selected_action": [str(session.pk)]},
    )
    assert response.status_code == 302
    session.refresh_from_db()
    assert session.state == State.ENDED
    assert "administrator" in session.end_reason


def test_admin_edits_a_users_quota_inline(client, admin_user, member):
    client.force_login(admin_user)
    url = reverse("admin:auth_user_change", args=[member.pk])
    page = client.get(url)
    assert page.status_code == 200
    form = page.context["adminform"].form
    data = {key: value for key, value in form.initial.items() if value is not None}
    data.update(
        {
            "username": member.username,
            "date_joined_0": member.date_joined.strftime("%Y-%m-%d"),
            "date_joined_1": member.date_joined.strftime("%H:%M:%S"),
            "quota-TOTAL_FORMS": "1",
            "quota-INITIAL_FORMS": "0",
            "quota-MIN_NUM_FORMS": "0",
            "quota-MAX_NUM_FORMS": "1",
            "quota-0-play_seconds_per_day": "7200",
            "quota-0-concurrent_sessions": "3",
        }
    )
    data.pop("groups", None)
    data.pop("user_permissions", None)
    data.pop("last_login", None)
    response = client.post(url, data)
    assert response.status_code == 302, response.context["adminform"].form.errors
    quota = selectors.quota_for(user=member)
    assert quota.play_seconds_per_day == 7200
    assert quota.concurrent_sessions == 3
    assert quota.max_session_seconds == 300  # blank override keeps the site default
