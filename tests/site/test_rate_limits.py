"""The declared rate limits: every entry answers 429 with Retry-After and a readable message,
per address and per account, and only for POSTs."""

import io

import pytest
from django.core import mail
from django.urls import reverse
from PIL import Image

from sessions import services
from worldsite.ratelimits import RATE_LIMITS, rate_limited

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _one_rate_window(one_rate_window):
    """Every test here counts requests against the limits: hold the limits' clock still."""


def _post_until_limited(client, url, data_for, most: int, **extra):
    for attempt in range(most):
        response = client.post(url, data_for(attempt), **extra)
        if response.status_code == 429:
            return attempt, response
    raise AssertionError(f"{url} never answered 429 in {most} POSTs")


def _assert_readable_429(response) -> None:
    assert 1 <= int(response["Retry-After"]) <= 3600
    body = response.content.decode()
    assert "Too many attempts" in body and "try again" in body


def test_forty_wrong_passwords_are_stopped_per_account(client, member):
    """40 wrong passwords in a row were all accepted for checking."""
    url = reverse("login")
    attempt, response = _post_until_limited(
        client, url, lambda i: {"username": "member", "password": f"guess{i}"}, 40
    )
    assert attempt == 8  # the 9th wrong password within 10 minutes
    _assert_readable_429(response)
    # the same account from another address is still limited (per account) ...
    other = client.post(url, {"username": "MEMBER", "password": "x"}, REMOTE_ADDR="10.0.0.9")
    assert other.status_code == 429
    # ... while another account from that address is not
    assert client.post(url, {"username": "someone", "password": "x"}).status_code == 200
    assert client.get(url).status_code == 200  # reading the page never counts
    admin_login = client.post("/admin/login/", {"username": "member", "password": "x"})
    assert admin_login.status_code == 429  # the admin's login counts with the site's


def test_password_reset_mails_are_limited_per_address(client, member):
    """10 reset mails to one address were all sent."""
    url = reverse("password_reset")
    attempt, response = _post_until_limited(
        client,
        url,
        lambda i: {"email": "member@example.com"},
        10,
        REMOTE_ADDR="10.1.1.1",
    )
    assert attempt == 3 and len(mail.outbox) == 3
    _assert_readable_429(response)


def test_beta_applications_are_limited_per_address(client):
    url = reverse("accounts:beta_apply")
    attempt, response = _post_until_limited(
        client,
        url,
        lambda i: {"email": f"a{i}@example.com", "name": "A", "intent": "I would like to try it."},
        10,
    )
    assert attempt == 5
    _assert_readable_429(response)


def test_play_presses_are_limited_per_account(client, member, world):
    client.force_login(member)
    url = reverse("sessions:play_start", args=[world.slug])
    attempt, response = _post_until_limited(client, url, lambda i: {}, 15)
    assert attempt == 10
    _assert_readable_429(response)


def test_image_uploads_are_limited_and_answer_json(client, member, world):
    reservation = services.session_reserve(user=member, world=world)
    client.force_login(member)
    url = reverse("sessions:play_image", args=[reservation.session.pk])

    def picture(_):
        buffer = io.BytesIO()
        Image.new("RGB", (32, 32)).save(buffer, format="PNG")
        buffer.seek(0)
        return {"image": buffer}

    attempt, response = _post_until_limited(client, url, picture, 25)
    assert attempt == 20
    assert response["Content-Type"] == "application/json"
    assert "Too many attempts" in response.json()["error"]
    assert int(response["Retry-After"]) >= 1


def test_exports_are_limited_per_account(client, member, world):
    session = services.session_reserve(user=member, world=world).session
    client.force_login(member)
    url = reverse("sessions:export_start", args=[session.pk])
    attempt, response = _post_until_limited(client, url, lambda i: {}, 25)
    assert attempt == 20
    _assert_readable_429(response)


def test_every_table_entry_is_applied_to_a_view_and_unknown_names_are_refused():
    with pytest.raises(KeyError):
        rate_limited("no-such-view")
    assert set(RATE_LIMITS) == {
        "login",
        "password_reset",
        "beta_apply",
        "play_image",
        "play_start",
        "export_start",
        "api_input",  # applied by api.limits (tests/site/test_api.py)
        "api_whep",
        "room_open",  # the play page's Live room panel and the API's room call (test_rooms.py)
    }
