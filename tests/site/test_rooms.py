"""Live rooms without a browser or a server: the room services (who may watch, the audience
queue and its rounds), the share-link page, the host's panel, the gallery's Live now strip, the
API's room call, and the room socket's rules (RoomConsumer over the configured channel layer):
bad input, unknown and private rooms, removed viewers, the host ending the session."""

import asyncio
import json
from datetime import timedelta

import pytest
from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import AnonymousUser
from django.urls import reverse
from django.utils import timezone

from accounts.services import api_key_create
from sessions import room_selectors, room_services, services
from sessions.models import AudiencePrompt, LiveRoom, PlaySession
from sessions.room_selectors import RoomAccess
from sessions.routing import websocket_urlpatterns
from tests.factories import UserFactory, WorldFactory

WORKER = "test.room-worker"
OFFER = "v=0\r\nm=video 9 UDP/TLS/RTP/SAVPF 96\r\na=fingerprint:sha-256 AB\r\n"


@pytest.fixture(autouse=True)
def _engine_settings(settings):
    settings.ENGINE_EMBEDDED = False  # these tests play the worker's part themselves
    settings.ENGINE_CAPACITY = 2


@pytest.fixture(autouse=True)
def _empty_channel_layer():
    yield
    async_to_sync(get_channel_layer().flush)()


@pytest.fixture
def people(db):
    return {name: UserFactory(username=name) for name in ("host", "ana", "ben", "eve")}


def _live_session(owner) -> PlaySession:
    session = services.session_reserve(user=owner, world=WorldFactory()).session
    PlaySession.objects.filter(pk=session.pk).update(
        state=PlaySession.State.LIVE,
        started_at=timezone.now(),
        worker_name="test",
        worker_channel=WORKER,
    )
    session.refresh_from_db()
    return session


@pytest.fixture
def room(people) -> LiveRoom:
    return room_services.room_open(session=_live_session(people["host"]), invite=["ana", "ben"])


def _worker_messages() -> list[dict]:
    """What the worker channel holds, in one event loop. Both callers expect a message: the first
    may take seconds on a loaded machine with Redis as the layer (CI once saw none inside 0.2 s),
    so it gets 5; after it, half a second of quiet ends the drain."""
    layer = get_channel_layer()

    async def drain() -> list[dict]:
        received = [await asyncio.wait_for(layer.receive(WORKER), 5)]
        while True:
            try:
                received.append(await asyncio.wait_for(layer.receive(WORKER), 0.5))
            except TimeoutError:
                return received

    return async_to_sync(drain)()


# --- services and selectors ---------------------------------------------------------------------
def test_who_may_watch(room, people):
    access = {name: room_selectors.room_access(room=room, user=u) for name, u in people.items()}
    assert access == {
        "host": RoomAccess.HOST,
        "ana": RoomAccess.VIEWER,
        "ben": RoomAccess.VIEWER,
        "eve": RoomAccess.PRIVATE,
    }
    room_services.room_open(session=room.session, visibility=LiveRoom.Visibility.LISTED)
    room.refresh_from_db()
    assert room_selectors.room_access(room=room, user=people["eve"]) == RoomAccess.VIEWER
    assert list(room_selectors.rooms_live_now()) == [room]
    # Opening again changes the same room: one session, one room, one share link.
    assert room_services.room_open(session=room.session).code == room.code


def test_opening_a_room_refuses_unknown_members_and_ended_sessions(people):
    session = _live_session(people["host"])
    with pytest.raises(room_services.RoomRefused, match="nobody-here"):
        room_services.room_open(session=session, invite=["ana", "nobody-here"])
    assert not LiveRoom.objects.exists()  # nothing half-done
    services.session_finish(session=session, reason="done")
    with pytest.raises(room_services.RoomRefused, match="over"):
        room_services.room_open(session=session)


def test_a_room_costs_no_capacity_or_quota(room, people):
    """Watching takes no engine slot: with capacity 2, a second member can still play."""
    assert services.session_reserve(user=people["ana"], world=WorldFactory()).decision == "admit"
    room_services.room_viewer_joined(room=room, user=people["ben"], channel="c1")
    room_services.room_viewer_joined(room=room, user=people["ben"], channel="c2")  # two tabs
    room_services.room_viewer_joined(room=room, user=people["host"], channel="c3")
    assert room_selectors.room_state(room=room)["viewer_count"] == 1  # ben once, host never
    room_services.room_viewer_left(room=room, channel="c1")
    room_services.room_viewer_gone(channel="c2")  # its connection died (no DELETE)
    assert room_selectors.room_state(room=room)["viewer_count"] == 0
    room_services.room_viewer_gone(channel="never-seen")  # nothing to do, no error


def test_host_applies_a_prompt_once_and_the_engine_gets_it(
    room, people, django_capture_on_commit_callbacks
):
    prompt = room_services.room_prompt_submit(room=room, author=people["ana"], text="make it rain")
    with django_capture_on_commit_callbacks(execute=True):
        applied = room_services.room_prompt_apply(room=room, prompt_id=prompt.pk, by="host")
    assert applied is not None and applied.status == AudiencePrompt.Status.APPLIED
    assert room_services.room_prompt_apply(room=room, prompt_id=prompt.pk, by="host") is None
    inputs = [m for m in _worker_messages() if m["type"] == "engine.input"]
    assert [m["event"] for m in inputs] == [{"kind": "prompt", "text": "make it rain"}]
    state = room_selectors.room_state(room=room)
    assert state["queue"] == []
    assert state["last_applied"] == {
        "id": prompt.pk,
        "text": "make it rain",
        "author": "ana",
        "support": 1,
        "applied_by": "host",
    }


def test_a_viewer_may_have_three_prompts_waiting(room, people):
    for index in range(room_services.MAX_PENDING_PER_VIEWER):
        room_services.room_prompt_submit(room=room, author=people["ana"], text=f"idea {index}")
    with pytest.raises(room_services.RoomRefused, match="waiting"):
        room_services.room_prompt_submit(room=room, author=people["ana"], text="one more")
    room_services.room_prompt_submit(room=room, author=people["ben"], text="ben's idea")


def test_audience_round_applies_the_most_supported_prompt(room, people):
    room_services.room_set_steering(room=room, mode=LiveRoom.Steering.AUDIENCE)
    early = room_services.room_prompt_submit(room=room, author=people["ana"], text="a rainbow")
    popular = room_services.room_prompt_submit(room=room, author=people["ben"], text="a dragon")
    assert room_services.room_prompt_support(room=room, user=people["ana"], prompt_id=popular.pk)
    assert room_services.room_round_tick(room=room) is None  # the round is not over yet
    LiveRoom.objects.filter(pk=room.pk).update(
        round_started_at=timezone.now() - timedelta(seconds=room_selectors.ROUND_SECONDS + 1)
    )
    room.refresh_from_db()
    stale = LiveRoom.objects.get(pk=room.pk)  # a second consumer with the same view
    winner = room_services.room_round_tick(room=room)
    assert winner is not None and winner.pk == popular.pk and winner.applied_by == "audience"
    assert room_services.room_round_tick(room=stale) is None  # the round closed once
    assert list(room_selectors.room_pending_prompts(room=room)) == [early]
    assert room_selectors.room_state(room=room)["round_ends_in"] == room_selectors.ROUND_SECONDS


def test_removed_viewer_is_ejected_and_cannot_come_back(
    room, people, django_capture_on_commit_callbacks
):
    room_services.room_viewer_joined(room=room, user=people["ana"], channel="ana-tab")
    with django_capture_on_commit_callbacks(execute=True):
        room_services.room_remove_viewer(room=room, username="ana")
    assert room_selectors.room_access(room=room, user=people["ana"]) == RoomAccess.REMOVED
    assert room_selectors.room_state(room=room)["viewer_count"] == 0
    ejects = [m for m in _worker_messages() if m["type"] == "engine.eject"]
    assert ejects == [
        {
            "type": "engine.eject",
            "session_id": str(room.session_id),
            "viewer": str(people["ana"].pk),
        }
    ]
    room_services.room_open(session=room.session, visibility=LiveRoom.Visibility.LISTED)
    assert room_selectors.room_access(room=room, user=people["ana"]) == RoomAccess.REMOVED
    with pytest.raises(room_services.RoomRefused):
        room_services.room_remove_viewer(room=room, username="host")


# --- pages --------------------------------------------------------------------------------------
def test_share_link_page(client, room, people):
    url = room.get_absolute_url()
    assert client.get(url).status_code == 302  # members only: to the login page
    client.force_login(people["ana"])
    page = client.get(url)
    assert page.status_code == 200 and b'id="live-root"' in page.content
    assert f'data-ws-path="/ws/live/{room.code}/"'.encode() in page.content
    client.force_login(people["eve"])
    refused = client.get(url)
    assert refused.status_code == 403 and b"only members the host invited" in refused.content
    room_services.room_remove_viewer(room=room, username="ben")
    client.force_login(people["ben"])
    removed = client.get(url)
    assert removed.status_code == 403 and b"The host removed you" in removed.content
    missing = client.get(reverse("sessions:live_room", args=["no-such-room"]))
    assert missing.status_code == 404 and b"No live room has this address" in missing.content
    client.force_login(people["host"])
    assert client.get(url)["Location"] == reverse("sessions:play", args=[room.session_id])
    services.session_finish(session=room.session, reason="Player ended the session.")
    client.force_login(people["ana"])
    ended = client.get(url)
    assert ended.status_code == 200 and b"This live room has ended" in ended.content


def test_host_opens_a_room_from_the_play_page(client, people):
    session = _live_session(people["host"])
    client.force_login(people["host"])
    play = client.get(reverse("sessions:play", args=[session.pk]))
    assert b"Open a live room" in play.content
    opened = client.post(
        reverse("sessions:room_open", args=[session.pk]),
        {"visibility": "listed", "invite": "ana, ben"},
    )
    assert opened.status_code == 200, opened.content
    body = opened.json()
    assert body["url"].endswith(f"/live/{body['code']}/") and body["invited"] == ["ana", "ben"]
    assert b"Update the room" in client.get(reverse("sessions:play", args=[session.pk])).content
    client.force_login(people["eve"])  # someone else's session looks missing
    assert client.post(reverse("sessions:room_open", args=[session.pk])).status_code == 404


def test_gallery_shows_listed_live_rooms_to_members(client, room, people):
    client.force_login(people["eve"])
    assert b"Live now" not in client.get(reverse("gallery:world_list")).content  # private
    room_services.room_open(session=room.session, visibility=LiveRoom.Visibility.LISTED)
    page = client.get(reverse("gallery:world_list")).content.decode()
    assert "Live now" in page and room.get_absolute_url() in page and "hosted by host" in page
    client.logout()
    assert b"Live now" not in client.get(reverse("gallery:world_list")).content


# --- the API ------------------------------------------------------------------------------------
def test_api_opens_a_room_and_refuses_other_keys(client, people, one_rate_window):
    session = _live_session(people["host"])
    host_key = api_key_create(owner=people["host"], name="stream")[1]
    eve_key = api_key_create(owner=people["eve"], name="other")[1]
    path = f"/api/v1/sessions/{session.pk}/room"
    created = client.post(
        path,
        json.dumps({"visibility": "listed"}),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {host_key}",
    )
    assert created.status_code == 201, created.content
    body = created.json()
    room = LiveRoom.objects.get(session=session)
    assert body["room"] == room.code and body["url"].endswith(room.get_absolute_url())
    assert body["whep_url"].endswith(f"/api/v1/rooms/{room.code}/whep/")
    assert body["visibility"] == "listed" and body["steering"] == "host"
    other = client.post(
        path, content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {eve_key}"
    )
    assert other.status_code == 404 and other["Content-Type"] == "application/problem+json"
    bad = client.post(
        path,
        json.dumps({"visibility": "everyone"}),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {host_key}",
    )
    assert bad.status_code == 422
    again = client.post(  # an empty body (curl -X POST): the room as it is
        path, "", content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {host_key}"
    )
    assert again.status_code == 201 and again.json()["room"] == room.code
    assert again.json()["visibility"] == "listed"
    schema = client.get("/api/v1/openapi.json").json()
    assert "post" in schema["paths"]["/api/v1/sessions/{session_id}/room"]
    assert "post" in schema["paths"]["/api/v1/rooms/{code}/whep/"]


def test_viewer_whep_refuses_unknown_private_and_removed(client, room, people):
    eve_key = api_key_create(owner=people["eve"], name="k")[1]
    ana_key = api_key_create(owner=people["ana"], name="k")[1]

    def offer(key, code=room.code):
        return client.post(
            f"/api/v1/rooms/{code}/whep/",
            OFFER,
            content_type="application/sdp",
            HTTP_AUTHORIZATION=f"Bearer {key}",
        )

    assert offer(eve_key, "nope").status_code == 404
    refused = offer(eve_key)
    assert refused.status_code == 403 and refused.json()["type"] == "/api/#problem-room-access"
    room_services.room_remove_viewer(room=room, username="ana")
    assert offer(ana_key).status_code == 403


# --- the room socket ----------------------------------------------------------------------------
async def _socket(user, code: str) -> WebsocketCommunicator:
    communicator = WebsocketCommunicator(URLRouter(websocket_urlpatterns), f"/ws/live/{code}/")
    communicator.scope["user"] = user
    return communicator


async def _until(communicator, kind: str, limit: int = 30) -> dict:
    for _ in range(limit):
        message = json.loads(await communicator.receive_from(timeout=5))
        if message["type"] == kind:
            return message
    raise AssertionError(f"no {kind} message")


@pytest.mark.django_db(transaction=True)
async def test_room_socket_refuses_strangers_unknown_rooms_and_removed_viewers(people):
    room = await database_sync_to_async(
        lambda: room_services.room_open(session=_live_session(people["host"]), invite=["ana"])
    )()
    for user, code, expected in (
        (AnonymousUser(), room.code, 4401),
        (people["eve"], room.code, 4403),
        (people["eve"], "no-such-room", 4404),
    ):
        communicator = await _socket(user, code)
        assert await communicator.connect() == (False, expected)
    ana = await _socket(people["ana"], room.code)
    assert (await ana.connect())[0]
    assert (await _until(ana, "room"))["viewer_count"] == 1
    await database_sync_to_async(room_services.room_remove_viewer)(room=room, username="ana")
    assert (await _until(ana, "removed"))["message"].startswith("The host removed you")
    assert (await ana.receive_output(timeout=5))["type"] == "websocket.close"
    again = await _socket(people["ana"], room.code)
    assert await again.connect() == (False, 4403)  # removed viewers cannot rejoin


@pytest.mark.django_db(transaction=True)
async def test_room_socket_validates_limits_and_relays(people):
    room = await database_sync_to_async(
        lambda: room_services.room_open(session=_live_session(people["host"]), invite=["ana"])
    )()
    host, ana = await _socket(people["host"], room.code), await _socket(people["ana"], room.code)
    assert (await host.connect())[0] and (await ana.connect())[0]
    first = await _until(host, "room")
    assert first["role"] == "host"
    seen = await _until(ana, "room")
    assert seen["role"] == "viewer" and seen["viewers"] == []  # names are for the host
    while (await _until(host, "room"))["viewers"] != ["ana"]:
        pass

    for raw, code in (
        ("not json", "bad_json"),
        (json.dumps({"type": "prompt", "text": "x" * 301}), "too_long"),
        (json.dumps({"type": "prompt", "text": "y" * 3000}), "too_large"),
        (json.dumps({"type": "support", "prompt": "1; drop table"}), "bad_field"),
        (json.dumps({"type": "apply", "prompt": 1}), "host_only"),
        (json.dumps({"type": "steering", "mode": "audience"}), "host_only"),
        (json.dumps({"type": "teleport"}), "unknown_type"),
    ):
        await ana.send_to(text_data=raw)
        assert (await _until(ana, "error"))["code"] == code, raw

    # A viewer's offer goes to the session's worker as a receive-only watch request.
    await ana.send_to(text_data=json.dumps({"type": "offer", "sdp": OFFER}))
    layer = get_channel_layer()
    watch = await asyncio.wait_for(layer.receive(WORKER), 5)
    assert watch["type"] == "engine.watch" and watch["viewer"] == str(people["ana"].pk)
    await layer.send(watch["reply_channel"], {"type": "engine.answer", "sdp": "v=0 answer"})
    assert (await _until(ana, "answer"))["sdp"] == "v=0 answer"

    # Prompts: queued, seen by the host live, applied with a click, announced to everyone.
    await ana.send_to(text_data=json.dumps({"type": "prompt", "text": "  make   it snow "}))
    queued = await _until(ana, "prompt_queued")
    assert queued["text"] == "make it snow"
    state = await _until(host, "room")
    while not state["queue"]:
        state = await _until(host, "room")
    assert state["queue"][0]["author"] == "ana"
    await host.send_to(text_data=json.dumps({"type": "apply", "prompt": queued["id"]}))
    for page in (host, ana):
        applied = await _until(page, "applied")
        assert applied["prompt"]["text"] == "make it snow" and applied["prompt"]["author"] == "ana"
    # The prompt limit is the player's: a burst of four, then one every two seconds.
    for index in range(6):
        await ana.send_to(text_data=json.dumps({"type": "prompt", "text": f"idea {index}"}))
    replies: list[dict] = []  # each prompt is answered once: queued, or an error
    while len([r for r in replies if r["type"] in ("prompt_queued", "error")]) < 6:
        replies.append(json.loads(await ana.receive_from(timeout=5)))
    errors = [r["code"] for r in replies if r["type"] == "error"]
    queued = [r["text"] for r in replies if r["type"] == "prompt_queued"]
    assert "rate_limited" in errors and len(queued) <= 3, replies

    # The host ends the session: every page is told, then its socket closes cleanly.
    session = await database_sync_to_async(lambda: PlaySession.objects.get(pk=room.session_id))()
    await database_sync_to_async(services.session_finish)(
        session=session, reason="Player ended the session."
    )
    for page in (host, ana):
        closed = await _until(page, "closed")
        assert closed == {"type": "closed", "state": "ended", "reason": "Player ended the session."}
    await ana.disconnect()
    await host.disconnect()


def test_opening_rooms_is_rate_limited(client, people, one_rate_window):
    session = _live_session(people["host"])
    client.force_login(people["host"])
    url = reverse("sessions:room_open", args=[session.pk])
    answers = [client.post(url, {"visibility": "private"}).status_code for _ in range(11)]
    assert answers == [200] * 10 + [429]
