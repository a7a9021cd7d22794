"""Landing page, gallery listing (tag filter, title search) and world pages."""

import pytest
from django.urls import reverse

from tests.factories import TagFactory, WorldFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def worlds():
    snow, forest = TagFactory(slug="snow"), TagFactory(slug="forest")
    frost = WorldFactory(title="Frost Valley", slug="frost", theme="frost_valley", sort_order=2)
    frost.tags.add(snow)
    ember = WorldFactory(title="Ember Forest", slug="ember", sort_order=1, is_featured=True)
    ember.tags.add(forest)
    hidden = WorldFactory(title="Secret Frost Draft", slug="draft", is_published=False)
    hidden.tags.add(snow)
    return {"frost": frost, "ember": ember, "hidden": hidden}


def _titles(response) -> list[str]:
    return [world.title for world in response.context["worlds"]]


def test_landing_says_what_worldsite_is_and_shows_featured(client, worlds):
    response = client.get(reverse("gallery:landing"))
    assert response.status_code == 200
    assert b"neural world model" in response.content
    assert [w.title for w in response.context["featured"]] == ["Ember Forest"]


def test_gallery_lists_published_worlds_in_order(client, worlds):
    response = client.get(reverse("gallery:world_list"))
    assert _titles(response) == ["Ember Forest", "Frost Valley"]
    assert b"Secret Frost Draft" not in response.content
    # No thumbnail yet: a painted placeholder card in the world's theme colours.
    assert b"world-thumb-placeholder theme-frost_valley" in response.content
    assert b'style="--sky: #9cc3e6; --ground: #e8f0f5; --sun: #ffffff;"' in response.content


def test_gallery_filters_by_tag(client, worlds):
    response = client.get(reverse("gallery:world_list"), {"tag": "snow"})
    assert _titles(response) == ["Frost Valley"]
    assert [t.slug for t in response.context["tags"]] == ["forest", "snow"]


def test_gallery_searches_titles_case_insensitively(client, worlds):
    assert _titles(client.get(reverse("gallery:world_list"), {"q": "FROST"})) == ["Frost Valley"]
    response = client.get(reverse("gallery:world_list"), {"q": "nothing-like-this"})
    assert _titles(response) == []
    assert b"No worlds match" in response.content


def test_world_page_invites_visitors_to_log_in(client, worlds):
    response = client.get(worlds["ember"].get_absolute_url())
    assert response.status_code == 200
    assert b"Ember Forest" in response.content
    assert b"Log in to play" in response.content


def test_unpublished_and_unknown_worlds_are_not_found(client, worlds):
    assert client.get(worlds["hidden"].get_absolute_url()).status_code == 404
    response = client.get("/worlds/no-such-world/")
    assert response.status_code == 404
    assert b"couldn" in response.content


def test_thumbnail_replaces_the_placeholder(client, worlds):
    worlds["frost"].thumbnail = "worlds/thumbnails/frost.png"
    worlds["frost"].save()
    response = client.get(reverse("gallery:world_list"), {"q": "frost"})
    assert b'src="/media/worlds/thumbnails/frost.png"' in response.content


def test_the_demo_admin_is_told_the_login_link_of_the_site_it_was_seeded_for(monkeypatch):
    """`make run` may serve on another port (PORT=8011): the one-time password message must
    point there, and a second seeding says the account exists at the same link."""
    import io

    from django.contrib.auth import get_user_model

    from gallery.management.commands.seed_demo import Command

    monkeypatch.delenv("WORLDSITE_ADMIN_PASSWORD", raising=False)
    out = io.StringIO()
    Command(stdout=out)._seed_admin("http://127.0.0.1:8011/admin/")
    assert "Log in at http://127.0.0.1:8011/admin/" in out.getvalue()
    assert get_user_model().objects.filter(username="admin", is_superuser=True).exists()
    again = io.StringIO()
    Command(stdout=again)._seed_admin("http://127.0.0.1:8011/admin/")
    assert "already exists" in again.getvalue() and "8011/admin/" in again.getvalue()
