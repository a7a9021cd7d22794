"""WebSocket routes, mounted under /ws/ by worldsite.asgi."""

websocket_urlpatterns: list = []
