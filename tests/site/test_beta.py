"""The public application form and the admin's review of applications."""

import re

import pytest
from django.core import mail
from django.urls import reverse

from accounts.models import BetaApplication, Invitation
from tests.factories import BetaApplicationFactory

pytestmark = pytest.mark.django_db

APPLY = reverse("accounts:beta_apply")


def test_application_is_recorded_and_confirmed(client):
    response = client.post(
        APPLY,
        {"email": "Ada@Example.com", "name": "Ada", "intent": "Build a rainy coastal world."},
        follow=True,
    )
    assert response.status_code == 200
    assert b"application is in" in response.content
    application = BetaApplication.objects.get()
    assert application.email == "Ada@Example.com"
    assert application.status == BetaApplication.Status.PENDING


def test_second_application_from_same_address_is_answered_not_duplicated(client):
    BetaApplicationFactory(email="ada@example.com", intent="First time, with feeling.")
    response = client.post(
        APPLY,
        {"email": "ADA@example.com", "name": "Ada again", "intent": "Second try at this."},
        follow=True,
    )
    fresh = client.post(
        APPLY,
        {"email": "bob@example.com", "name": "Bob", "intent": "Never applied before."},
        follow=True,
    )
    # The same page either way: it must not tell a stranger whether an address has applied.
    assert response.content == fresh.content and b"application is in" in response.content
    assert BetaApplication.objects.count() == 2
    assert BetaApplication.objects.get(email="ada@example.com").intent == (
        "First time, with feeling."
    )


@pytest.mark.parametrize(
    ("data", "field", "message"),
    [
        ({"email": "not-an-email", "name": "A", "intent": "Long enough text"}, "email", b"valid"),
        ({"email": "a@example.com", "name": "", "intent": "Long enough text"}, "name", b"required"),
        ({"email": "a@example.com", "name": "A", "intent": "short"}, "intent", b"a little more"),
    ],
)
def test_invalid_application_shows_errors_and_saves_nothing(client, data, field, message):
    response = client.post(APPLY, data)
    assert response.status_code == 200
    assert field in response.context["form"].errors
    assert message in response.content
    assert BetaApplication.objects.count() == 0


def _admin_action(client, model: str, action: str, pks: list) -> None:
    url = reverse(f"admin:{model}_changelist")
    response = client.post(url, {"action": action, "_selected_action": [str(pk) for pk in pks]})
    assert response.status_code == 302, response.content[:500]


def test_bulk_approval_emails_a_working_single_use_link(client, admin_user):
    applications = BetaApplicationFactory.create_batch(3)
    client.force_login(admin_user)
    _admin_action(client, "accounts_betaapplication", "approve", [a.pk for a in applications[:2]])

    assert {a.status for a in BetaApplication.objects.filter(pk__in=[applications[0].pk])} == {
        "approved"
    }
    assert BetaApplication.objects.get(pk=applications[2].pk).status == "pending"
    assert Invitation.objects.count() == 2
    assert sorted(m.to[0] for m in mail.outbox) == sorted(a.email for a in applications[:2])

    link = re.search(r"https?://[^/\s]+(/invite/\S+/)", mail.outbox[0].body).group(1)
    client.logout()
    response = client.get(link)
    assert response.status_code == 200
    assert b"Create my account" in response.content


def test_approving_twice_sends_one_invitation(client, admin_user):
    application = BetaApplicationFactory()
    client.force_login(admin_user)
    _admin_action(client, "accounts_betaapplication", "approve", [application.pk])
    _admin_action(client, "accounts_betaapplication", "approve", [application.pk])
    assert Invitation.objects.count() == 1
    assert len(mail.outbox) == 1


def test_bulk_rejection_sends_nothing(client, admin_user):
    applications = BetaApplicationFactory.create_batch(2)
    client.force_login(admin_user)
    _admin_action(client, "accounts_betaapplication", "reject", [a.pk for a in applications])
    assert set(BetaApplication.objects.values_list("status", flat=True)) == {"rejected"}
    assert Invitation.objects.count() == 0
    assert mail.outbox == []


def test_admin_can_invite_an_address_directly_and_revoke_it(client, admin_user):
    client.force_login(admin_user)
    response = client.post(reverse("admin:accounts_invitation_add"), {"email": "vip@example.com"})
    assert response.status_code == 302
    invitation = Invitation.objects.get()
    assert invitation.email == "vip@example.com"
    assert invitation.created_by == admin_user
    assert mail.outbox[0].to == ["vip@example.com"]
    link = re.search(r"https?://[^/\s]+(/invite/\S+/)", mail.outbox[0].body).group(1)

    _admin_action(client, "accounts_invitation", "revoke", [invitation.pk])
    invitation.refresh_from_db()
    assert invitation.state == Invitation.State.REVOKED
    client.logout()
    response = client.get(link)
    assert response.status_code == 410
    assert b"withdrawn" in response.content


def test_non_staff_cannot_reach_the_review_screens(client, member):
    client.force_login(member)
    response = client.get(reverse("admin:accounts_betaapplication_changelist"))
    assert response.status_code == 302
    assert "/admin/login/" in response["Location"]
