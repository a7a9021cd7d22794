"""API keys: made on the profile page or by `apikey_create`, stored hashed, shown once, used by
`Authorization: Bearer`, revoked by their owner or an admin."""

from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse
from django.utils import timezone

from accounts import services
from accounts.models import ApiKey
from accounts.tokens import token_hash
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db


def _bearer(raw_key: str) -> dict[str, str]:
    return {"HTTP_AUTHORIZATION": f"Bearer {raw_key}"}


def test_a_key_is_stored_only_as_its_hash(member):
    key, raw_key = services.api_key_create(owner=member, name="  my   game ")
    assert raw_key.startswith("wsk_") and len(raw_key) > 40
    assert key.name == "my game"
    assert key.key_hash == token_hash(raw_key)
    stored = ApiKey.objects.filter(pk=key.pk).values()[0]
    assert raw_key not in {str(value) for value in stored.values()}
    assert key.prefix == raw_key[:12]


def test_profile_creates_shows_once_lists_and_revokes_a_key(client, member):
    client.force_login(member)
    created = client.post(reverse("accounts:api_key_create"), {"name": "Stream overlay"})
    assert created.status_code == 201
    assert created["Cache-Control"] == "no-store"
    key = ApiKey.objects.get(owner=member)
    raw_key = created.context["raw_key"]
    assert raw_key in created.content.decode() and key.key_hash == token_hash(raw_key)

    profile = client.get(reverse("accounts:profile")).content.decode()
    assert "Stream overlay" in profile and key.prefix in profile
    assert raw_key not in profile  # never shown again
    assert "Never" in profile  # not used yet

    assert client.get(reverse("api:worlds"), **_bearer(raw_key)).status_code == 200
    key.refresh_from_db()
    assert key.last_used_at is not None
    assert (
        key.last_used_at.strftime("%Y-%m-%d %H:%M")
        in client.get(reverse("accounts:profile")).content.decode()
    )

    revoked = client.post(reverse("accounts:api_key_revoke", args=[key.pk]))
    assert revoked.status_code == 302 and revoked["Location"].endswith("#api-keys")
    key.refresh_from_db()
    assert key.revoked_at is not None
    answer = client.get(reverse("api:worlds"), **_bearer(raw_key))
    assert answer.status_code == 401
    assert answer["Content-Type"] == "application/problem+json"


def test_a_key_needs_a_name_and_the_form_says_so(client, member):
    client.force_login(member)
    response = client.post(reverse("accounts:api_key_create"), {"name": "   "})
    assert response.status_code == 400
    assert "This field is required." in response.content.decode()
    assert not ApiKey.objects.exists()


def test_active_keys_are_capped(member):
    for number in range(services.MAX_ACTIVE_API_KEYS):
        services.api_key_create(owner=member, name=f"key {number}")
    with pytest.raises(services.ValidationError, match="revoke one"):
        services.api_key_create(owner=member, name="one too many")


def test_nobody_revokes_another_members_key(client, member):
    key, raw_key = services.api_key_create(owner=UserFactory(username="other"), name="theirs")
    client.force_login(member)
    response = client.post(reverse("accounts:api_key_revoke", args=[key.pk]))
    assert response.status_code == 404
    key.refresh_from_db()
    assert key.revoked_at is None


def test_last_used_is_written_at_most_once_a_minute(member):
    key, raw_key = services.api_key_create(owner=member, name="busy")
    assert services.api_key_authenticate(raw_key=raw_key) == member
    key.refresh_from_db()
    first_use = key.last_used_at
    assert services.api_key_authenticate(raw_key=raw_key) == member
    key.refresh_from_db()
    assert key.last_used_at == first_use
    ApiKey.objects.filter(pk=key.pk).update(last_used_at=first_use - timedelta(minutes=2))
    services.api_key_authenticate(raw_key=raw_key)
    key.refresh_from_db()
    assert key.last_used_at > first_use - timedelta(seconds=1)


@pytest.mark.parametrize("presented", ["", "wsk_", "wsk_" + "x" * 43, "Bearer", "x" * 5000])
def test_unknown_keys_authenticate_nobody(member, presented):
    services.api_key_create(owner=member, name="real")
    assert services.api_key_authenticate(raw_key=presented) is None


def test_a_deactivated_members_key_stops_working(member):
    _, raw_key = services.api_key_create(owner=member, name="k")
    member.is_active = False
    member.save()
    assert services.api_key_authenticate(raw_key=raw_key) is None


def test_apikey_create_command_prints_a_working_key(member):
    out = StringIO()
    call_command("apikey_create", user="member", name="ci script", stdout=out)
    raw_key = out.getvalue().strip()
    assert services.api_key_authenticate(raw_key=raw_key) == member
    assert ApiKey.objects.get(owner=member).name == "ci script"


def test_apikey_create_command_refuses_an_unknown_member(db):
    with pytest.raises(CommandError, match="No member is called 'ghost'"):
        call_command("apikey_create", user="ghost", name="x")


def test_admins_see_and_revoke_keys(client, admin_user, member):
    key, raw_key = services.api_key_create(owner=member, name="leaked")
    client.force_login(admin_user)
    listing = client.get(reverse("admin:accounts_apikey_changelist")).content.decode()
    assert "leaked" in listing and key.prefix in listing and raw_key not in listing
    response = client.post(
        reverse("admin:accounts_apikey_changelist"),
        {"action": "revoke", "_selected_action": [key.pk]},
    )
    assert response.status_code == 302
    key.refresh_from_db()
    assert key.revoked_at is not None and key.revoked_at <= timezone.now()
    assert services.api_key_authenticate(raw_key=raw_key) is None
