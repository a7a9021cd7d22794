"""One player's WebRTC connection: generated video+audio down, inputs and microphone up."""

import asyncio
import json
import logging
from collections.abc import Callable
from typing import Any

import numpy as np
from aiortc import (
    RTCConfiguration,
    RTCIceServer,
    RTCPeerConnection,
    RTCRtpSender,
    RTCSessionDescription,
)
from aiortc.mediastreams import MediaStreamError

from sessions.protocol import ProtocolError, engine_event, parse_data_message
from sessions.throttle import TokenBucket, prompt_limit
from sessions.worker.media import GeneratedAudioTrack, GeneratedVideoTrack, LatestFrames, MediaClock
from sessions.worker.microphone import MicrophoneFeatures
from sessions.worker.runner import SessionRunner

logger = logging.getLogger(__name__)


def rtc_configuration(ice_servers: list[dict[str, Any]]) -> RTCConfiguration:
    """ICE servers from settings only: aiortc's own default would reach a public STUN server."""
    return RTCConfiguration(iceServers=[RTCIceServer(**server) for server in ice_servers])


def unsynchronised(sender: RTCRtpSender) -> RTCRtpSender:
    """Announce this sender's track in a media stream of its own.

    A browser plays the tracks of one stream in sync: it holds the picture back until the
    sound's jitter buffer (30-40 ms here) is matched, and over the first half-minute of a
    session the player's video buffer grew from 15 to 30 ms, input-to-frame by as much
    (tools.bench, `jitter_buffer_ms`). In a game the picture must answer the keys first; the
    sound may trail it by a few tens of ms. (aiortc gives every sender of a connection the same
    stream id and has no setting for it.)"""
    sender._stream_id = f"{sender._stream_id}-{sender.kind}"
    return sender


def prefer_codec(pc: RTCPeerConnection, mime_type: str) -> None:
    codecs = RTCRtpSender.getCapabilities("video").codecs
    preferred = [c for c in codecs if c.mimeType.lower() == mime_type.lower()]
    if not preferred:
        raise ValueError(f"Video codec {mime_type} is not available.")
    rtx = [c for c in codecs if c.mimeType.lower() == "video/rtx"]
    for transceiver in pc.getTransceivers():
        if transceiver.kind == "video":
            transceiver.setCodecPreferences(preferred + rtx)


class PlayPeer:
    """Owns the RTCPeerConnection, the media tracks and the input plumbing of one session."""

    def __init__(
        self,
        runner: SessionRunner,
        frames: LatestFrames,
        *,
        fps: int,
        ice_servers: list[dict[str, Any]],
        video_codec: str = "VP8",
        on_connection_state: Callable[[str], None] | None = None,
    ) -> None:
        self.runner = runner
        self.frames = frames
        self.fps = fps
        self.video_codec = video_codec
        self.on_connection_state = on_connection_state
        self.pc = RTCPeerConnection(rtc_configuration(ice_servers))
        self.clock = MediaClock()
        self.bad_messages = 0
        self.dropped_inputs = 0
        # Any message at all: a flood is dropped before it is parsed (a page sends ~20 a second).
        self._message_limit = TokenBucket(rate=200, burst=200)
        self._error_replies = TokenBucket(rate=2, burst=5)  # bad messages are counted, not echoed
        self._movement_limit = TokenBucket(rate=120, burst=60)
        self._prompt_limit = prompt_limit()
        self._tasks: set[asyncio.Task] = set()
        self._channels: list = []
        self._install_handlers()

    def _install_handlers(self) -> None:
        pc = self.pc

        @pc.on("connectionstatechange")
        def _state_changed() -> None:
            if self.on_connection_state is not None:
                self.on_connection_state(pc.connectionState)

        @pc.on("datachannel")
        def _data_channel(channel) -> None:
            self._channels.append(channel)

            @channel.on("message")
            def _message(raw) -> None:
                try:
                    self._handle_data_message(channel, raw)
                except Exception:  # never let a message reach aiortc's transport as an error
                    logger.exception("data-channel message could not be handled")
                    self.bad_messages += 1

        @pc.on("track")
        def _track(track) -> None:
            if track.kind == "audio":
                task = asyncio.ensure_future(self._consume_microphone(track))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)

    def _reply(self, channel, message: dict[str, Any]) -> None:
        try:
            if channel.readyState == "open":
                channel.send(json.dumps(message))
        except Exception:  # a closing channel must not break input handling
            logger.debug("could not reply on data channel", exc_info=True)

    def _handle_data_message(self, channel, raw) -> None:
        if not self._message_limit.allow():
            self.dropped_inputs += 1
            return
        try:
            message = parse_data_message(raw)
        except ProtocolError as error:
            self.bad_messages += 1
            if self._error_replies.allow():
                self._reply(
                    channel, {"type": "error", "code": error.code, "message": error.message}
                )
            return
        if message["type"] == "input":
            if not self._movement_limit.allow():
                self.dropped_inputs += 1
                return
            if not self.runner.push(engine_event(message), seq=message["seq"]):
                self.dropped_inputs += 1
            return
        if not self._prompt_limit.allow():
            self._reply(
                channel,
                {
                    "type": "error",
                    "code": "rate_limited",
                    "message": "Slow down: one sentence every few seconds.",
                },
            )
            return
        if self.runner.push(engine_event(message)):
            self._reply(channel, {"type": "prompt_ack", "text": message["text"]})
        else:
            self.dropped_inputs += 1

    async def _consume_microphone(self, track) -> None:
        features: MicrophoneFeatures | None = None
        while True:
            try:
                frame = await track.recv()
            except MediaStreamError:
                return
            pcm = frame.to_ndarray()
            if pcm.ndim == 2 and pcm.shape[0] > 1:  # planar: one row a channel
                pcm = pcm.mean(axis=0)
            elif pcm.ndim == 2 and len(frame.layout.channels) > 1:  # packed: interleaved
                pcm = pcm.reshape(-1, len(frame.layout.channels)).mean(axis=1)
            if features is None:
                features = MicrophoneFeatures(frame.sample_rate, 1.0 / self.fps)
            for loudness, onset in features.feed(np.asarray(pcm).ravel()):
                self.runner.push({"kind": "audio", "loudness": loudness, "onset": onset})

    async def answer(self, offer_sdp: str) -> str:
        """Accept the browser's offer (it carries all its ICE candidates) and return our answer."""
        await self.pc.setRemoteDescription(RTCSessionDescription(sdp=offer_sdp, type="offer"))
        self.pc.addTrack(GeneratedVideoTrack(self.frames, self.clock, self.fps))
        unsynchronised(self.pc.addTrack(GeneratedAudioTrack(self.frames, self.clock)))
        prefer_codec(self.pc, f"video/{self.video_codec}")
        await self.pc.setLocalDescription(await self.pc.createAnswer())
        return self.pc.localDescription.sdp

    def notify(self, message: dict[str, Any]) -> None:
        """Send a message to the page over every open data channel (e.g. the session ending)."""
        for channel in self._channels:
            self._reply(channel, message)

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await self.pc.close()
