"""Validation of uploaded reference images: type, size, dimensions, decompression bombs."""

import warnings
import zlib

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.files import File
from PIL import Image, UnidentifiedImageError

ALLOWED_IMAGE_FORMATS = {"PNG": "PNG", "JPEG": "JPEG", "WEBP": "WebP"}


def validate_reference_image(upload: File) -> None:
    """Refuse anything but a modest PNG/JPEG/WebP before the engine ever decodes it.

    The header is read first, so a decompression bomb (tiny file, huge canvas) is refused on its
    declared size without allocating the pixels.
    """
    size = getattr(upload, "size", None)
    if size is not None and size > settings.REFERENCE_IMAGE_MAX_BYTES:
        limit_mb = settings.REFERENCE_IMAGE_MAX_BYTES / (1024 * 1024)
        raise ValidationError(
            f"The image is {size / (1024 * 1024):.1f} MB; the limit is {limit_mb:.0f} MB.",
            code="too_large",
        )
    position = upload.tell() if hasattr(upload, "tell") else 0
    try:
        upload.seek(0)
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            with Image.open(upload) as image:
                image_format = image.format
                width, height = image.size
                _check_dimensions(width, height)
                if image_format not in ALLOWED_IMAGE_FORMATS:
                    allowed = ", ".join(ALLOWED_IMAGE_FORMATS.values())
                    raise ValidationError(
                        f"{image_format or 'This'} images are not accepted; use {allowed}.",
                        code="bad_format",
                    )
                image.verify()  # chunk structure and checksums only; no pixels decoded
            # Decode every pixel (the size is bounded above): a truncated JPEG or a PNG with
            # corrupt compressed data passes verify() and failed later, in the engine.
            upload.seek(0)
            with Image.open(upload) as image:
                image.load()
    except ValidationError:
        raise
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as exc:
        raise ValidationError(
            "The image declares too many pixels to be decoded safely.", code="bomb"
        ) from exc
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError, zlib.error) as exc:
        raise ValidationError(
            "The file is not a readable image (PNG, JPEG or WebP).", code="unreadable"
        ) from exc
    finally:
        upload.seek(position)


def _check_dimensions(width: int, height: int) -> None:
    if width * height > settings.REFERENCE_IMAGE_MAX_PIXELS:
        raise ValidationError(
            f"The image is {width}x{height} pixels, too many to decode safely.", code="bomb"
        )
    if max(width, height) > settings.REFERENCE_IMAGE_MAX_SIDE:
        raise ValidationError(
            f"The image is {width}x{height}; the longest side may be at most "
            f"{settings.REFERENCE_IMAGE_MAX_SIDE} pixels.",
            code="too_big",
        )
    if min(width, height) < settings.REFERENCE_IMAGE_MIN_SIDE:
        raise ValidationError(
            f"The image is {width}x{height}; each side needs at least "
            f"{settings.REFERENCE_IMAGE_MIN_SIDE} pixels.",
            code="too_small",
        )


def validate_preview_video(upload: File) -> None:
    """A world's preview is a short MP4 or WebM (the model draws them as MP4): checked by its
    leading bytes, not its name, so an HTML page renamed .mp4 is refused too."""
    position = upload.tell() if hasattr(upload, "tell") else 0
    try:
        upload.seek(0)
        head = upload.read(12)
    finally:
        upload.seek(position)
    is_mp4 = len(head) >= 12 and head[4:8] == b"ftyp"
    is_webm = head[:4] == b"\x1a\x45\xdf\xa3"
    if not (is_mp4 or is_webm):
        raise ValidationError("The preview must be an MP4 or WebM video.", code="bad_format")
