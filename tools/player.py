"""A Python player: WebSocket signalling + an aiortc peer, as the browser does it.

Used by the play tests and by the soak (tools.soak); needs the dev requirements (websockets).
"""

import asyncio
import contextlib
import json
import time

import numpy as np
import websockets
from aiortc import RTCPeerConnection, RTCSessionDescription
from aiortc.mediastreams import MediaStreamError


class PlayClient:
    def __init__(
        self, host: str, session_id: str, sessionid_cookie: str, keep_frames: bool = True
    ) -> None:
        self.host = host
        self.session_id = session_id
        self.cookie = sessionid_cookie
        self.ws = None
        self.pc: RTCPeerConnection | None = None
        self.input = None
        self.events = None
        self.messages: list[dict] = []
        self.engine_messages: list[dict] = []
        self.video: list[tuple[float, np.ndarray]] = []
        self.keep_frames = keep_frames  # False: count frames only (long soaks)
        self.frame_count = 0
        self.audio_samples = 0
        self.audio_rate = 0
        self.live = asyncio.Event()
        self.final = asyncio.Event()
        self._tasks: list[asyncio.Task] = []
        self.seq = 0
        self._status_live = False

    async def connect(self) -> None:
        self.ws = await websockets.connect(
            f"ws://{self.host}/ws/play/{self.session_id}/",
            additional_headers={
                "Cookie": f"sessionid={self.cookie}",
                "Origin": f"http://{self.host}",
            },
            open_timeout=20,
        )
        self._tasks.append(asyncio.ensure_future(self._read_ws()))

    async def _read_ws(self) -> None:
        with contextlib.suppress(websockets.ConnectionClosed):
            async for raw in self.ws:
                message = json.loads(raw)
                self.messages.append(message)
                if message["type"] == "ready":
                    await self._offer()
                elif message["type"] == "answer":
                    await self.pc.setRemoteDescription(
                        RTCSessionDescription(sdp=message["sdp"], type="answer")
                    )
                elif message["type"] == "status" and message["state"] == "live":
                    self._status_live = True
                    self._maybe_live()
                elif message["type"] == "status" and message["state"] in ("ended", "failed"):
                    self.final.set()
        self.final.set()

    def _maybe_live(self) -> None:
        """Live once the server says so and the input channel is open (the SCTP handshake
        can finish a moment after the server sees the connection up)."""
        if self._status_live and self.input is not None and self.input.readyState == "open":
            self.live.set()

    async def _offer(self) -> None:
        self.pc = RTCPeerConnection()
        self.pc.addTransceiver("video", direction="recvonly")
        self.pc.addTransceiver("audio", direction="recvonly")
        self.input = self.pc.createDataChannel("input", ordered=False, maxRetransmits=0)
        self.events = self.pc.createDataChannel("events")
        self.input.on("open", self._maybe_live)

        @self.events.on("message")
        def _engine_message(raw) -> None:
            self.engine_messages.append(json.loads(raw))

        @self.pc.on("track")
        def _track(track) -> None:
            reader = self._read_video if track.kind == "video" else self._read_audio
            self._tasks.append(asyncio.ensure_future(reader(track)))

        await self.pc.setLocalDescription(await self.pc.createOffer())
        await self.send({"type": "offer", "sdp": self.pc.localDescription.sdp})

    async def _read_video(self, track) -> None:
        with contextlib.suppress(MediaStreamError):
            while True:
                frame = await track.recv()
                self.frame_count += 1
                if self.keep_frames:
                    self.video.append((time.monotonic(), frame.to_ndarray(format="rgb24")))

    async def _read_audio(self, track) -> None:
        with contextlib.suppress(MediaStreamError):
            while True:
                frame = await track.recv()
                self.audio_samples += frame.samples
                self.audio_rate = frame.sample_rate

    async def send(self, message: dict) -> None:
        await self.ws.send(json.dumps(message))

    def hold(self, keys: list[str], yaw: float = 0.0) -> None:
        self.seq += 1
        self.input.send(
            json.dumps({"type": "input", "keys": keys, "yaw": yaw, "pitch": 0.0, "seq": self.seq})
        )

    def prompt(self, text: str) -> None:
        self.events.send(json.dumps({"type": "prompt", "text": text}))

    async def hold_for(self, keys: list[str], seconds: float, yaw: float = 0.0) -> None:
        """Send the held keys every 50 ms, as the page does."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            self.hold(keys, yaw)
            await asyncio.sleep(0.05)

    async def hold_until_frames(self, keys: list[str], count: int, timeout: float = 30.0) -> None:
        """Hold the keys until `count` more frames have arrived: a pace that follows the stream,
        not the clock, so a busy machine makes the test slower instead of wrong."""
        start = self.frame_count
        deadline = time.monotonic() + timeout
        while self.frame_count < start + count:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self.frame_count - start} of {count} frames came")
            self.hold(keys)
            await asyncio.sleep(0.05)

    def frames_between(self, start: float, end: float) -> list[np.ndarray]:
        return [frame for stamp, frame in self.video if start <= stamp < end]

    def status(self, state: str) -> dict | None:
        return next(
            (m for m in self.messages if m["type"] == "status" and m.get("state") == state), None
        )

    async def close(self) -> None:
        for task in self._tasks:
            task.cancel()
        if self.pc is not None:
            await self.pc.close()
        if self.ws is not None:
            await self.ws.close()
