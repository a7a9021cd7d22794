"""`python manage.py apikey_create --user USERNAME --name NAME`: print a new API key."""

from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from accounts.services import api_key_create


class Command(BaseCommand):
    help = "Create an API key for a member and print it (it is shown only this once)."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--user", required=True, help="the member's username")
        parser.add_argument("--name", required=True, help="what the key is for")

    def handle(self, *args, user: str, name: str, **options) -> None:
        owner = get_user_model().objects.filter(username=user).first()
        if owner is None:
            raise CommandError(f"No member is called {user!r}.")
        try:
            _, raw_key = api_key_create(owner=owner, name=name)
        except ValidationError as error:
            raise CommandError(" ".join(error.messages)) from error
        self.stdout.write(raw_key)
