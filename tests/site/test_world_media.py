"""Gallery media drawn by the shipped model: thumbnails and previews, versioned and idempotent."""

import av
import pytest
from PIL import Image

from gallery import media_jobs, services
from gallery.models import MediaStatus, World
from gallery.tasks import world_render_media
from tests.factories import WorldFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def media_on(settings):
    settings.WORLD_MEDIA_AUTO = True


def _decode_preview(world: World) -> tuple[int, int, list]:
    with av.open(world.preview.path) as container:
        kinds = [stream.type for stream in container.streams]
        frames = [frame.to_ndarray(format="rgb24") for frame in container.decode(video=0)]
    return len(frames), frames[0].shape[1], kinds


def test_new_world_gets_a_thumbnail_and_a_muted_preview(
    media_on, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        world = WorldFactory(theme="frost_valley", seed=4)
    world.refresh_from_db()
    assert world.media_status == MediaStatus.READY and world.media_rendered_version == 1
    thumbnail = Image.open(world.thumbnail.path)
    assert thumbnail.size == (256, 256) and thumbnail.format == "PNG"
    frames, width, kinds = _decode_preview(world)
    assert frames == 40 and width == 256 and kinds == ["video"]


def test_only_look_changes_redraw_and_old_files_go(media_on, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        world = WorldFactory()
    world.refresh_from_db()
    first_thumbnail = world.thumbnail.name
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        world.title = "A new name"
        services.world_save(world=world)
    assert callbacks == []  # the title does not change how the world looks
    with django_capture_on_commit_callbacks(execute=True):
        world.seed = world.seed + 1
        services.world_save(world=world)
    world.refresh_from_db()
    assert world.media_rendered_version == 2 and world.thumbnail.name != first_thumbnail
    assert not world.thumbnail.storage.exists(first_thumbnail)


def test_stale_jobs_never_overwrite_newer_media(media_on, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        world = WorldFactory()
    with django_capture_on_commit_callbacks(execute=False):
        services.world_media_schedule(world=world)  # version 2 asked for, not drawn yet
    assert world_render_media.apply(args=[world.pk, 1]).get() == "stale"
    world.refresh_from_db()
    assert world.media_rendered_version == 1 and world.media_status == MediaStatus.PENDING


def test_failures_are_retried_then_recorded(media_on, monkeypatch, settings):
    from celery.exceptions import Retry

    from gallery.tasks import MAX_RETRIES

    settings.CELERY_TASK_EAGER_PROPAGATES = True
    world = WorldFactory()

    def broken(spec, workdir):
        raise RuntimeError("engine weights unreadable")

    monkeypatch.setattr("gallery.media.render_world_media", broken)
    version = World.objects.get(pk=world.pk).media_version + 1
    World.objects.filter(pk=world.pk).update(media_version=version)

    with pytest.raises(Retry):  # an early attempt asks Celery to try again later
        world_render_media.apply(args=[world.pk, version], throw=True)
    world.refresh_from_db()
    assert world.media_status == MediaStatus.PENDING
    assert "engine weights unreadable" in world.media_error

    with pytest.raises(RuntimeError, match="unreadable"):  # the last attempt gives up
        world_render_media.apply(args=[world.pk, version], retries=MAX_RETRIES, throw=True)
    world.refresh_from_db()
    assert world.media_status == MediaStatus.FAILED
    assert "engine weights unreadable" in world.media_error


def test_admin_regenerate_action(media_on, client, admin_user, django_capture_on_commit_callbacks):
    world = WorldFactory()
    client.force_login(admin_user)
    with django_capture_on_commit_callbacks(execute=True):
        client.post(
            "/admin/gallery/world/",
            {"action": "regenerate_media", "_selected_action": [str(world.pk)]},
        )
    world.refresh_from_db()
    assert world.media_status == MediaStatus.READY
    assert world.thumbnail.size > 1000


def test_the_reference_picture_reaches_the_model_as_small_png_bytes(monkeypatch):
    import io

    from django.core.files.base import ContentFile

    from worldsite.engine_gateway.pictures import decode_png

    world = WorldFactory()
    buffer = io.BytesIO()
    Image.new("RGB", (400, 200), (10, 120, 30)).save(buffer, format="PNG")
    world.reference_image.save("meadow.png", ContentFile(buffer.getvalue()))
    seen = {}

    def capture(spec, workdir):
        seen.update(spec)
        raise RuntimeError("captured")

    monkeypatch.setattr("gallery.media.render_world_media", capture)
    with pytest.raises(RuntimeError, match="captured"):
        media_jobs.world_media_render(world_id=world.pk, version=world.media_version)
    assert "reference_image" not in seen  # no path: a Celery worker may not share this storage
    picture = decode_png(seen["reference_png"])
    assert picture.shape == (64, 128, 3) and tuple(picture[0, 0]) == (10, 120, 30)
