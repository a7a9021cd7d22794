"""WebSocket routes, mounted by worldsite.asgi."""

from django.urls import path

from sessions.consumers import PlayConsumer

websocket_urlpatterns = [
    path("ws/play/<uuid:session_id>/", PlayConsumer.as_asgi()),
]
