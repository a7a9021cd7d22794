"""factory_boy factories shared by the site tests."""

import factory
from django.contrib.auth import get_user_model

from accounts.models import BetaApplication
from gallery.models import Tag, World


class UserFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = get_user_model()
        django_get_or_create = ("username",)

    username = factory.Sequence(lambda n: f"player{n}")
    email = factory.LazyAttribute(lambda user: f"{user.username}@example.com")
    password = factory.django.Password("correct-horse-battery")


class TagFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Tag
        django_get_or_create = ("slug",)

    slug = factory.Sequence(lambda n: f"tag{n}")
    name = factory.LazyAttribute(lambda tag: tag.slug.title())


class WorldFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = World

    slug = factory.Sequence(lambda n: f"world-{n}")
    title = factory.Sequence(lambda n: f"World {n}")
    description = "A place to walk around in."
    theme = "ember_forest"
    seed = factory.Sequence(lambda n: n)
    is_published = True

    @classmethod
    def _create(cls, model_class, *args, **kwargs):
        """Worlds are saved the way the site saves them: through the service."""
        from gallery.services import world_save

        return world_save(world=model_class(*args, **kwargs))


class BetaApplicationFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = BetaApplication

    email = factory.Sequence(lambda n: f"applicant{n}@example.com")
    name = factory.Sequence(lambda n: f"Applicant {n}")
    intent = "I want to build a world for my game jam."
