"""In the browser: a member makes an API key on the profile, copies it once, finds the API
guide from the footer, and the key works; every page passes the Content-Security-Policy."""

import json
import urllib.request

import pytest

from accounts.models import ApiKey
from tests.factories import UserFactory, WorldFactory

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
PASSWORD = "a-long-Pass-phrase-9"


def test_make_a_key_read_the_guide_and_call_the_api(live_server, new_page, screenshot):
    UserFactory(username="builder", password=PASSWORD)
    WorldFactory(slug="ember", title="Ember Forest")
    page = new_page()
    page.goto(live_server.url + "/accounts/login/")
    page.fill("input[name=username]", "builder")
    page.fill("input[name=password]", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url("**/worlds/")

    page.goto(live_server.url + "/accounts/profile/#api-keys")
    assert page.locator("#api-keys .empty").is_visible()
    page.fill("input[name=name]", "My game server")
    page.click("text=Create key")
    raw_key = page.locator("#api-key").inner_text().strip()
    assert raw_key.startswith("wsk_")
    screenshot(page, "api-01-key-created")

    request = urllib.request.Request(
        live_server.url + "/api/v1/worlds/", headers={"Authorization": f"Bearer {raw_key}"}
    )
    with urllib.request.urlopen(request) as response:
        assert [w["slug"] for w in json.load(response)["items"]] == ["ember"]

    page.click("text=Back to your profile")
    row = page.locator(".api-key-row")
    assert row.count() == 1 and "My game server" in row.inner_text()
    assert raw_key not in page.content()

    page.click("footer >> text=API")
    page.wait_for_url("**/api/")
    assert page.locator("h1").inner_text() == "Worldsite API"
    assert page.locator("#quick-start code").inner_text().count("curl") >= 5
    overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
    assert overflow <= 0
    screenshot(page, "api-02-guide")

    page.goto(live_server.url + "/accounts/profile/#api-keys")
    page.click(".api-key-row >> text=Revoke")
    page.wait_for_url("**/accounts/profile/#api-keys")
    assert "Revoked" in page.locator(".api-key-row").inner_text()
    assert ApiKey.objects.get().revoked_at is not None
