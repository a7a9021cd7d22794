"""Spectators as a streamer's tool would be: aiortc clients pulling a live room's picture and
sound through its viewer WHEP URL, decoding every frame. Driven by tools.bench over stdin:

    python -m tools.room_viewers --host 127.0.0.1:8765 --whep /api/v1/rooms/<code>/whep/ KEY...

prints `ready` once every viewer decodes; then each `count` line on stdin is answered with a
JSON list of the frames each viewer decoded since the previous `count`.
"""

import argparse
import asyncio
import http.client
import json
import sys

from aiortc import RTCPeerConnection, RTCSessionDescription


class Viewer:
    def __init__(self) -> None:
        self.pc = RTCPeerConnection()
        self.pc.addTransceiver("video", direction="recvonly")
        self.pc.addTransceiver("audio", direction="recvonly")
        self.frames = 0
        self._readers: list[asyncio.Task] = []
        self.pc.on("track", self._track)

    def _track(self, track) -> None:
        self._readers.append(asyncio.ensure_future(self._read(track)))

    async def _read(self, track) -> None:
        while True:
            try:
                await track.recv()  # aiortc decodes here
            except Exception:  # the track ended
                return
            if track.kind == "video":
                self.frames += 1

    async def connect(self, host: str, path: str, key: str) -> None:
        await self.pc.setLocalDescription(await self.pc.createOffer())
        answer = await asyncio.to_thread(_post_offer, host, path, key, self.pc.localDescription.sdp)
        await self.pc.setRemoteDescription(RTCSessionDescription(sdp=answer, type="answer"))


def _post_offer(host: str, path: str, key: str, sdp: str) -> str:
    connection = http.client.HTTPConnection(host, timeout=60)
    headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/sdp"}
    connection.request("POST", path, sdp.encode(), headers)
    response = connection.getresponse()
    body = response.read().decode()
    if response.status != 201:
        raise SystemExit(f"WHEP offer refused: {response.status} {body}")
    return body


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--host", required=True)
    parser.add_argument("--whep", required=True, help="the room's viewer WHEP path")
    parser.add_argument("keys", nargs="+", help="one API key per viewer")
    args = parser.parse_args()

    from sessions.worker.loopback import enable_loopback_candidates

    enable_loopback_candidates(only=True)
    viewers = [Viewer() for _ in args.keys]
    for viewer, key in zip(viewers, args.keys, strict=True):
        await viewer.connect(args.host, args.whep, key)
    for _ in range(600):  # two minutes for every viewer's first frames
        if min(viewer.frames for viewer in viewers) >= 20:
            break
        await asyncio.sleep(0.2)
    else:
        raise SystemExit("the room's picture never reached every viewer")
    print("ready", flush=True)
    counted = [viewer.frames for viewer in viewers]
    while line := await asyncio.to_thread(sys.stdin.readline):
        if line.strip() == "count":
            now = [viewer.frames for viewer in viewers]
            print(json.dumps([a - b for a, b in zip(now, counted, strict=True)]), flush=True)
            counted = now
    for viewer in viewers:
        await viewer.pc.close()


if __name__ == "__main__":
    asyncio.run(main())
