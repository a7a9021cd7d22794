"""`Authorization: Bearer <key>`: the key's owner is who the call acts as."""

from django.contrib.auth.models import User
from django.http import HttpRequest
from ninja.security import HttpBearer

from accounts.services import api_key_authenticate


class ApiKeyAuth(HttpBearer):
    def authenticate(self, request: HttpRequest, token: str) -> User | None:
        user = api_key_authenticate(raw_key=token)
        if user is not None:
            # The site's per-account rate limits (worldsite/ratelimits.py) count by request.user.
            request.user = user
        return user
