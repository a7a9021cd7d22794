"""The play page in headless Chromium, with the server, inside a private network namespace:
log in, press Play, decode video and audio, walk, darken the world, end the session."""

import os

import pytest
from django.contrib.auth import get_user_model

from sessions.models import PlaySession
from tests.browser.conftest import ARTIFACTS, CHROMIUM, CHROMIUM_FLAGS
from tests.factories import UserFactory, WorldFactory
from tests.play.conftest import database_env_for_namespace

pytestmark = [pytest.mark.play, pytest.mark.browser, pytest.mark.django_db(transaction=True)]
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

PASSWORD = "a-long-Pass-phrase-9"

# Samples the <video> for `ms`: mean brightness (0..255) and mean change between samples.
SAMPLE_PICTURE = """async (ms) => {
  const video = document.getElementById("stream");
  const canvas = document.createElement("canvas");
  canvas.width = 64; canvas.height = 64;
  const g = canvas.getContext("2d", { willReadFrequently: true });
  let previous = null, change = 0, changes = 0, brightness = 0, samples = 0;
  const end = performance.now() + ms;
  while (performance.now() < end) {
    g.drawImage(video, 0, 0, 64, 64);
    const data = g.getImageData(0, 0, 64, 64).data;
    let sum = 0;
    for (let i = 0; i < data.length; i += 4) sum += data[i] + data[i + 1] + data[i + 2];
    brightness += sum / (data.length / 4 * 3); samples += 1;
    if (previous) {
      let diff = 0;
      for (let i = 0; i < data.length; i++) diff += Math.abs(data[i] - previous[i]);
      change += diff / data.length; changes += 1;
    }
    previous = data.slice();
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  return { brightness: brightness / samples, motion: changes ? change / changes : 0 };
}"""


@pytest.fixture
def chromium_in(netns, tmp_path):
    if not os.path.exists(CHROMIUM):
        pytest.fail("Debian chromium is missing") if os.environ.get("CI") else pytest.skip(
            "Debian chromium is not installed (make test installs it)"
        )
    wrapper = netns.chromium_wrapper(tmp_path, CHROMIUM)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=wrapper, args=CHROMIUM_FLAGS)
        yield browser
        browser.close()


def test_play_in_the_browser(servers, netns, chromium_in):
    user = UserFactory(username="walker", password=PASSWORD)
    world = WorldFactory(slug="coast", title="Misty Coast", theme="misty_coast", seed=5)
    host = servers.daphne(
        env={"REDIS_URL": "", "WORLDSITE_ENGINE_EMBEDDED": "1", **database_env_for_namespace()},
        namespace=netns,
    )
    base = f"http://{host}"
    page = chromium_in.new_page(viewport={"width": 1280, "height": 900})
    page.set_default_timeout(30_000)

    page.goto(base + "/accounts/login/")
    page.fill("input[name=username]", user.username)
    page.fill("input[name=password]", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url("**/worlds/")
    page.goto(base + world.get_absolute_url())
    page.click("text=Play this world")
    page.wait_for_url("**/play/**")
    page.wait_for_function("window.worldsite && window.worldsite.live === true", timeout=120_000)
    page.wait_for_function(
        "window.worldsite.framesDecoded > 40 && window.worldsite.audioSamplesReceived > 96000",
        timeout=30_000,
    )

    page.locator("#stream").focus()
    idle = page.evaluate(SAMPLE_PICTURE, 2500)
    page.keyboard.down("w")
    walking = page.evaluate(SAMPLE_PICTURE, 2500)
    page.keyboard.up("w")
    assert walking["motion"] > idle["motion"] * 1.2, (idle, walking)

    before = page.evaluate(SAMPLE_PICTURE, 1000)
    page.fill("input[name=prompt]", "make it night")
    page.keyboard.press("Enter")
    page.wait_for_function(
        "document.getElementById('prompt-feedback').textContent.includes('listening')"
    )
    page.wait_for_timeout(3000)
    after = page.evaluate(SAMPLE_PICTURE, 1000)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "20-play-night.png"))
    assert after["brightness"] < before["brightness"] * 0.85, (before, after)

    page.click("#end-session")
    page.wait_for_function("document.getElementById('play-root').dataset.finalState === 'ended'")
    page.screenshot(path=str(ARTIFACTS / "21-play-ended.png"))
    session = PlaySession.objects.get(owner=get_user_model().objects.get(username="walker"))
    assert session.state == "ended"
    assert session.end_reason == "Player ended the session."
