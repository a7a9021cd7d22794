"""Secrets handed to members (invitation links, API keys): random, URL-safe, stored only as a
SHA-256 hash. They carry 256 random bits, so a plain hash is enough (no salt, no slow KDF)."""

import hashlib
import secrets

API_KEY_PREFIX = "wsk_"  # makes a leaked key recognisable to secret scanners and to people


def invitation_token_new() -> str:
    return secrets.token_urlsafe(32)


def api_key_new() -> str:
    return API_KEY_PREFIX + secrets.token_urlsafe(32)


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()
