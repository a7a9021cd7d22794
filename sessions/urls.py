from django.urls import path

from sessions import views

app_name = "sessions"

urlpatterns = [
    path("worlds/<slug:slug>/play/", views.play_start, name="play_start"),
    path("play/<uuid:session_id>/", views.play_page, name="play"),
    path("play/<uuid:session_id>/image/", views.play_image, name="play_image"),
    path("play/<uuid:session_id>/export/", views.export_start, name="export_start"),
    path("play/<uuid:session_id>/room/", views.room_open, name="room_open"),
    path("live/<str:code>/", views.live_room, name="live_room"),
    path("exports/<uuid:export_id>/status/", views.export_status, name="export_status"),
    path("exports/<uuid:export_id>/download/", views.export_download, name="export_download"),
]
