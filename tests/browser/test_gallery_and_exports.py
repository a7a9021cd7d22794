"""In the browser: real thumbnails in the gallery, and a past session exported and downloaded."""

import av
import numpy as np
import pytest

from tests.factories import UserFactory, WorldFactory
from tests.recorded import finished_session_with_recording

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
PASSWORD = "a-long-Pass-phrase-9"


def _log_in(page, base: str, username: str) -> None:
    page.goto(base + "/accounts/login/")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url("**/worlds/")


def test_gallery_shows_thumbnails_drawn_by_the_model(live_server, new_page, screenshot, settings):
    settings.WORLD_MEDIA_AUTO = True
    world = WorldFactory(title="Neon Test", slug="neon-test", theme="neon_night", seed=9)
    world.refresh_from_db()
    assert world.media_status == "ready", world.media_error
    page = new_page()
    page.goto(live_server.url + "/worlds/")
    image = page.locator(".world-card img.world-thumb")
    assert image.count() == 1
    page.wait_for_function(
        "() => document.querySelector('.world-card img.world-thumb').naturalWidth === 256"
    )
    page.hover(".world-card")
    page.wait_for_function("() => !document.querySelector('.world-preview').paused")
    screenshot(page, "30-gallery-thumbnails")


def test_export_a_past_session_and_download_it(
    live_server, new_page, screenshot, settings, tmp_path
):
    settings.RECORDINGS_ROOT = tmp_path / "recordings"
    settings.EXPORTS_ROOT = tmp_path / "exports"
    user = UserFactory(username="exporter", password=PASSWORD)
    world = WorldFactory(title="Frost Valley", theme="frost_valley")
    finished_session_with_recording(
        user,
        world,
        settings.RECORDINGS_ROOT,
        40,
        lambda index: np.full((128, 128, 3), index * 6, np.uint8),
    )

    page = new_page()
    _log_in(page, live_server.url, "exporter")
    page.goto(live_server.url + "/accounts/profile/")
    page.click("text=Export video")
    page.wait_for_url("**/accounts/profile/#exports")
    row = page.locator(".export-row")
    assert row.count() == 1
    page.wait_for_function(
        "() => document.querySelector('.export-row .meter').getAttribute('aria-valuenow') === '100'"
    )
    screenshot(page, "31-export-ready")
    with page.expect_download() as download_info:
        page.click("text=Download MP4")
    path = tmp_path / "download.mp4"
    download_info.value.save_as(path)
    with av.open(str(path)) as container:
        assert {stream.type for stream in container.streams} == {"video", "audio"}
        assert sum(1 for _ in container.decode(video=0)) == 40 + 30
