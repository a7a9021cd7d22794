"""Request-size limits inside daphne, enforced before a body is held in memory or parsed.

Twisted, under daphne, buffers a request body and then parses form bodies (urlencoded and
multipart) on the reactor thread before daphne hands the request to Django; daphne never reads
the parsed result. A 60 MB anonymous POST therefore froze the event loop, and with it every
live session's video, for seconds. Here daphne's request class skips that parse, discards any
body above `MAX_REQUEST_BYTES` as it arrives (declared or chunked) and answers 413 itself; the
WebSocket factory refuses frames above `MAX_WEBSOCKET_MESSAGE_BYTES`.

`install()` is called from worldsite/asgi.py, which daphne imports before it builds its server.
"""

from io import BytesIO

import daphne.server
from daphne.http_protocol import HTTPFactory, WebRequest
from daphne.ws_protocol import WebSocketFactory
from django.conf import settings


def too_large_message(limit: int) -> str:
    return (
        f"This request is too large: the limit is {limit / (1024 * 1024):.1f} MB. "
        "Nothing was saved; send a smaller file."
    )


class LimitedWebRequest(WebRequest):
    """daphne's request, minus Twisted's form parsing, with a body-size limit."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._parsePOSTFormSubmission = False  # Django parses bodies, off the event loop
        self.body_limit = settings.MAX_REQUEST_BYTES
        self.body_received = 0
        self.body_too_large = False

    def gotLength(self, length: int | None) -> None:
        if length is not None and length > self.body_limit:
            self._drop_body()
            return
        super().gotLength(length)

    def handleContentChunk(self, data: bytes) -> None:
        if self.body_too_large:
            return
        self.body_received += len(data)
        if self.body_received > self.body_limit:  # chunked or lying about its length
            self._drop_body()
            return
        super().handleContentChunk(data)

    def _drop_body(self) -> None:
        if self.content is not None and not self.content.closed:
            self.content.close()
        self.content = BytesIO()
        self.body_too_large = True

    def process(self):
        if self.body_too_large:
            self.handle_reply(
                {
                    "type": "http.response.start",
                    "status": 413,
                    "headers": [
                        (b"Content-Type", b"text/plain; charset=utf-8"),
                        (b"Connection", b"close"),
                    ],
                }
            )
            self.handle_reply(
                {
                    "type": "http.response.body",
                    "body": too_large_message(self.body_limit).encode(),
                }
            )
            return None
        return super().process()


class LimitedHTTPFactory(HTTPFactory):
    def buildProtocol(self, addr):
        protocol = super().buildProtocol(addr)
        protocol.requestFactory = LimitedWebRequest
        return protocol


class LimitedWebSocketFactory(WebSocketFactory):
    def setProtocolOptions(self, **options) -> None:
        options.setdefault("maxMessagePayloadSize", settings.MAX_WEBSOCKET_MESSAGE_BYTES)
        options.setdefault("maxFramePayloadSize", settings.MAX_WEBSOCKET_MESSAGE_BYTES)
        super().setProtocolOptions(**options)


def install() -> None:
    """Make daphne's server build the limited factories (it looks them up when it starts)."""
    daphne.server.HTTPFactory = LimitedHTTPFactory
    daphne.server.WebSocketFactory = LimitedWebSocketFactory
