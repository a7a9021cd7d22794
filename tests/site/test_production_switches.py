"""Production switches: DJANGO_SECURE, the CSP, e-mailed links from WORLDSITE_SITE_URL, and
uploaded media that can never run as a page of the site."""

import json
import os
import re
import subprocess
import sys

import pytest
from django.core import mail
from django.core.exceptions import ValidationError
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from gallery.validators import validate_preview_video

pytestmark = pytest.mark.django_db


def _settings_with(module: str = "worldsite.settings", **env: str) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "WORLDSITE_"))}
    script = (
        "import django, json; django.setup(); from django.conf import settings as s; "
        "print(json.dumps([s.SESSION_COOKIE_SECURE, s.CSRF_COOKIE_SECURE, s.SECURE_SSL_REDIRECT,"
        " s.SECURE_HSTS_SECONDS, s.SECURE_PROXY_SSL_HEADER]))"
    )
    return subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        env={**clean, **env, "DJANGO_SETTINGS_MODULE": module},
    )


def test_django_secure_turns_on_every_tls_switch_at_once():
    plain = _settings_with()
    assert json.loads(plain.stdout.splitlines()[-1]) == [False, False, False, 0, None]
    secure = _settings_with(DJANGO_SECURE="1", WORLDSITE_SITE_URL="https://worlds.example.org")
    assert json.loads(secure.stdout.splitlines()[-1]) == [
        True,
        True,
        True,
        31_536_000,
        ["HTTP_X_FORWARDED_PROTO", "https"],
    ]
    mismatch = _settings_with(DJANGO_SECURE="1", WORLDSITE_SITE_URL="http://worlds.example.org")
    assert mismatch.returncode != 0
    assert "needs WORLDSITE_SITE_URL to start with https://" in mismatch.stderr


PRODUCTION = {
    "DJANGO_SECRET_KEY": "x" * 50,
    "DJANGO_ALLOWED_HOSTS": "worlds.example.org",
    "WORLDSITE_SITE_URL": "https://worlds.example.org",
}


def test_production_settings_are_secure_without_being_asked():
    production = _settings_with("worldsite.settings.production", **PRODUCTION)
    assert production.returncode == 0, production.stderr
    assert json.loads(production.stdout.splitlines()[-1]) == [
        True,
        True,
        True,
        31_536_000,
        ["HTTP_X_FORWARDED_PROTO", "https"],
    ]
    behind_plain_proxy = _settings_with(
        "worldsite.settings.production", **PRODUCTION, DJANGO_SECURE="0"
    )
    assert json.loads(behind_plain_proxy.stdout.splitlines()[-1]) == [False, False, False, 0, None]


@pytest.mark.parametrize(
    ("change", "complaint"),
    [
        ({"DJANGO_SECRET_KEY": ""}, "needs DJANGO_SECRET_KEY"),
        ({"DJANGO_ALLOWED_HOSTS": ""}, "needs DJANGO_ALLOWED_HOSTS"),
        ({"DJANGO_DEBUG": "1"}, "never runs with DJANGO_DEBUG"),
        ({"WORLDSITE_SITE_URL": "http://worlds.example.org"}, "to start with https://"),
    ],
)
def test_production_settings_refuse_to_start_half_configured(change, complaint):
    refused = _settings_with("worldsite.settings.production", **{**PRODUCTION, **change})
    assert refused.returncode != 0 and complaint in refused.stderr


def test_secure_mode_redirects_http_and_trusts_the_proxy(client, settings):
    settings.SECURE_SSL_REDIRECT = True
    settings.SECURE_HSTS_SECONDS = 31_536_000
    settings.SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    assert client.get("/worlds/").status_code == 301
    response = client.get("/worlds/", HTTP_X_FORWARDED_PROTO="https")
    assert response.status_code == 200
    assert response["Strict-Transport-Security"].startswith("max-age=31536000")


def test_pages_carry_a_content_security_policy_without_inline_scripts(client):
    response = client.get("/")
    policy = response["Content-Security-Policy"]
    directives = dict(part.strip().split(" ", 1) for part in policy.split(";"))
    assert directives["script-src"] == "'self'" and directives["style-src"] == "'self'"
    assert "frame-ancestors 'none'" in policy


def test_password_reset_links_follow_site_url_not_the_host_header(client, member, settings):
    settings.SITE_URL = "https://worlds.example.org"
    settings.ALLOWED_HOSTS = ["*"]  # even a lax host list cannot steer the link
    response = client.post(
        reverse("password_reset"), {"email": member.email}, HTTP_HOST="evil.example"
    )
    assert response.status_code == 302
    [message] = mail.outbox
    links = re.findall(r"\S+://\S+", message.body)
    assert links and all(
        link.startswith("https://worlds.example.org/accounts/reset/") for link in links
    ), links
    assert "evil.example" not in message.body + message.subject


def test_admin_invitations_link_to_site_url(client, admin_user, settings):
    settings.SITE_URL = "https://worlds.example.org"
    settings.ALLOWED_HOSTS = ["*"]
    client.force_login(admin_user)
    client.post(
        reverse("admin:accounts_invitation_add"),
        {"email": "vip@example.com"},
        HTTP_HOST="evil.example",
    )
    [message] = mail.outbox
    assert "https://worlds.example.org/invite/" in message.body
    assert "evil.example" not in message.body


def test_uploaded_html_is_never_served_inline(client, settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path
    (tmp_path / "worlds").mkdir()
    (tmp_path / "worlds" / "x.html").write_text("<script>alert(document.cookie)</script>")
    (tmp_path / "worlds" / "t.png").write_bytes(b"\x89PNG\r\n\x1a\n")
    page = client.get("/media/worlds/x.html")
    assert page.status_code == 200
    assert page["Content-Type"] == "application/octet-stream"
    assert page["Content-Disposition"] == "attachment"
    assert "sandbox" in page["Content-Security-Policy"]
    picture = client.get("/media/worlds/t.png")
    assert picture["Content-Type"] == "image/png"
    assert "attachment" not in picture.get("Content-Disposition", "")
    assert "sandbox" in picture["Content-Security-Policy"]


def test_the_preview_field_takes_videos_only():
    with pytest.raises(ValidationError):
        validate_preview_video(SimpleUploadedFile("p.mp4", b"<html><script>x</script></html>"))
    validate_preview_video(SimpleUploadedFile("p.mp4", b"\x00\x00\x00\x18ftypisom\x00\x00"))
    validate_preview_video(SimpleUploadedFile("p.webm", b"\x1a\x45\xdf\xa3\x01\x00\x00\x00"))
