"""Invitation tokens: random, URL-safe, stored only as a SHA-256 hash."""

import hashlib
import secrets


def invitation_token_new() -> str:
    return secrets.token_urlsafe(32)


def invitation_token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()
