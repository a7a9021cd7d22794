"""Read-side queries for the beta: applications and invitations."""

from accounts.models import BetaApplication, Invitation
from accounts.tokens import invitation_token_hash

# Tokens are 43 URL-safe characters; anything far longer is not ours and is not worth hashing.
MAX_TOKEN_LENGTH = 100


def invitation_get_by_token(*, token: str) -> Invitation | None:
    if not token or len(token) > MAX_TOKEN_LENGTH:
        return None
    return Invitation.objects.filter(token_hash=invitation_token_hash(token)).first()


def beta_application_get_by_email(*, email: str) -> BetaApplication | None:
    return BetaApplication.objects.filter(email__iexact=email.strip()).first()
