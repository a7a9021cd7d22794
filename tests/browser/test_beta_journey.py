"""The whole beta journey in a real browser: apply, approval, invitation, sign-up, gallery."""

import re

import pytest
from django.contrib.auth import get_user_model
from django.core import mail
from django.core.management import call_command

from accounts.models import BetaApplication
from tests.factories import UserFactory

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PASSWORD = "a-long-Pass-phrase-9"


@pytest.fixture
def seeded(monkeypatch):
    monkeypatch.setenv("WORLDSITE_ADMIN_PASSWORD", "boss-Pass-phrase-42")
    monkeypatch.setenv("WORLDSITE_ADMIN_USERNAME", "boss")
    call_command("seed_demo", stdout=open("/dev/null", "w"))  # noqa: SIM115


def test_apply_approve_invite_signup_and_play_page(
    live_server, new_page, screenshot, seeded, settings
):
    settings.SITE_URL = live_server.url  # e-mailed links are built from WORLDSITE_SITE_URL
    visitor = new_page()
    visitor.goto(live_server.url + "/")
    assert "neural world model" in visitor.content()
    screenshot(visitor, "01-landing")
    visitor.click("text=Browse the worlds")
    visitor.wait_for_url("**/worlds/")
    assert visitor.locator(".world-card").count() == 5
    screenshot(visitor, "02-gallery")
    visitor.click("a.tag >> text=Snow")
    visitor.wait_for_url("**/worlds/?tag=snow")
    assert visitor.locator(".world-card h3").all_inner_texts() == ["Frost Valley"]

    visitor.goto(live_server.url + "/beta/apply/")
    visitor.fill("input[name=email]", "ada@example.com")
    visitor.fill("input[name=name]", "Ada")
    visitor.fill("textarea[name=intent]", "Build a misty coast world for my students.")
    screenshot(visitor, "03-apply")
    visitor.click("button[type=submit]")
    visitor.wait_for_url("**/beta/thanks/")
    assert "application is in" in visitor.content()
    screenshot(visitor, "04-applied")
    assert BetaApplication.objects.get().status == "pending"

    admin = new_page()
    admin.goto(live_server.url + "/admin/login/")
    admin.fill("input[name=username]", "boss")
    admin.fill("input[name=password]", "boss-Pass-phrase-42")
    admin.click("input[type=submit]")
    admin.wait_for_url("**/admin/")
    admin.goto(live_server.url + "/admin/accounts/betaapplication/")
    admin.check("input[name=_selected_action]")
    admin.select_option("select[name=action]", "approve")
    admin.click("button[name=index]")
    assert "Approved 1 application" in admin.locator("ul.messagelist").inner_text()
    screenshot(admin, "05-admin-approved")

    assert len(mail.outbox) == 1 and mail.outbox[0].to == ["ada@example.com"]
    link = re.search(r"http://\S+/invite/\S+/", mail.outbox[0].body).group(0)
    assert link.startswith(live_server.url)

    visitor.goto(link)
    assert "ada@example.com" in visitor.content()
    visitor.fill("input[name=username]", "ada")
    visitor.fill("input[name=password1]", PASSWORD)
    visitor.fill("input[name=password2]", PASSWORD)
    screenshot(visitor, "06-signup")
    visitor.click("button[type=submit]")
    visitor.wait_for_url("**/worlds/")
    assert visitor.locator(".site-nav").inner_text().count("ada") == 1

    visitor.click("text=Neon Night")
    visitor.wait_for_url("**/worlds/neon-night/")
    assert visitor.locator("button >> text=Play this world").count() == 1
    screenshot(visitor, "07-world")
    visitor.goto(live_server.url + "/accounts/profile/")
    assert "Play time today" in visitor.content()
    screenshot(visitor, "08-profile")

    visitor.click("text=Log out")
    visitor.wait_for_url(live_server.url + "/")
    visitor.goto(live_server.url + "/accounts/login/")
    visitor.fill("input[name=username]", "ada")
    visitor.fill("input[name=password]", PASSWORD)
    screenshot(visitor, "09-login")
    visitor.click("button[type=submit]")
    visitor.wait_for_url("**/worlds/")

    # The link was single-use.
    other = new_page()
    other.goto(link)
    assert "already been used" in other.content()
    assert get_user_model().objects.filter(email="ada@example.com").count() == 1


def test_signup_without_an_invitation_is_impossible(live_server, new_page, screenshot, db):
    UserFactory(username="someone")
    page = new_page()
    page.goto(live_server.url + "/invite/made-up-token/")
    assert "can't be used" in page.content()
    assert page.locator("input[name=password1]").count() == 0
    screenshot(page, "10-forged-invitation")
    page.goto(live_server.url + "/accounts/login/")
    assert page.locator("a[href*=signup]").count() == 0
    response = page.goto(live_server.url + "/accounts/signup/")
    assert response.status == 404
    assert get_user_model().objects.count() == 1


def test_pages_fit_a_phone_screen(live_server, new_page, screenshot, seeded):
    page = new_page(width=390, height=844)
    page.goto(live_server.url + "/worlds/")
    overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
    assert overflow <= 0
    screenshot(page, "11-gallery-phone")
