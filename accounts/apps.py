from django.apps import AppConfig


class AccountsConfig(AppConfig):
    """The invite-only beta: applications, invitations, sign-up and the member profile."""

    name = "accounts"
