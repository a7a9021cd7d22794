"""Play a Worldsite world from Python: list the worlds, start a session, watch it over WHEP,
walk forward, say a sentence, save what you saw to an MP4, and end the session.

    pip install aiortc            # PyAV comes with it; the rest is the standard library
    export WORLDSITE_API_KEY=wsk_...
    python play_world.py --base-url https://worldsite.example --out walk.mp4

Every call sends `Authorization: Bearer <key>`. An error comes back as problem+json (RFC 9457);
this program prints its title and detail and exits with status 1. Guide: <base-url>/api/
"""

import argparse
import asyncio
import contextlib
import json
import os
import sys
import threading
import urllib.error
import urllib.request
from typing import Any
from urllib.parse import urljoin

from aiortc import MediaStreamTrack, RTCPeerConnection, RTCSessionDescription
from aiortc.contrib.media import MediaRecorder


class ApiError(Exception):
    """A call that failed: the problem's title and detail, or why the server was not reached."""


class Api:
    def __init__(self, base_url: str, key: str) -> None:
        self.root = base_url.rstrip("/") + "/api/v1/"
        self.key = key

    def request(
        self, method: str, url: str, body: bytes | None = None, content_type: str = ""
    ) -> tuple[dict[str, str], bytes]:
        """One call (url may be relative to /api/v1/); its headers and body, or ApiError."""
        with self.open(method, url, body, content_type) as response:
            return dict(response.headers), response.read()

    def open(self, method: str, url: str, body: bytes | None = None, content_type: str = ""):
        """The response, still to be read (the event stream is read as it arrives)."""
        request = urllib.request.Request(urljoin(self.root, url), data=body, method=method)
        request.add_header("Authorization", f"Bearer {self.key}")
        if content_type:
            request.add_header("Content-Type", content_type)
        try:
            return urllib.request.urlopen(request, timeout=120)
        except urllib.error.HTTPError as error:
            raise ApiError(describe_problem(error)) from None
        except urllib.error.URLError as error:
            raise ApiError(f"Cannot reach {self.root}: {error.reason}") from None

    def json(self, method: str, url: str, payload: Any = None) -> Any:
        body = json.dumps(payload).encode() if payload is not None else None
        return json.loads(self.request(method, url, body, "application/json")[1] or b"null")


def describe_problem(error: urllib.error.HTTPError) -> str:
    """'<status> <title>: <detail>' from a problem+json answer (or the bare status if not)."""
    try:
        problem = json.loads(error.read())
        return f"{error.code} {problem['title']}: {problem['detail']}"
    except (ValueError, KeyError, TypeError):
        return f"{error.code} {error.reason}"


def follow_events(api: Api, url: str, loop: asyncio.AbstractEventLoop) -> asyncio.Queue:
    """Read the session's server-sent events on a thread; each arrives as (event, data) on the
    returned queue, and (None, None) when the stream closes. Keep it open while you play: it is
    what tells the server someone is there."""
    events: asyncio.Queue = asyncio.Queue()
    response = api.open("GET", url)

    def read() -> None:
        name = ""
        with contextlib.suppress(OSError), response:
            for raw in response:
                line = raw.decode().rstrip("\r\n")
                if line.startswith("event: "):
                    name = line[len("event: ") :]
                elif line.startswith("data: "):
                    data = json.loads(line[len("data: ") :])
                    loop.call_soon_threadsafe(events.put_nowait, (name, data))
        loop.call_soon_threadsafe(events.put_nowait, (None, None))

    threading.Thread(target=read, daemon=True).start()
    return events


async def wait_for_state(events: asyncio.Queue, states: tuple[str, ...]) -> str:
    """Print queue updates and state changes until the session reaches one of `states`."""
    while True:
        event, data = await asyncio.wait_for(events.get(), timeout=600)
        if event == "queue":
            print(f"queued: position {data['position']}, about {data['eta_s']} s to wait")
        elif event == "state":
            print(f"session is {data['state']}")
            if data["state"] in states:
                return data["state"]
        elif event in ("ended", None):
            reason = (data or {}).get("reason") or "the event stream closed"
            raise ApiError(f"The session ended before it was played: {reason}")


class VideoFirst(MediaStreamTrack):
    """A received track, passed on to the recorder; audio waits for the first video frame.

    MediaRecorder writes the MP4's header with the first packet of either stream, and it only
    learns the picture's size from the first video frame: audio written before that would
    leave a file without its video."""

    def __init__(self, track: MediaStreamTrack, video_seen: asyncio.Event) -> None:
        super().__init__()
        self.kind, self.track, self.video_seen = track.kind, track, video_seen

    async def recv(self):
        if self.kind == "audio":
            await self.video_seen.wait()
        frame = await self.track.recv()
        if self.kind == "video":
            self.video_seen.set()
        return frame


def on_channel_message(raw: str) -> None:
    """The `input` channel answers a sentence the world took, or an input it refused."""
    message = json.loads(raw)
    if message.get("type") == "prompt_ack":
        print(f"the world heard: {message['text']!r}")
    elif message.get("type") == "error":
        print(f"input refused ({message['code']}): {message['message']}", file=sys.stderr)


async def play(args: argparse.Namespace) -> None:
    api = Api(args.base_url, args.key)
    loop = asyncio.get_running_loop()

    worlds = (await asyncio.to_thread(api.json, "GET", "worlds/"))["items"]
    for world in worlds:
        print(f"world {world['slug']}: {world['title']}")
    slug = args.world or (worlds[0]["slug"] if worlds else None)
    if slug is None:
        raise ApiError("No published worlds to play.")

    session = await asyncio.to_thread(api.json, "POST", "sessions/", {"world": slug})
    session_url = f"sessions/{session['id']}/"
    print(f"session {session['id']} in {slug}: {session['state']}")
    peer = RTCPeerConnection()
    recorder = None
    whep_resource = None
    try:
        events = await asyncio.to_thread(follow_events, api, session["events_url"], loop)
        state = await wait_for_state(events, ("starting", "live"))  # through the queue

        # WHEP: a receive-only offer for video and audio, plus the `input` data channel.
        recorder = MediaRecorder(args.out)  # H.264 and AAC in an MP4
        peer.addTransceiver("video", direction="recvonly")
        peer.addTransceiver("audio", direction="recvonly")
        channel = peer.createDataChannel("input")
        channel_open = asyncio.Event()
        channel.on("open", channel_open.set)
        channel.on("message", on_channel_message)
        video_seen = asyncio.Event()
        peer.on("track", lambda track: recorder.addTrack(VideoFirst(track, video_seen)))
        await peer.setLocalDescription(await peer.createOffer())  # gathers ICE candidates
        headers, answer = await asyncio.to_thread(
            api.request,
            "POST",
            session["whep_url"],
            peer.localDescription.sdp.encode(),
            "application/sdp",
        )
        whep_resource = urljoin(session["whep_url"], headers["Location"])
        await peer.setRemoteDescription(RTCSessionDescription(sdp=answer.decode(), type="answer"))
        await recorder.start()

        if state != "live":  # it goes live once its picture is connected
            await wait_for_state(events, ("live",))
        await asyncio.wait_for(channel_open.wait(), timeout=30)
        await asyncio.wait_for(video_seen.wait(), timeout=30)
        print(f"walking forward and saying {args.prompt!r}; recording {args.seconds} s")
        channel.send(json.dumps({"type": "input", "keys": ["W"]}))  # W held down from now on
        walk_first = min(1.0, args.seconds / 2)
        await asyncio.sleep(walk_first)
        channel.send(json.dumps({"type": "prompt", "text": args.prompt}))
        await asyncio.sleep(args.seconds - walk_first)
        channel.send(json.dumps({"type": "input", "keys": []}))  # let go
    finally:
        if whep_resource:  # hang up (the session itself runs on until it is ended)
            with contextlib.suppress(ApiError):
                await asyncio.to_thread(api.request, "DELETE", whep_resource)
        await peer.close()
        ended = await asyncio.to_thread(api.json, "DELETE", session_url)
        print(f"session {ended['state']} after {ended['seconds_used']} s")
        if recorder:  # last: whatever happens to the file, the session is ended first
            await recorder.stop()
    print(f"saved {args.out}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base-url", default="http://127.0.0.1:8000", help="the site's address")
    parser.add_argument(
        "--key",
        default=os.environ.get("WORLDSITE_API_KEY"),
        help="an API key (default: $WORLDSITE_API_KEY)",
    )
    parser.add_argument("--world", help="a world's slug (default: the first listed)")
    parser.add_argument("--prompt", default="make it rain", help="a sentence to say")
    parser.add_argument("--seconds", type=float, default=10, help="how long to record")
    parser.add_argument("--out", default="worldsite.mp4", help="the MP4 to write")
    args = parser.parse_args()
    if not args.key:
        parser.error("give --key or set WORLDSITE_API_KEY (make one on your profile page)")
    try:
        asyncio.run(play(args))
    except ApiError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    except TimeoutError:
        print("error: the server stopped answering in time", file=sys.stderr)
        return 1
    except KeyboardInterrupt:  # the session was ended on the way out (play's `finally`)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
