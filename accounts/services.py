"""Write-side business logic of the accounts app: the invite-only beta and API keys."""

import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import User
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.core.mail import send_mail
from django.db import IntegrityError, transaction
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils import timezone

from accounts.models import ApiKey, BetaApplication, Invitation
from accounts.selectors import (
    api_key_get_active,
    beta_application_get_by_email,
    invitation_get_by_token,
)
from accounts.tokens import api_key_new, invitation_token_new, token_hash


class InvitationInvalid(Exception):
    """The token cannot be used; `state` says why (unknown, used, revoked, expired)."""

    def __init__(self, state: str, message: str) -> None:
        super().__init__(message)
        self.state = state
        self.message = message


INVITATION_PROBLEMS = {
    "unknown": "This invitation link is not valid. Check that you copied the whole link.",
    Invitation.State.USED: "This invitation has already been used. Log in with the account "
    "that was created with it, or reset its password.",
    Invitation.State.REVOKED: "This invitation was withdrawn. Ask us for a new one if you "
    "think that is a mistake.",
    Invitation.State.EXPIRED: "This invitation has expired. Apply again and we will send a "
    "fresh one.",
}


@dataclass(frozen=True)
class IssuedInvitation:
    invitation: Invitation
    link: str


def beta_application_submit(*, email: str, name: str, intent: str) -> tuple[BetaApplication, bool]:
    """Record an application; a second one from the same address returns the first, unchanged."""
    email = email.strip()
    existing = beta_application_get_by_email(email=email)
    if existing is not None:
        return existing, False
    try:
        with transaction.atomic():
            application = BetaApplication.objects.create(
                email=email, name=name.strip(), intent=intent.strip()
            )
    except IntegrityError:
        # A concurrent submission of the same address won the race; answer with that one.
        existing = beta_application_get_by_email(email=email)
        if existing is None:
            raise
        return existing, False
    return application, True


def invitation_create(
    *,
    email: str,
    created_by: User | None,
    application: BetaApplication | None = None,
) -> IssuedInvitation:
    """Create a single-use invitation and e-mail its link. The raw token exists only in the link.

    The link starts with WORLDSITE_SITE_URL, never with the Host of the request that caused
    the mail (which a visitor controls, and which is plain http behind a TLS proxy)."""
    token = invitation_token_new()
    invitation = Invitation.objects.create(
        email=email.strip(),
        token_hash=token_hash(token),
        application=application,
        created_by=created_by,
        expires_at=timezone.now() + timedelta(days=settings.INVITATION_TTL_DAYS),
    )
    link = settings.SITE_URL + reverse("accounts:invitation_accept", kwargs={"token": token})
    context = {"link": link, "invitation": invitation, "ttl_days": settings.INVITATION_TTL_DAYS}
    send_mail(
        subject="Your invitation to the Worldsite beta",
        message=render_to_string("accounts/email/invitation.txt", context),
        from_email=settings.DEFAULT_FROM_EMAIL,
        recipient_list=[invitation.email],
    )
    return IssuedInvitation(invitation=invitation, link=link)


def beta_applications_approve(
    *,
    applications: Iterable[BetaApplication],
    reviewer: User,
) -> list[IssuedInvitation]:
    """Approve pending applications, each with a fresh invitation; others are left alone."""
    issued = []
    for application in applications:
        with transaction.atomic():
            updated = BetaApplication.objects.filter(
                pk=application.pk, status=BetaApplication.Status.PENDING
            ).update(
                status=BetaApplication.Status.APPROVED,
                reviewed_at=timezone.now(),
                reviewed_by=reviewer,
            )
        if not updated:
            continue
        issued.append(
            invitation_create(
                email=application.email,
                created_by=reviewer,
                application=application,
            )
        )
    return issued


def beta_applications_reject(*, applications: Iterable[BetaApplication], reviewer: User) -> int:
    """Reject pending applications. No e-mail is sent; returns how many changed."""
    pks = [application.pk for application in applications]
    return BetaApplication.objects.filter(pk__in=pks, status=BetaApplication.Status.PENDING).update(
        status=BetaApplication.Status.REJECTED, reviewed_at=timezone.now(), reviewed_by=reviewer
    )


def invitations_revoke(*, invitations: Iterable[Invitation]) -> int:
    """Withdraw invitations that are still unused; returns how many changed."""
    pks = [invitation.pk for invitation in invitations]
    return Invitation.objects.filter(
        pk__in=pks, used_at__isnull=True, revoked_at__isnull=True
    ).update(revoked_at=timezone.now())


def invitation_check(*, token: str) -> Invitation:
    """Return the invitation behind a usable token, or raise InvitationInvalid saying why."""
    invitation = invitation_get_by_token(token=token)
    if invitation is None:
        raise InvitationInvalid("unknown", INVITATION_PROBLEMS["unknown"])
    if invitation.state != Invitation.State.VALID:
        raise InvitationInvalid(invitation.state, INVITATION_PROBLEMS[invitation.state])
    return invitation


USERNAME_PATTERN = re.compile(r"[A-Za-z0-9@.+_-]{1,150}")


def username_normalize(raw: str) -> str:
    """The username as it will be stored and compared, or a ValidationError saying why not.

    NFKC first (what Django applies when it saves), so full-width `ａｌｉｃｅ` is `alice` here too
    and cannot slip past the case-insensitive "taken" check; then plain ASCII only, so no
    look-alike letters (a Cyrillic `а` in `admin`) can impersonate another member.
    """
    username = unicodedata.normalize("NFKC", raw).strip()
    if not USERNAME_PATTERN.fullmatch(username):
        raise ValidationError(
            {
                "username": (
                    "Use only the letters a-z and A-Z, digits and @ . + - _ (no accents or "
                    "look-alike letters from other alphabets), at most 150 characters."
                )
            }
        )
    return username


def invitation_accept(*, token: str, username: str, password: str) -> User:
    """Create the member's account from a valid invitation, using the invitation up.

    The invitation row is locked, so two tabs submitting the same link create one account.
    """
    user_model = get_user_model()
    username = username_normalize(username)
    with transaction.atomic():
        invitation = invitation_check(token=token)
        invitation = Invitation.objects.select_for_update().get(pk=invitation.pk)
        if invitation.state != Invitation.State.VALID:
            raise InvitationInvalid(invitation.state, INVITATION_PROBLEMS[invitation.state])
        if user_model.objects.filter(username__iexact=username).exists():
            raise ValidationError({"username": "That username is taken; pick another."})
        candidate = user_model(username=username, email=invitation.email)
        validate_password(password, user=candidate)
        try:
            with transaction.atomic():
                user = user_model.objects.create_user(
                    username=username, email=invitation.email, password=password
                )
        except IntegrityError as exc:  # taken by a sign-up that committed a moment ago
            raise ValidationError({"username": "That username is taken; pick another."}) from exc
        invitation.used_at = timezone.now()
        invitation.used_by = user
        invitation.save(update_fields=["used_at", "used_by"])
    return user


# --- API keys ------------------------------------------------------------------------------------

MAX_ACTIVE_API_KEYS = 20
MAX_API_KEY_NAME = 80  # ApiKey.name's max_length
LAST_USED_RESOLUTION = timedelta(minutes=1)  # a busy key writes its row once a minute, not per call


def api_key_create(*, owner: User, name: str) -> tuple[ApiKey, str]:
    """Make a key for `owner`; returns the row and the key itself, which is never stored."""
    name = " ".join(name.split())
    if not name:
        raise ValidationError({"name": "Give the key a name, e.g. the program that will use it."})
    if len(name) > MAX_API_KEY_NAME:
        raise ValidationError({"name": f"Key names are limited to {MAX_API_KEY_NAME} characters."})
    if ApiKey.objects.filter(owner=owner, revoked_at__isnull=True).count() >= MAX_ACTIVE_API_KEYS:
        raise ValidationError(
            {"name": f"You have {MAX_ACTIVE_API_KEYS} active keys; revoke one to make another."}
        )
    raw_key = api_key_new()
    key = ApiKey.objects.create(
        owner=owner, name=name, prefix=raw_key[:12], key_hash=token_hash(raw_key)
    )
    return key, raw_key


def api_key_revoke(*, key: ApiKey) -> bool:
    """Revoke `key` from now on; False if it was already revoked."""
    revoked = ApiKey.objects.filter(pk=key.pk, revoked_at__isnull=True).update(
        revoked_at=timezone.now()
    )
    key.refresh_from_db(fields=["revoked_at"])
    return revoked == 1


def api_key_authenticate(*, raw_key: str) -> User | None:
    """The owner a presented key acts for (recording when it was used), or None."""
    key = api_key_get_active(raw_key=raw_key)
    if key is None:
        return None
    now = timezone.now()
    if key.last_used_at is None or now - key.last_used_at >= LAST_USED_RESOLUTION:
        ApiKey.objects.filter(pk=key.pk).update(last_used_at=now)
    return key.owner
