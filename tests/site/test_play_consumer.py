"""PlayConsumer over a real channel layer: auth, ownership, queueing, bad messages, failures."""

import asyncio
import io
import json

import pytest
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import AnonymousUser
from django.core.files.base import ContentFile
from PIL import Image

from sessions import services
from sessions.channel_messages import START_CHANNEL, session_group
from sessions.models import PlaySession
from sessions.routing import websocket_urlpatterns
from tests.factories import UserFactory, WorldFactory
from worldsite.engine_gateway.pictures import decode_png

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _engine_settings(settings):
    settings.ENGINE_EMBEDDED = False  # these tests play the worker's part themselves
    settings.ENGINE_CAPACITY = 1
    settings.ENGINE_START_TIMEOUT = 2
    settings.ENGINE_HEARTBEAT_TIMEOUT = 2


async def _connect(user, session_id) -> WebsocketCommunicator:
    communicator = WebsocketCommunicator(
        URLRouter(websocket_urlpatterns), f"/ws/play/{session_id}/"
    )
    communicator.scope["user"] = user
    return communicator


@database_sync_to_async
def _reserve(user, world):
    return services.session_reserve(user=user, world=world)


@database_sync_to_async
def _state(session_id) -> tuple[str, str]:
    session = PlaySession.objects.get(pk=session_id)
    return session.state, session.end_reason


async def _receive_until(communicator, predicate, limit: int = 20) -> dict:
    for _ in range(limit):
        message = json.loads(await communicator.receive_from(timeout=5))
        if predicate(message):
            return message
    raise AssertionError("expected message never came")


async def _drain_start_channel():
    layer = get_channel_layer()
    return await asyncio.wait_for(layer.receive(START_CHANNEL), 10)


async def _started_by(owner, world):
    """Reserve, connect as the owner, and take the start request the consumer sends."""
    reservation = await _reserve(owner, world)
    session_id = str(reservation.session.pk)
    communicator = await _connect(owner, session_id)
    await communicator.connect()
    await _drain_start_channel()
    return reservation, session_id, communicator


@pytest.fixture
def world_and_players(db):
    return WorldFactory(), UserFactory(), UserFactory()


async def test_anonymous_player_is_refused(world_and_players):
    world, owner, _ = world_and_players
    reservation = await _reserve(owner, world)
    communicator = await _connect(AnonymousUser(), reservation.session.pk)
    connected, code = await communicator.connect()
    assert not connected and code == 4401


async def test_only_the_owner_may_connect(world_and_players):
    world, owner, stranger = world_and_players
    reservation = await _reserve(owner, world)
    communicator = await _connect(stranger, reservation.session.pk)
    connected, code = await communicator.connect()
    assert not connected and code == 4404


async def test_queued_player_sees_position_then_is_admitted_when_a_slot_frees(world_and_players):
    world, first, second = world_and_players
    running = await _reserve(first, world)
    waiting = await _reserve(second, world)
    communicator = await _connect(second, waiting.session.pk)
    assert (await communicator.connect())[0]
    status = await _receive_until(communicator, lambda m: m["type"] == "status")
    assert status["state"] == "queued" and status["position"] == 1

    await database_sync_to_async(services.session_end)(session=running.session, reason="left")
    status = await _receive_until(communicator, lambda m: m.get("state") == "starting")
    request = await _drain_start_channel()
    assert request["session_id"] == str(waiting.session.pk)
    assert request["spec"]["theme"] == world.theme
    await communicator.disconnect()


async def test_the_worlds_reference_picture_travels_as_small_png_bytes(world_and_players):
    world, player, _ = await database_sync_to_async(_with_reference_picture)(world_and_players)
    reservation = await _reserve(player, world)
    communicator = await _connect(player, reservation.session.pk)
    assert (await communicator.connect())[0]
    request = await _drain_start_channel()
    spec = request["spec"]
    assert "reference_image" not in spec  # no file path: a worker may not share this storage
    picture = decode_png(spec["reference_png"])
    assert picture.shape == (64, 128, 3) and tuple(picture[0, 0]) == (30, 90, 200)
    await communicator.disconnect()


def _with_reference_picture(world_and_players):
    world = world_and_players[0]
    buffer = io.BytesIO()
    Image.new("RGB", (640, 320), (30, 90, 200)).save(buffer, format="PNG")
    world.reference_image.save("sky.png", ContentFile(buffer.getvalue()))
    return world_and_players


async def test_engine_handshake_relays_sdp_and_marks_live(world_and_players):
    world, owner, _ = world_and_players
    reservation, session_id, communicator = await _started_by(owner, world)
    layer = get_channel_layer()
    worker_channel = await layer.new_channel()
    assert await database_sync_to_async(services.session_claim_worker)(
        session_id=session_id, worker_name="w1", worker_channel=worker_channel
    )
    await layer.group_send(
        session_group(session_id),
        {
            "type": "engine.accepted",
            "worker": "w1",
            "worker_channel": worker_channel,
        },
    )
    await _receive_until(communicator, lambda m: m["type"] == "ready")

    sdp = "v=0\r\nm=video 9 UDP/TLS/RTP/SAVPF 96\r\na=fingerprint:sha-256 AA\r\n"
    await communicator.send_to(text_data=json.dumps({"type": "offer", "sdp": sdp}))
    offer = await asyncio.wait_for(layer.receive(worker_channel), 10)
    assert offer["type"] == "engine.offer" and offer["sdp"] == sdp
    await layer.send(offer["reply_channel"], {"type": "engine.answer", "sdp": "v=0 answer"})
    answer = await _receive_until(communicator, lambda m: m["type"] == "answer")
    assert answer["sdp"] == "v=0 answer"

    await database_sync_to_async(services.session_mark_live)(session=reservation.session)
    await layer.group_send(session_group(session_id), {"type": "engine.live"})
    await _receive_until(communicator, lambda m: m.get("state") == "live")
    await layer.group_send(
        session_group(session_id),
        {
            "type": "engine.heartbeat",
            "seconds_left": 99,
            "frames": 10,
        },
    )
    stats = await _receive_until(communicator, lambda m: m["type"] == "stats")
    assert stats["seconds_left"] == 99

    await communicator.send_to(text_data=json.dumps({"type": "end"}))
    closing = []
    while (output := await communicator.receive_output(timeout=5))["type"] != "websocket.close":
        message = json.loads(output["text"])
        if message.get("state") in ("ended", "failed"):
            closing.append(message)
    # One closing message (there used to be two: the consumer's own and the service's).
    assert closing == [{"type": "status", "state": "ended", "reason": "Player ended the session."}]
    assert await _state(session_id) == ("ended", "Player ended the session.")
    stop = await asyncio.wait_for(layer.receive(worker_channel), 10)
    assert stop == {
        "type": "engine.stop",
        "session_id": session_id,
        "reason": "Player ended the session.",
    }
    # The worker reports the end it was asked for: no second notice to the page, no second
    # stop message to the worker.
    await database_sync_to_async(_finish_as_worker)(session_id)
    assert await _nothing(layer, worker_channel)


async def _nothing(layer, channel) -> bool:
    try:
        await asyncio.wait_for(layer.receive(channel), 1.0)
    except TimeoutError:
        return True
    return False


def _finish_as_worker(session_id: str) -> None:
    session = PlaySession.objects.get(pk=session_id)
    assert (
        services.session_finish(session=session, reason="Player ended the session.", by_worker=True)
        is False
    )


@pytest.mark.parametrize(
    ("payload", "code"),
    [
        ("not json", "bad_json"),
        ("[1, 2]", "bad_shape"),
        ('{"type": "teleport"}', "unknown_type"),
        ('{"type": "offer", "sdp": "hello"}', "bad_sdp"),
        ('{"type": "offer", "sdp": "v=0\\r\\nm=video 9\\r\\n' + "a" * 70000 + '"}', "too_large"),
        ("[" * 30_000 + "]" * 30_000, "bad_json"),  # used to crash the consumer: RecursionError
        ('{"type": "ping", "t": ' + "9" * 400 + "}", "bad_field"),  # and OverflowError
    ],
)
async def test_bad_messages_get_an_error_and_change_nothing(world_and_players, payload, code):
    world, owner, _ = world_and_players
    reservation = await _reserve(owner, world)
    communicator = await _connect(owner, reservation.session.pk)
    await communicator.connect()
    await communicator.send_to(text_data=payload)
    error = await _receive_until(communicator, lambda m: m["type"] == "error")
    assert error["code"] == code and error["message"]
    assert (await _state(reservation.session.pk))[0] == "starting"
    await communicator.disconnect()


async def test_a_flood_of_garbage_closes_the_socket(world_and_players):
    world, owner, _ = world_and_players
    reservation = await _reserve(owner, world)
    communicator = await _connect(owner, reservation.session.pk)
    await communicator.connect()
    for _ in range(40):
        await communicator.send_to(text_data="garbage")
    output = None
    for _ in range(60):
        output = await communicator.receive_output(timeout=5)
        if output["type"] == "websocket.close":
            break
    assert output == {"type": "websocket.close", "code": 4429}


async def test_no_free_engine_fails_the_session_with_a_reason(world_and_players):
    world, owner, _ = world_and_players
    reservation = await _reserve(owner, world)
    communicator = await _connect(owner, reservation.session.pk)
    await communicator.connect()
    final = await _receive_until(communicator, lambda m: m.get("state") == "failed")
    assert "No world engine is free" in final["reason"]
    assert (await _state(reservation.session.pk))[0] == "failed"


async def test_late_beats_on_a_busy_web_loop_never_fail_a_healthy_session(world_and_players):
    """The page stops hearing beats (a stalled web loop delivers them late) while the worker's
    own heartbeats in the database stay fresh: the session must stay up. The consumer used to
    fail it after ENGINE_HEARTBEAT_TIMEOUT seconds of silence on its own clock."""
    world, owner, _ = world_and_players
    reservation, session_id, communicator = await _started_by(owner, world)
    await database_sync_to_async(services.session_claim_worker)(
        session_id=session_id, worker_name="busy", worker_channel="engine-worker.busy!x"
    )
    await get_channel_layer().group_send(
        session_group(session_id),
        {
            "type": "engine.accepted",
            "worker": "busy",
            "worker_channel": "engine-worker.busy!x",
        },
    )
    for _ in range(5):  # 2.5 x the heartbeat timeout without a beat reaching the page
        await asyncio.sleep(1.0)
        await database_sync_to_async(services.sessions_heartbeat)(session_ids=[session_id])
        await database_sync_to_async(services.sessions_housekeeping)()
    assert (await _state(session_id))[0] == "starting"
    heard = []
    while not await communicator.receive_nothing(timeout=0.2):
        heard.append(json.loads(await communicator.receive_from()))
    assert {"type": "ready"} in heard
    assert not [m for m in heard if m.get("state") in ("failed", "ended")], heard
    await communicator.disconnect()


async def test_a_silent_worker_fails_the_session_and_the_page_hears_why(
    world_and_players, settings
):
    world, owner, _ = world_and_players
    reservation, session_id, communicator = await _started_by(owner, world)
    await database_sync_to_async(services.session_claim_worker)(
        session_id=session_id, worker_name="doomed", worker_channel="engine-worker.gone!x"
    )
    settings.ENGINE_STALE_AFTER = 0  # its last heartbeat is already too old
    await asyncio.sleep(0.05)
    await database_sync_to_async(services.sessions_housekeeping)()
    final = await _receive_until(communicator, lambda m: m.get("state") == "failed")
    assert "stopped responding" in final["reason"]
    assert (await _state(session_id))[0] == "failed"


async def test_leaving_before_the_world_starts_ends_the_session(world_and_players):
    world, first, second = world_and_players
    await _reserve(first, world)
    waiting = await _reserve(second, world)
    communicator = await _connect(second, waiting.session.pk)
    await communicator.connect()
    await _receive_until(communicator, lambda m: m.get("state") == "queued")
    await communicator.disconnect()
    assert await _state(waiting.session.pk) == ("ended", "Player left before the world started.")


def _rejected_by_the_ws_parser(raw) -> bool:
    from sessions.protocol import ProtocolError, parse_ws_message

    try:
        parse_ws_message(raw)  # a mutation may still be a well-formed {"type": "end"}
    except ProtocolError:
        return True
    return False


async def test_generated_garbage_on_a_live_sessions_socket_leaves_the_session_live(
    world_and_players,
):
    """Fuzz: mutated messages on the socket of a live session. The socket is closed for too many
    bad messages (the page reconnects); the session itself stays live on its worker."""
    from tools.fuzz import malformed_messages

    world, owner, _ = world_and_players
    reservation, session_id, communicator = await _started_by(owner, world)
    layer = get_channel_layer()
    worker = await layer.new_channel()
    await database_sync_to_async(services.session_claim_worker)(
        session_id=session_id, worker_name="w", worker_channel=worker
    )
    await database_sync_to_async(services.session_mark_live)(session=reservation.session)
    await layer.group_send(
        session_group(session_id),
        {
            "type": "engine.accepted",
            "worker": "w",
            "worker_channel": worker,
        },
    )
    for raw in filter(_rejected_by_the_ws_parser, malformed_messages(300, seed=3)):
        if isinstance(raw, bytes):
            await communicator.send_to(bytes_data=raw)
        else:
            await communicator.send_to(text_data=raw or " ")
    closed = None
    for _ in range(400):
        closed = await communicator.receive_output(timeout=5)
        if closed["type"] == "websocket.close":
            break
    assert closed == {"type": "websocket.close", "code": 4429}
    await communicator.disconnect()
    assert (await _state(session_id))[0] == "live"
    to_worker = await asyncio.wait_for(layer.receive(worker), 5)
    assert to_worker["type"] == "engine.detach" and to_worker["session_id"] == session_id


@pytest.mark.parametrize("path", ["/ws/nope/", "/ws/play/not-a-uuid/", "/anything"])
async def test_unknown_websocket_paths_are_refused_without_an_error(path):
    from worldsite.asgi import application

    communicator = WebsocketCommunicator(
        application, path, headers=[(b"origin", b"http://127.0.0.1")]
    )
    connected, _ = await communicator.connect()
    assert connected is False  # refused at the handshake, no exception from the router
    await communicator.disconnect()
