"""Pressing Play, the play page, and reference-image uploads during a session."""

import io

import pytest
from django.urls import reverse
from PIL import Image

from sessions import services
from sessions.models import PlaySession
from tests.factories import UserFactory, WorldFactory

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _one_engine(settings):
    settings.ENGINE_CAPACITY = 1


def _png(size=(64, 64)) -> io.BytesIO:
    buffer = io.BytesIO()
    Image.new("RGB", size, (10, 200, 90)).save(buffer, format="PNG")
    buffer.seek(0)
    buffer.name = "palette.png"
    return buffer


def test_play_reserves_and_opens_the_play_page(client, member, world):
    client.force_login(member)
    response = client.post(reverse("sessions:play_start", args=[world.slug]))
    session = PlaySession.objects.get(owner=member)
    assert response.status_code == 302
    assert response["Location"] == reverse("sessions:play", args=[session.pk])
    page = client.get(response["Location"])
    assert page.status_code == 200
    content = page.content.decode()
    assert '<video id="stream"' in content and 'name="prompt"' in content
    assert f"/ws/play/{session.pk}/" in content


def test_refused_play_says_why_on_the_world_page(client, member, world):
    client.force_login(member)
    client.post(reverse("sessions:play_start", args=[world.slug]))
    response = client.post(reverse("sessions:play_start", args=[world.slug]), follow=True)
    assert b"already have 1 session" in response.content
    assert PlaySession.objects.filter(owner=member).count() == 1


def test_play_needs_login_and_post(client, member, world):
    url = reverse("sessions:play_start", args=[world.slug])
    assert client.post(url)["Location"].startswith("/accounts/login/")
    client.force_login(member)
    assert client.get(url).status_code == 405
    assert client.post(reverse("sessions:play_start", args=["nowhere"])).status_code == 404


def test_play_page_is_owner_only(client, member, world):
    reservation = services.session_reserve(user=UserFactory(), world=world)
    client.force_login(member)
    assert client.get(reverse("sessions:play", args=[reservation.session.pk])).status_code == 404


def test_image_upload_validates_and_reaches_the_worker(client, member, world, monkeypatch):
    reservation = services.session_reserve(user=member, world=world)
    services.session_claim_worker(
        session_id=str(reservation.session.pk), worker_name="w", worker_channel="w-channel"
    )
    sent = []

    async def fake_send(channel, message):
        sent.append((channel, message))

    from channels.layers import get_channel_layer

    monkeypatch.setattr(get_channel_layer(), "send", fake_send)
    client.force_login(member)
    url = reverse("sessions:play_image", args=[reservation.session.pk])

    bad = client.post(url, {"image": io.BytesIO(b"not an image")})
    assert bad.status_code == 400 and "not a readable image" in bad.json()["error"]
    assert client.post(url, {}).status_code == 400
    noisy = io.BytesIO()
    Image.effect_noise((64, 48), 80).convert("RGB").save(noisy, format="JPEG")
    truncated = io.BytesIO(noisy.getvalue()[:-600])
    truncated.name = "cut.jpg"
    cut = client.post(url, {"image": truncated})  # was a 500
    assert cut.status_code == 400 and "not a readable image" in cut.json()["error"]
    assert not sent
    ok = client.post(url, {"image": _png((300, 200))})
    assert ok.status_code == 200 and ok.json()["width"] == 128
    channel, message = sent[-1]
    assert channel == "w-channel" and message["type"] == "engine.image"
    assert Image.open(io.BytesIO(message["png"])).size == (128, 85)


def test_image_upload_needs_a_running_session(client, member, world):
    reservation = services.session_reserve(user=member, world=world)
    client.force_login(member)
    url = reverse("sessions:play_image", args=[reservation.session.pk])
    assert client.post(url, {"image": _png()}).status_code == 409
    other = services.session_reserve(user=UserFactory(), world=WorldFactory())
    response = client.post(reverse("sessions:play_image", args=[other.session.pk]), {})
    assert response.status_code == 404


def test_suggested_prompts_are_understood_by_the_engine():
    from engine.sim import resolve
    from worldsite.engine_gateway.constants import DEFAULT_PROMPTS, THEMES

    suggested = [p for theme in THEMES for p in theme.suggested_prompts]
    for prompt in [*DEFAULT_PROMPTS, *suggested]:
        assert resolve(prompt).event is not None, prompt
