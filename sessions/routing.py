"""WebSocket routes, mounted by worldsite.asgi."""

from channels.generic.websocket import AsyncWebsocketConsumer
from django.urls import path, re_path

from sessions.consumers import PlayConsumer
from sessions.room_consumers import RoomConsumer

CLOSE_NO_SUCH_SOCKET = 4404


class NoSuchSocket(AsyncWebsocketConsumer):
    """Any other WebSocket path is refused at the handshake (it used to raise inside the router:
    an HTTP 500 and a traceback in the log for every probe)."""

    async def connect(self) -> None:
        await self.close(code=CLOSE_NO_SUCH_SOCKET)


websocket_urlpatterns = [
    path("ws/play/<uuid:session_id>/", PlayConsumer.as_asgi()),
    path("ws/live/<str:room>/", RoomConsumer.as_asgi()),
    re_path(r"", NoSuchSocket.as_asgi()),
]
