from django.conf import settings
from django.contrib import admin
from django.urls import include, path, re_path
from django.views.static import serve

urlpatterns = [
    path("", include("gallery.urls")),
    path("", include("accounts.urls")),
    path("", include("sessions.urls")),
    path("accounts/", include("django.contrib.auth.urls")),
    path("admin/", admin.site.urls),
]

if settings.SERVE_MEDIA:
    media_prefix = settings.MEDIA_URL.lstrip("/")
    urlpatterns += [
        re_path(rf"^{media_prefix}(?P<path>.*)$", serve, {"document_root": settings.MEDIA_ROOT}),
    ]

admin.site.site_header = "Worldsite administration"
admin.site.site_title = "Worldsite admin"
admin.site.index_title = "Beta, worlds, quotas and sessions"
