"""Serving uploaded media from daphne (WORLDSITE_SERVE_MEDIA) without letting it run as a page.

An upload is whatever its uploader made it: an HTML or SVG file served inline from the site's
own origin could script the site. Only picture and video types are served inline, everything
else as a download, and every media response carries a CSP sandbox, so even a mislabelled file
gets no scripts, no forms and no origin.
"""

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.views.static import serve

INLINE_MEDIA_TYPES = frozenset(
    {"image/png", "image/jpeg", "image/webp", "image/gif", "video/mp4", "video/webm"}
)
MEDIA_CSP = "default-src 'none'; img-src 'self'; media-src 'self'; sandbox"


def media_serve(request: HttpRequest, path: str) -> HttpResponse:
    response = serve(request, path, document_root=settings.MEDIA_ROOT)
    content_type = response.get("Content-Type", "").split(";")[0].strip().lower()
    if content_type not in INLINE_MEDIA_TYPES:
        response["Content-Type"] = "application/octet-stream"
        response["Content-Disposition"] = "attachment"
    response["Content-Security-Policy"] = MEDIA_CSP
    response["X-Content-Type-Options"] = "nosniff"
    return response
