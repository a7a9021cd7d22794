"""Seed the demo worlds and an admin account. Safe to run again: nothing is duplicated."""

import os
import secrets

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand
from django.db import transaction

from gallery.models import Tag, World
from gallery.services import world_save

DEMO_WORLDS = [
    {
        "slug": "ember-forest",
        "title": "Ember Forest",
        "description": "A late-summer forest at golden hour. Dry grass, tall pines and a shy "
        "creature that remembers who was kind to it. Try casting fire magic — carefully.",
        "theme": "ember_forest",
        "seed": 11,
        "initial_prompt": "a warm evening in the forest",
        "tags": ["forest", "creature", "fire"],
        "featured": True,
    },
    {
        "slug": "frost-valley",
        "title": "Frost Valley",
        "description": "A silent valley under fresh snow with a frozen lake. Ask for a blizzard, "
        "light a lantern, and follow the tracks.",
        "theme": "frost_valley",
        "seed": 23,
        "initial_prompt": "a clear winter morning",
        "tags": ["snow", "calm"],
        "featured": True,
    },
    {
        "slug": "desert-canyon",
        "title": "Desert Canyon",
        "description": "Red rock walls, a dry riverbed and wind that never stops. A dragon has "
        "been seen on the ridge.",
        "theme": "desert_canyon",
        "seed": 37,
        "initial_prompt": "hot wind through the canyon",
        "tags": ["desert", "dragon"],
        "featured": False,
    },
    {
        "slug": "neon-night",
        "title": "Neon Night",
        "description": "Glowing grass, cyan rivers and lanterns that pulse with whatever your "
        "microphone hears. Bring music.",
        "theme": "neon_night",
        "seed": 41,
        "initial_prompt": "a glowing night",
        "tags": ["night", "music"],
        "featured": True,
    },
    {
        "slug": "misty-coast",
        "title": "Misty Coast",
        "description": "A grey-green shoreline where the fog rolls in from the sea. Make it "
        "rain, wait for a rainbow.",
        "theme": "misty_coast",
        "seed": 53,
        "initial_prompt": "fog over the coast",
        "tags": ["coast", "weather", "calm"],
        "featured": False,
    },
]


class Command(BaseCommand):
    help = "Create the demo worlds and an admin account (idempotent)."

    def add_arguments(self, parser) -> None:
        parser.add_argument(
            "--site-url",
            default="http://127.0.0.1:8000",
            help="where the site is served, for the admin login link (make run passes its own)",
        )

    def handle(self, *args, **options) -> None:
        if World.objects.filter(slug__in=[w["slug"] for w in DEMO_WORLDS]).count() < len(
            DEMO_WORLDS
        ):
            self.stdout.write(
                "Seeding demo worlds (the world model draws each gallery picture; "
                "the first time this takes a little while)..."
            )
        with transaction.atomic():
            created = self._seed_worlds()
        self.stdout.write(f"Demo worlds: {created} created, {len(DEMO_WORLDS) - created} kept.")
        failed = World.objects.filter(media_status="failed").values_list("title", "media_error")
        for title, error in failed:
            self.stdout.write(self.style.WARNING(f"No gallery picture for {title}: {error}"))
        self._seed_admin(options["site_url"].rstrip("/") + "/admin/")

    def _seed_worlds(self) -> int:
        created = 0
        for order, spec in enumerate(DEMO_WORLDS):
            if World.objects.filter(slug=spec["slug"]).exists():
                continue
            world = world_save(
                world=World(
                    slug=spec["slug"],
                    title=spec["title"],
                    description=spec["description"],
                    theme=spec["theme"],
                    seed=spec["seed"],
                    initial_prompt=spec["initial_prompt"],
                    is_published=True,
                    is_featured=spec["featured"],
                    sort_order=order * 10,
                )
            )
            created += 1
            for name in spec["tags"]:
                tag, _ = Tag.objects.get_or_create(slug=name, defaults={"name": name.title()})
                world.tags.add(tag)
        return created

    def _seed_admin(self, login_url: str) -> None:
        user_model = get_user_model()
        username = os.environ.get("WORLDSITE_ADMIN_USERNAME", "admin")
        if user_model.objects.filter(username=username).exists():
            self.stdout.write(
                f"Admin account '{username}' already exists. Log in at "
                f"{login_url} (forgot it? `.venv/bin/python manage.py "
                f"changepassword {username}`)."
            )
            return
        password = os.environ.get("WORLDSITE_ADMIN_PASSWORD") or secrets.token_urlsafe(12)
        user_model.objects.create_superuser(
            username=username, email=f"{username}@worldsite.local", password=password
        )
        shown = (
            "the password in WORLDSITE_ADMIN_PASSWORD"
            if os.environ.get("WORLDSITE_ADMIN_PASSWORD")
            else f"password {password}"
        )
        self.stdout.write(
            self.style.SUCCESS(
                f"Created admin account '{username}' with {shown}. "
                f"Log in at {login_url} — this is shown only once."
            )
        )
