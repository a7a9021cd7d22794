"""Following an invitation link: the only way an account comes to exist."""

from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse
from django.utils import timezone

from accounts import services
from accounts.models import Invitation

pytestmark = pytest.mark.django_db
User = get_user_model()

GOOD = {
    "username": "newplayer",
    "password1": "a-long-Pass-phrase-9",
    "password2": "a-long-Pass-phrase-9",
}


@pytest.fixture
def issued(admin_user):
    return services.invitation_create(email="new@example.com", created_by=admin_user)


def _path(issued) -> str:
    return issued.link.removeprefix("http://127.0.0.1:8000")


def test_valid_invitation_creates_account_and_logs_in(client, issued):
    response = client.post(_path(issued), GOOD)
    assert response.status_code == 302
    assert response["Location"] == reverse("gallery:world_list")
    user = User.objects.get(username="newplayer")
    assert user.email == "new@example.com"
    assert user.check_password(GOOD["password1"])
    assert client.get(reverse("accounts:profile")).status_code == 200
    issued.invitation.refresh_from_db()
    assert issued.invitation.used_by == user
    assert issued.invitation.state == Invitation.State.USED


def test_used_invitation_cannot_make_a_second_account(client, issued):
    client.post(_path(issued), GOOD)
    client.logout()
    response = client.post(_path(issued), {**GOOD, "username": "another"})
    assert response.status_code == 410
    assert b"already been used" in response.content
    assert not User.objects.filter(username="another").exists()


def test_expired_invitation_gets_a_clear_page(client, issued):
    Invitation.objects.update(expires_at=timezone.now() - timedelta(seconds=1))
    response = client.get(_path(issued))
    assert response.status_code == 410
    assert b"expired" in response.content
    assert client.post(_path(issued), GOOD).status_code == 410
    assert not User.objects.filter(username="newplayer").exists()


@pytest.mark.parametrize("token", ["forged-token", "x" * 500, "%00"])
def test_forged_token_gets_a_clear_page(client, issued, token):
    response = client.post(f"/invite/{token}/", GOOD)
    assert response.status_code == 404
    assert b"not valid" in response.content
    assert not User.objects.filter(username="newplayer").exists()


def test_weak_password_and_mismatch_are_explained(client, issued):
    response = client.post(
        _path(issued), {"username": "newplayer", "password1": "123", "password2": "123"}
    )
    assert response.status_code == 200
    assert b"too short" in response.content
    response = client.post(_path(issued), {**GOOD, "password2": "different-Pass-phrase-9"})
    assert b"passwords differ" in response.content
    assert not User.objects.exists() or not User.objects.filter(username="newplayer").exists()
    issued.invitation.refresh_from_db()
    assert issued.invitation.state == Invitation.State.VALID


def test_taken_username_is_explained_and_invitation_kept(client, issued, member):
    response = client.post(_path(issued), {**GOOD, "username": "MEMBER"})
    assert response.status_code == 200
    assert b"taken" in response.content
    issued.invitation.refresh_from_db()
    assert issued.invitation.state == Invitation.State.VALID


@pytest.mark.parametrize(
    ("typed", "problem"),
    [
        ("\uff41\uff4c\uff49\uff43\uff45", "taken"),  # full-width alice: was a 500
        ("\uff21\uff2c\uff29\uff23\uff25", "taken"),  # full-width ALICE: was a 2nd account
        ("\u0430dmin", "look-alike"),  # Cyrillic a
        ("j\u00fcrgen", "look-alike"),
    ],
)
def test_usernames_are_normalised_before_they_are_compared(client, issued, typed, problem):
    User.objects.create_user(username="alice", password="x")
    response = client.post(_path(issued), {**GOOD, "username": typed})
    assert response.status_code == 200
    assert problem.encode() in response.content
    assert User.objects.count() == 2  # alice and the admin who invited
    issued.invitation.refresh_from_db()
    assert issued.invitation.state == Invitation.State.VALID


def test_a_full_width_username_is_stored_in_plain_letters(client, issued):
    response = client.post(_path(issued), {**GOOD, "username": "\uff4e\uff45\uff57\uff21"})
    assert response.status_code == 302
    assert User.objects.filter(username="newA").exists()


def test_there_is_no_signup_without_an_invitation(client):
    for path in ["/accounts/signup/", "/accounts/register/", "/signup/", "/invite/"]:
        assert client.get(path).status_code == 404
    assert User.objects.count() == 0


def test_token_is_not_stored_in_clear(issued):
    token = issued.link.rstrip("/").rsplit("/", 1)[1]
    assert token not in issued.invitation.token_hash
    assert not Invitation.objects.filter(token_hash=token).exists()
