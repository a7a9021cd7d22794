"""Read-side queries of the accounts app: beta applications, invitations, API keys."""

from django.contrib.auth.models import User
from django.db.models import QuerySet

from accounts.models import ApiKey, BetaApplication, Invitation
from accounts.tokens import API_KEY_PREFIX, token_hash

# Tokens are 43 URL-safe characters; anything far longer is not ours and is not worth hashing.
MAX_TOKEN_LENGTH = 100


def invitation_get_by_token(*, token: str) -> Invitation | None:
    if not token or len(token) > MAX_TOKEN_LENGTH:
        return None
    return Invitation.objects.filter(token_hash=token_hash(token)).first()


def beta_application_get_by_email(*, email: str) -> BetaApplication | None:
    return BetaApplication.objects.filter(email__iexact=email.strip()).first()


def api_key_list_for_owner(*, owner: User) -> QuerySet[ApiKey]:
    return ApiKey.objects.filter(owner=owner)


def api_key_get_active(*, raw_key: str) -> ApiKey | None:
    """The unrevoked key `raw_key` is, with its owner; None for anything else."""
    if not raw_key.startswith(API_KEY_PREFIX) or len(raw_key) > MAX_TOKEN_LENGTH:
        return None
    return (
        ApiKey.objects.select_related("owner")
        .filter(key_hash=token_hash(raw_key), revoked_at__isnull=True, owner__is_active=True)
        .first()
    )
