from django.conf import settings
from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path, re_path

from accounts.views import PasswordResetView
from worldsite.media_views import media_serve
from worldsite.ratelimits import rate_limited

urlpatterns = [
    path("", include("gallery.urls")),
    path("", include("accounts.urls")),
    path("", include("sessions.urls")),
    path("", include("api.urls")),
    # Django's own auth views, the two that send or check secrets rate-limited (ratelimits.py).
    path("accounts/login/", rate_limited("login")(auth_views.LoginView.as_view()), name="login"),
    path(
        "accounts/password_reset/",
        rate_limited("password_reset")(PasswordResetView.as_view()),
        name="password_reset",
    ),
    path("accounts/", include("django.contrib.auth.urls")),
    path("admin/login/", rate_limited("login")(admin.site.login)),  # same counts as above
    path("admin/", admin.site.urls),
]

if settings.SERVE_MEDIA:
    media_prefix = settings.MEDIA_URL.lstrip("/")
    urlpatterns += [
        re_path(rf"^{media_prefix}(?P<path>.*)$", media_serve),
    ]

admin.site.site_header = "Worldsite administration"
admin.site.site_title = "Worldsite admin"
admin.site.index_title = "Beta, worlds, quotas and sessions"
