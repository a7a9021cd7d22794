"""World settings and reference-image validation (type, size, dimensions, bombs)."""

import io
import struct
import zlib

import pytest
from django.core.exceptions import ValidationError
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse
from PIL import Image

from gallery.models import World
from gallery.validators import validate_reference_image

pytestmark = pytest.mark.django_db


def _image_bytes(size=(64, 48), fmt="PNG") -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", size, (200, 120, 40)).save(buffer, format=fmt)
    return buffer.getvalue()


def _png_declaring(width: int, height: int) -> bytes:
    """A tiny PNG whose header claims a huge canvas: a decompression bomb."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    idat = zlib.compress(b"\x00" * 16)
    return (
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", idat) + chunk(b"IEND", b"")
    )


def _noisy_image_bytes(fmt: str) -> bytes:
    buffer = io.BytesIO()
    Image.effect_noise((64, 48), 80).convert("RGB").save(buffer, format=fmt)
    return buffer.getvalue()


def _png_with_corrupt_pixels() -> bytes:
    """Every chunk's CRC is right (so verify() passes) but the compressed pixels are garbage."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", 64, 48, 8, 2, 0, 0, 0)
    garbage = zlib.compress(b"\x00" * 400)[:2] + bytes(range(256)) * 4
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", garbage)
        + chunk(b"IEND", b"")
    )


def _upload(data: bytes, name="ref.png") -> SimpleUploadedFile:
    return SimpleUploadedFile(name, data, content_type="image/png")


@pytest.mark.parametrize("fmt", ["PNG", "JPEG", "WEBP"])
def test_accepted_formats(fmt):
    validate_reference_image(_upload(_image_bytes(fmt=fmt)))


@pytest.mark.parametrize(
    ("data", "code"),
    [
        (_image_bytes(fmt="GIF"), "bad_format"),
        (b"this is not an image at all", "unreadable"),
        (_image_bytes()[:40], "unreadable"),
        (_image_bytes(size=(8, 8)), "too_small"),
        (_png_declaring(60_000, 60_000), "bomb"),
        (_png_declaring(8000, 100), "too_big"),
        # Headers intact, pixels not: these passed and then broke gallery media and Play.
        (_noisy_image_bytes("JPEG")[:-600], "unreadable"),
        (_noisy_image_bytes("PNG")[:-300], "unreadable"),
        (_png_with_corrupt_pixels(), "unreadable"),
    ],
)
def test_refused_images_say_why(data, code):
    with pytest.raises(ValidationError) as excinfo:
        validate_reference_image(_upload(data))
    assert excinfo.value.code == code
    assert excinfo.value.messages[0]


def test_oversized_file_is_refused_before_decoding(settings):
    settings.REFERENCE_IMAGE_MAX_BYTES = 1000
    with pytest.raises(ValidationError) as excinfo:
        validate_reference_image(_upload(b"\x89PNG" + b"0" * 2000))
    assert excinfo.value.code == "too_large"


def test_featured_world_must_be_published():
    world = World(slug="x", title="X", theme="ember_forest", is_featured=True, is_published=False)
    with pytest.raises(ValidationError) as excinfo:
        world.full_clean()
    assert "is_featured" in excinfo.value.message_dict


def _admin_world_form(**overrides) -> dict:
    data = {
        "title": "Admin World",
        "slug": "admin-world",
        "description": "d",
        "theme": "neon_night",
        "seed": "7",
        "initial_prompt": "a glowing night",
        "sort_order": "0",
        "is_published": "on",
    }
    data.update(overrides)
    return data


def test_admin_creates_a_world_with_a_reference_image(client, admin_user):
    client.force_login(admin_user)
    data = _admin_world_form(reference_image=_upload(_image_bytes(), "palette.png"))
    response = client.post(reverse("admin:gallery_world_add"), data)
    assert response.status_code == 302, response.content[:2000]
    world = World.objects.get(slug="admin-world")
    assert world.reference_image.name.startswith("worlds/reference/palette")


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"seed": str(2**31)}, "seed"),
        ({"seed": "-1"}, "seed"),
        ({"theme": "moon_base"}, "theme"),
        ({"reference_image": _upload(_png_declaring(60_000, 60_000))}, "reference_image"),
        ({"is_featured": "on", "is_published": ""}, "is_featured"),
    ],
)
def test_admin_world_form_refuses_bad_settings(client, admin_user, overrides, field):
    client.force_login(admin_user)
    response = client.post(reverse("admin:gallery_world_add"), _admin_world_form(**overrides))
    assert response.status_code == 200
    assert field in response.context["adminform"].form.errors
    assert not World.objects.filter(slug="admin-world").exists()


def test_gallery_themes_match_the_simulator():
    from engine.sim import THEME_NAMES

    choices = World._meta.get_field("theme").choices
    assert [slug for slug, _label in choices] == list(THEME_NAMES)


def test_every_theme_paints_its_placeholder_card_from_the_registry(client):
    from frontend.templatetags.worldsite import theme_card_style
    from worldsite.engine_gateway.constants import THEMES

    for theme in THEMES:
        style = theme_card_style(theme.name)
        assert f"--sky: {theme.card_sky};" in style and f"--sun: {theme.card_sun};" in style
    assert theme_card_style("moon_base") == ""
    landing = client.get("/").content.decode()
    assert 'style="--sky: #1b1035; --ground: #2de2e6; --sun: #ff4fd8;"' in landing
