"""A live room in headless Chromium, server and browsers inside a private network namespace: the
host plays and opens a room, two spectators' pages decode its video, a spectator's prompt is
applied by the host and every page shows which prompt changed the world and who sent it, and
when the host ends the session both spectators are told."""

import os

import pytest

from sessions.models import AudiencePrompt, LiveRoom
from tests.browser.conftest import ARTIFACTS, watch_csp
from tests.factories import UserFactory, WorldFactory
from tests.play.conftest import database_env_for_namespace
from tests.play.test_play_browser import PASSWORD, SAMPLE_PICTURE

pytestmark = [pytest.mark.play, pytest.mark.browser, pytest.mark.django_db(transaction=True)]
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

APPLIED = (
    "(text) => window.liveRoom && window.liveRoom.lastApplied"
    " && window.liveRoom.lastApplied.text === text"
)


def _logged_in_page(browser, base: str, username: str, violations: list[str]):
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.set_default_timeout(30_000)
    watch_csp(page, violations)
    page.goto(base + "/accounts/login/")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url("**/worlds/")
    return page


def test_a_host_and_two_spectators_in_a_live_room(servers, netns, chromium_in):
    for name in ("host", "ana", "ben"):
        UserFactory(username=name, password=PASSWORD)
    world = WorldFactory(slug="coast", title="Misty Coast", theme="misty_coast", seed=5)
    address = servers.daphne(
        env={"REDIS_URL": "", "WORLDSITE_ENGINE_EMBEDDED": "1", **database_env_for_namespace()},
        namespace=netns,
    )
    base = f"http://{address}"
    violations: list[str] = []
    ARTIFACTS.mkdir(parents=True, exist_ok=True)

    host = _logged_in_page(chromium_in, base, "host", violations)
    host.goto(base + world.get_absolute_url())
    host.click("text=Play this world")
    host.wait_for_url("**/play/**")
    host.wait_for_function(
        "() => window.worldsite && window.worldsite.live === true", timeout=120_000
    )
    host.select_option("#room-visibility", "private")
    host.fill("#room-invite", "ana, ben")
    host.click("#room-submit")
    host.wait_for_function("() => !document.getElementById('room-live').hidden")
    link = host.locator("#room-link").inner_text()
    room = LiveRoom.objects.get()
    assert link == base + f"/live/{room.code}/"
    assert sorted(room.invited.values_list("username", flat=True)) == ["ana", "ben"]

    spectators = []
    for name in ("ana", "ben"):
        page = _logged_in_page(chromium_in, base, name, violations)
        page.goto(link)
        spectators.append(page)
    for page in spectators:  # both decode the host's stream, picture and sound
        page.wait_for_function("() => window.liveRoom.framesDecoded > 40", timeout=60_000)
        page.wait_for_function("() => window.liveRoom.audioSamples > 48000", timeout=30_000)
        seen = page.evaluate(SAMPLE_PICTURE, 1000)
        assert seen["brightness"] > 10, seen  # a picture, not a black frame
    host.wait_for_function("() => window.liveRoom.viewerCount === 2")
    assert host.locator("#room-viewers").inner_text() == "2"

    ana, ben = spectators
    ana.fill("#audience-prompt", "make it night")
    ana.keyboard.press("Enter")
    ana.wait_for_function(
        "() => document.getElementById('audience-feedback').textContent.includes('in the queue')"
    )
    queued = host.locator("#room-queue li", has_text="make it night")
    queued.wait_for()
    assert "from ana" in queued.inner_text()
    ben.locator("#room-queue li", has_text="make it night").wait_for()  # spectators see it too
    ana.screenshot(path=str(ARTIFACTS / "40-room-spectator-live.png"))
    host.screenshot(path=str(ARTIFACTS / "41-room-host.png"))
    queued.locator("button", has_text="Apply").click()
    for page in (host, ana, ben):
        page.wait_for_function(APPLIED, arg="make it night")
        assert page.locator("#room-applied-text").inner_text() == "“make it night”"
        assert "sent by ana" in page.locator("#room-applied-by").inner_text()
    applied = AudiencePrompt.objects.get()
    assert applied.status == "applied" and applied.applied_by == "host"
    ben.screenshot(path=str(ARTIFACTS / "42-room-spectator-applied.png"))

    # Listed: the gallery's Live now strip shows the room to every member.
    host.select_option("#room-visibility", "listed")
    host.click("#room-submit")
    host.wait_for_function(
        "() => document.getElementById('room-feedback').textContent.includes('Listed')"
    )
    gallery = _logged_in_page(chromium_in, base, "ana", violations)  # lands on the gallery
    strip = gallery.locator(".live-now").inner_text()
    assert "Live now" in strip and "Misty Coast" in strip and "hosted by host" in strip, strip
    assert gallery.locator(f".live-card[href='/live/{room.code}/']").count() == 1
    gallery.screenshot(path=str(ARTIFACTS / "44-gallery-live-now.png"))
    gallery.close()

    host.click("#end-session")
    host.wait_for_function(
        "() => document.getElementById('play-root').dataset.finalState === 'ended'"
    )
    for page in spectators:
        page.wait_for_function(
            "() => document.getElementById('live-root').dataset.finalState === 'ended'"
        )
        assert page.locator("#overlay-title").inner_text() == "This live room has ended"
        assert "Player ended the session." in page.locator("#overlay-text").inner_text()
    ana.screenshot(path=str(ARTIFACTS / "43-room-spectator-ended.png"))
    for page in (host, *spectators):
        page.close()
    assert not violations, violations
