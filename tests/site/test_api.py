"""The developer API under /api/v1/ through Django's test client: resources, the site's quota
and rate-limit rules, input validation and delivery, cross-member isolation, and
application/problem+json for every kind of error."""

import base64
import io
import json
import uuid

import pytest
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.urls import reverse
from PIL import Image

from accounts.services import api_key_create
from sessions import services
from sessions.engine_requests import session_engine_spec
from sessions.models import PlaySession
from tests.factories import UserFactory, WorldFactory

pytestmark = pytest.mark.django_db
PROBLEM = "application/problem+json"
WORKER_CHANNEL = "test.api-worker"


@pytest.fixture(autouse=True)
def _one_engine(settings):
    settings.ENGINE_CAPACITY = 1


@pytest.fixture(autouse=True)
def _empty_channel_layer():
    """Messages one test sent to the pretend worker never reach the next test."""
    yield
    async_to_sync(get_channel_layer().flush)()


@pytest.fixture
def key(member) -> str:
    return api_key_create(owner=member, name="tests")[1]


@pytest.fixture
def api(client, key):
    """The test client with the member's key on every call."""

    class Caller:
        def __getattr__(self, method):
            def call(path, body=None, **extra):
                if body is not None:
                    extra.setdefault("content_type", "application/json")
                    body = json.dumps(body) if not isinstance(body, str | bytes) else body
                    return getattr(client, method)(path, body, **extra, **_bearer(key))
                return getattr(client, method)(path, **extra, **_bearer(key))

            return call

    return Caller()


def _bearer(raw_key: str) -> dict[str, str]:
    return {"HTTP_AUTHORIZATION": f"Bearer {raw_key}"}


def _problem(response, status: int) -> dict:
    assert response.status_code == status, response.content
    assert response["Content-Type"] == PROBLEM
    body = response.json()
    assert body["status"] == status
    assert body["title"] and body["detail"] and body["type"]
    return body


def _running(session: PlaySession) -> PlaySession:
    """As if a worker had claimed the session: inputs now have somewhere to go."""
    PlaySession.objects.filter(pk=session.pk).update(
        state=PlaySession.State.LIVE, worker_name="test", worker_channel=WORKER_CHANNEL
    )
    session.refresh_from_db()
    return session


def _png_base64(size=(64, 64)) -> str:
    buffer = io.BytesIO()
    Image.new("RGB", size, (200, 40, 40)).save(buffer, format="PNG")
    return base64.b64encode(buffer.getvalue()).decode()


# --- worlds --------------------------------------------------------------------------------------
def test_worlds_lists_published_worlds_a_page_at_a_time(api, world, settings):
    WorldFactory(slug="hidden", is_published=False)
    for number in range(30):
        WorldFactory(slug=f"extra-{number:02d}", sort_order=10)
    first = api.get(reverse("api:worlds"))
    assert first.status_code == 200
    page = first.json()
    assert page["count"] == 31 and page["pages"] == 2 and len(page["items"]) == 24
    assert page["items"][0] == {
        "slug": "ember",
        "title": "Ember Forest",
        "description": world.description,
        "tags": [],
        "theme": world.theme,
        "thumbnail_url": None,
    }
    second = api.get(page["next"]).json()
    assert len(second["items"]) == 7 and second["next"] is None
    slugs = {item["slug"] for item in page["items"] + second["items"]}
    assert "hidden" not in slugs and len(slugs) == 31
    _problem(api.get(reverse("api:worlds") + "?page=3"), 404)


# --- starting sessions ---------------------------------------------------------------------------
def test_start_a_session_returns_its_urls(api, member, world):
    response = api.post(reverse("api:sessions"), {"world": "ember"})
    assert response.status_code == 201
    body = response.json()
    session = PlaySession.objects.get(owner=member)
    assert body["id"] == str(session.pk) and body["state"] == "starting"
    assert body["queue_position"] is None and body["eta_s"] is None
    assert body["input_url"].endswith(f"/api/v1/sessions/{session.pk}/inputs/")
    assert body["events_url"].endswith(f"/api/v1/sessions/{session.pk}/events/")
    assert body["whep_url"].endswith(f"/api/v1/sessions/{session.pk}/whep/")
    assert response["Location"] == f"/api/v1/sessions/{session.pk}/"
    assert body["seconds_left"] == session.allowed_seconds > 0


def test_a_busy_engine_queues_with_position_and_eta(api, world):
    services.session_reserve(user=UserFactory(), world=world)  # takes the one engine
    body = api.post(reverse("api:sessions"), {"world": "ember"}).json()
    assert body["state"] == "queued" and body["queue_position"] == 1
    assert isinstance(body["eta_s"], int)


def test_seed_and_reference_image_reach_the_engine_spec(api, member, world):
    image = _png_base64((300, 200))
    response = api.post(
        reverse("api:sessions"), {"world": "ember", "seed": 77, "reference_image": image}
    )
    assert response.status_code == 201
    spec = session_engine_spec(PlaySession.objects.get(owner=member))
    assert spec["seed"] == 77
    assert Image.open(io.BytesIO(spec["reference_png"])).size == (128, 85)


@pytest.mark.parametrize(
    ("body", "where"),
    [
        ({}, "world: Field required"),
        ({"world": "ember", "seed": -1}, "seed"),
        ({"world": "ember", "seed": 2**31}, "seed"),
        ({"world": "ember", "reference_image": "not base64!"}, "base64"),
        ({"world": "ember", "reference_image": base64.b64encode(b"GIF89a").decode()}, "image"),
        ({"world": "nowhere"}, "No published world is called 'nowhere'"),
    ],
)
def test_bad_session_requests_are_422_problems(api, world, body, where):
    problem = _problem(api.post(reverse("api:sessions"), body), 422)
    assert where.lower() in json.dumps(problem).lower()
    assert not PlaySession.objects.exists()


def test_quota_refusals_are_the_sites_own(api, member, world, client):
    assert api.post(reverse("api:sessions"), {"world": "ember"}).status_code == 201
    second = _problem(api.post(reverse("api:sessions"), {"world": "ember"}), 403)
    assert second["type"] == "/api/#problem-quota"
    site_refusal = services.session_reserve(user=member, world=world)
    assert second["detail"] == site_refusal.reason
    assert PlaySession.objects.filter(owner=member).count() == 1


def test_used_up_play_time_is_refused(api, member, world, settings):
    settings.QUOTA_PLAY_SECONDS_PER_DAY = 0
    problem = _problem(api.post(reverse("api:sessions"), {"world": "ember"}), 403)
    assert "today's play time" in problem["detail"]


def test_a_full_queue_is_429_with_retry_after(api, world, settings):
    settings.QUEUE_MAX_LENGTH = 0
    services.session_reserve(user=UserFactory(), world=world)
    response = api.post(reverse("api:sessions"), {"world": "ember"})
    assert _problem(response, 429)["type"] == "/api/#problem-busy"
    assert int(response["Retry-After"]) > 0


def test_starting_sessions_shares_the_sites_rate_limit(api, client, member, world, one_rate_window):
    """play_start counts per account whether Play is pressed on the site or through the API."""
    client.force_login(member)
    for _ in range(5):
        client.post(reverse("sessions:play_start", args=["ember"]))
    for _ in range(5):
        assert api.post(reverse("api:sessions"), {"world": "ember"}).status_code in (201, 403)
    response = api.post(reverse("api:sessions"), {"world": "ember"})
    problem = _problem(response, 429)
    assert problem["type"] == "/api/#problem-rate-limited" and int(response["Retry-After"]) > 0


def test_a_body_that_is_not_json_is_a_400_problem(api, member, world):
    _problem(api.post(reverse("api:sessions"), "{not json"), 400)
    session = _running(services.session_reserve(user=member, world=world).session)
    _problem(api.post(reverse("api:session_input", args=[session.pk]), "{not json"), 400)


# --- reading and ending --------------------------------------------------------------------------
def test_read_and_end_a_session(api, member, world):
    session_id = api.post(reverse("api:sessions"), {"world": "ember"}).json()["id"]
    url = reverse("api:session", args=[session_id])
    assert api.get(url).json()["state"] == "starting"
    ended = api.delete(url)
    assert ended.status_code == 200
    assert (
        ended.json()["state"] == "ended" and ended.json()["end_reason"] == "Ended through the API."
    )
    again = api.get(url).json()
    assert again["state"] == "ended" and again["seconds_left"] == 0
    assert api.delete(url).json()["end_reason"] == "Ended through the API."  # stays as it was


def test_another_members_key_cannot_see_drive_or_end_a_session(api, client, world):
    theirs = services.session_reserve(user=UserFactory(username="other"), world=world).session
    _running(theirs)
    for response in (
        api.get(reverse("api:session", args=[theirs.pk])),
        api.delete(reverse("api:session", args=[theirs.pk])),
        api.post(reverse("api:session_input", args=[theirs.pk]), {"type": "prompt", "text": "hi"}),
        api.get(reverse("api:session_events", args=[theirs.pk])),
    ):
        assert _problem(response, 404)["detail"] == "You have no play session with this id."
    theirs.refresh_from_db()
    assert theirs.state == PlaySession.State.LIVE
    assert theirs.api_inputs_sent == 0
    missing = api.get(reverse("api:session", args=[uuid.uuid4()]))
    assert missing.json() == _problem(api.get(reverse("api:session", args=[theirs.pk])), 404)


# --- inputs --------------------------------------------------------------------------------------
def _received(count: int) -> list[dict]:
    layer = get_channel_layer()
    return [async_to_sync(layer.receive)(WORKER_CHANNEL) for _ in range(count)]


def test_inputs_reach_the_worker_with_increasing_ids(api, member, world):
    session = _running(services.session_reserve(user=member, world=world).session)
    url = reverse("api:session_input", args=[session.pk])
    first = api.post(url, {"type": "input", "keys": ["w"], "yaw": 0.1})
    assert first.status_code == 202 and first.json() == {"ids": [1]}
    batch = api.post(
        url, [{"type": "prompt", "text": "  make   it rain "}, {"type": "input", "keys": 1}]
    )
    assert batch.json() == {"ids": [2, 3]}
    messages = _received(3)
    assert [m["seq"] for m in messages] == [1, 2, 3]
    assert {m["type"] for m in messages} == {"engine.input"}
    assert messages[0]["event"] == {"kind": "action", "keys": ["W"], "yaw": 0.1, "pitch": 0.0}
    assert messages[1]["event"] == {"kind": "prompt", "text": "make it rain"}
    assert messages[2]["event"]["keys"] == ["W"]


@pytest.mark.parametrize(
    ("body", "index", "code"),
    [
        ({"type": "input", "keys": ["Q"]}, 0, "bad_field"),
        ([{"type": "prompt", "text": "ok"}, {"type": "input", "yaw": 3}], 1, "bad_field"),
        ({"type": "prompt", "text": "x" * 301}, 0, "too_long"),
        ({"type": "teleport"}, 0, "unknown_type"),
        ([{"type": "prompt", "text": "ok"}, "input"], 1, "bad_shape"),
    ],
)
def test_invalid_inputs_are_refused_whole_and_say_which(api, member, world, body, index, code):
    session = _running(services.session_reserve(user=member, world=world).session)
    problem = _problem(api.post(reverse("api:session_input", args=[session.pk]), body), 422)
    assert problem["type"] == "/api/#problem-invalid-input"
    assert problem["index"] == index and problem["code"] == code
    session.refresh_from_db()
    assert session.api_inputs_sent == 0  # nothing sent, no id spent


@pytest.mark.parametrize("body", ["[]", json.dumps([{"type": "prompt", "text": "a"}] * 51)])
def test_input_bodies_carry_1_to_50_inputs(api, member, world, body):
    session = _running(services.session_reserve(user=member, world=world).session)
    response = api.post(reverse("api:session_input", args=[session.pk]), body)
    assert _problem(response, 422)["type"] == "/api/#problem-invalid-request"


def test_inputs_are_taken_only_while_the_session_is_live(api, member, world):
    session = services.session_reserve(user=member, world=world).session  # starting, no worker
    url = reverse("api:session_input", args=[session.pk])
    problem = _problem(api.post(url, {"type": "prompt", "text": "hi"}), 409)
    assert problem["type"] == "/api/#problem-not-running" and "starting" in problem["detail"]
    PlaySession.objects.filter(pk=session.pk).update(worker_channel=WORKER_CHANNEL)
    _problem(api.post(url, {"type": "prompt", "text": "hi"}), 409)  # claimed, not yet live
    services.session_finish(session=_running(session), reason="over")
    assert "ended" in _problem(api.post(url, {"type": "prompt", "text": "hi"}), 409)["detail"]


def test_inputs_are_rate_limited(api, member, world, monkeypatch, one_rate_window):
    from worldsite import ratelimits

    monkeypatch.setitem(
        ratelimits.RATE_LIMITS, "api_input", (ratelimits.Limit(ratelimits._account, "3/m"),)
    )
    session = _running(services.session_reserve(user=member, world=world).session)
    url = reverse("api:session_input", args=[session.pk])
    for _ in range(3):
        assert api.post(url, {"type": "input", "keys": []}).status_code == 202
    response = api.post(url, {"type": "input", "keys": []})
    assert _problem(response, 429)["type"] == "/api/#problem-rate-limited"
    assert "Retry-After" in response


# --- WHEP (the media itself: tests/play/test_api_stack.py) -------------------------------------
OFFER = (
    "v=0\r\no=- 1 1 IN IP4 127.0.0.1\r\n"
    "m=video 9 UDP/TLS/RTP/SAVPF 96\r\na=fingerprint:sha-256 AA\r\n"
)


def test_whep_wants_an_sdp_offer(api, member, world):
    session = _running(services.session_reserve(user=member, world=world).session)
    url = reverse("api:session_whep", args=[session.pk])
    _problem(api.post(url, OFFER, content_type="application/json"), 415)
    problem = _problem(api.post(url, "hello", content_type="application/sdp"), 422)
    assert "SDP" in problem["detail"]
    no_video = OFFER.replace("m=video", "m=audio")
    assert (
        "video" in _problem(api.post(url, no_video, content_type="application/sdp"), 422)["detail"]
    )


def test_whep_on_a_queued_or_ended_session_is_409(api, member, world):
    services.session_reserve(user=UserFactory(), world=world)  # takes the one engine
    queued = services.session_reserve(user=member, world=world).session
    url = reverse("api:session_whep", args=[queued.pk])
    problem = _problem(api.post(url, OFFER, content_type="application/sdp"), 409)
    assert problem["type"] == "/api/#problem-not-running" and "queued" in problem["detail"]
    services.session_finish(session=queued, reason="done")
    _problem(api.post(url, OFFER, content_type="application/sdp"), 409)


def test_whep_on_another_members_session_is_404(api, world):
    theirs = _running(services.session_reserve(user=UserFactory(), world=world).session)
    url = reverse("api:session_whep", args=[theirs.pk])
    _problem(api.post(url, OFFER, content_type="application/sdp"), 404)
    resource = reverse("api:session_whep_resource", args=[theirs.pk, "abc"])
    _problem(api.delete(resource), 404)


# --- every error is a problem --------------------------------------------------------------------
def test_no_key_is_401_with_a_bearer_challenge(client, world):
    response = client.get(reverse("api:worlds"))
    assert _problem(response, 401)["type"] == "/api/#problem-unauthenticated"
    assert response["WWW-Authenticate"] == "Bearer"
    unknown = client.get(reverse("api:worlds"), **_bearer("wsk_" + "a" * 43))
    assert "unknown or has been revoked" in _problem(unknown, 401)["detail"]


def test_a_logged_in_browser_without_a_key_is_not_authenticated(client, member, world):
    client.force_login(member)
    _problem(client.get(reverse("api:worlds")), 401)


def test_unknown_paths_and_methods_are_problems(api):
    _problem(api.get("/api/v1/nothing-here/"), 404)
    not_allowed = _problem(api.put(reverse("api:sessions"), {}), 405)
    assert "POST" in not_allowed["detail"]


def test_a_crash_is_a_500_problem_without_internals(api, monkeypatch, world):
    from gallery import selectors

    def broken(**kwargs):
        raise RuntimeError("secret internals")

    monkeypatch.setattr(selectors, "world_list_published", broken)
    problem = _problem(api.get(reverse("api:worlds")), 500)
    assert "secret" not in json.dumps(problem)


def test_the_sites_own_pages_keep_their_html_errors(client):
    response = client.get("/no-such-page/")
    assert response.status_code == 404 and "text/html" in response["Content-Type"]


# --- documentation -------------------------------------------------------------------------------
def test_openapi_document_describes_every_operation(client):
    schema = client.get("/api/v1/openapi.json").json()
    assert schema["openapi"].startswith("3.")
    paths = schema["paths"]
    assert {"get"} <= set(paths["/api/v1/worlds/"])
    assert {"post"} <= set(paths["/api/v1/sessions/"])
    assert {"get", "delete"} <= set(paths["/api/v1/sessions/{session_id}/"])
    assert "post" in paths["/api/v1/sessions/{session_id}/inputs/"]
    assert "get" in paths["/api/v1/sessions/{session_id}/events/"]
    assert "InputMessage" in schema["components"]["schemas"]
    assert schema["components"]["securitySchemes"]["ApiKeyAuth"]["scheme"] == "bearer"


def test_the_api_guide_is_linked_from_every_page_and_lists_the_operations(client, world):
    home = client.get("/").content.decode()
    assert f'href="{reverse("api_docs")}"' in home
    guide = client.get(reverse("api_docs"))
    assert guide.status_code == 200
    text = guide.content.decode()
    assert "curl" in text and "Authorization: Bearer" in text
    for path in ("/api/v1/worlds/", "/api/v1/sessions/{session_id}/events/"):
        assert path in text
    assert 'id="problem-quota"' in text
    assert '"world": "ember"' in text  # the quick start names a real world
    assert "<code>queued</code>" in text and "`" not in text
    assert "<script" not in text.split("</footer>")[0].split("<main")[-1]


def test_any_error_response_on_an_api_path_becomes_a_problem(rf):
    from django.http import HttpResponse

    from api.problems import as_problem

    teapot = as_problem(rf.get("/api/v1/x/"), HttpResponse("<h1>no</h1>", status=418))
    assert teapot["Content-Type"] == PROBLEM and json.loads(teapot.content)["status"] == 418
    odd = json.loads(as_problem(rf.get("/api/v1/x/"), HttpResponse(status=499)).content)
    assert odd["status"] == 499 and odd["title"] == "Bad Request"
    page = HttpResponse("<h1>no</h1>", status=404)
    assert as_problem(rf.get("/worlds/x/"), page) is page  # the site's own pages stay HTML
