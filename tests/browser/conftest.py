"""Headless Debian Chromium driven by Playwright against pytest-django's live server."""

import os
import shutil
from pathlib import Path

import pytest

from tools.netns import CHROMIUM_FLAGS

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "screenshots"

# Playwright's sync API runs an event loop in the test thread; the ORM calls made by the test
# itself (reading the outbox, checking rows) are still plain synchronous code.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")


@pytest.fixture(scope="module")
def browser():
    """One Chromium per test module; Playwright's loop must not outlive the browser tests."""
    if not Path(CHROMIUM).exists():
        if os.environ.get("CI"):
            pytest.fail("Debian chromium is missing: .ci/run should have installed it")
        pytest.skip("Debian chromium is not installed (make test installs it)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS)
        yield browser
        browser.close()


def watch_csp(page, violations: list[str]) -> None:
    """Collect what the site's Content-Security-Policy blocks on `page` (none is allowed)."""
    page.on(
        "console",
        lambda message: (
            violations.append(message.text) if "Content Security Policy" in message.text else None
        ),
    )


@pytest.fixture
def new_page(browser):
    """Open pages in fresh contexts (separate cookie jars: one per person in the story).
    Every page is watched for Content-Security-Policy violations; any fails the test."""
    contexts = []
    violations: list[str] = []

    def open_page(width: int = 1280, height: int = 860):
        context = browser.new_context(viewport={"width": width, "height": height})
        context.set_default_timeout(15_000)
        contexts.append(context)
        page = context.new_page()
        watch_csp(page, violations)
        return page

    yield open_page
    for context in contexts:
        context.close()
    assert not violations, violations


@pytest.fixture
def screenshot():
    ARTIFACTS.mkdir(parents=True, exist_ok=True)

    def take(page, name: str) -> Path:
        path = ARTIFACTS / f"{name}.png"
        page.screenshot(path=str(path), full_page=True)
        return path

    return take
