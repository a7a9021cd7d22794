"""A live room's spectators: the session's picture and sound, encoded once, relayed to all.

The player's own connection is untouched (its encoder follows its network). For the audience
the worker encodes each generated frame once more, whatever the number of viewers, and
aiortc's MediaRelay hands the same encoded packets to every viewer's connection, whose sender
only packetizes and encrypts them. So a spectator costs no engine time and no encoding: a room
costs what its session costs, plus one encoder. Keyframes come every second and whenever a
viewer's connection comes up, so a spectator who joins mid-stream has a picture at once.

Viewers only receive: a data channel they open is answered that spectators cannot move the
player (audience prompts go through the room's socket, sessions/room_services.py).
"""

import asyncio
import fractions
import json
import logging
from collections import deque
from collections.abc import Callable
from typing import Any

import av
import numpy as np
from aiortc import MediaStreamTrack, RTCPeerConnection, RTCSessionDescription
from aiortc.contrib.media import MediaRelay
from av.packet import Packet

from sessions.worker.media import (
    AUDIO_RATE,
    AUDIO_TIME_BASE,
    VIDEO_TIME_BASE,
    AudioTap,
    GeneratedAudioTrack,
    GeneratedVideoTrack,
    LatestFrames,
    MediaClock,
)
from sessions.worker.peer import prefer_codec, rtc_configuration

logger = logging.getLogger(__name__)

KEEPALIVE_S = 1.0  # an unchanged picture is re-sent this often
VIDEO_BITRATE = 500_000  # aiortc's own starting bitrate for the player
AUDIO_BITRATE = 48_000
AUDIO_PACKET_MS = 60
# libvpx settings as aiortc's Vp8Encoder uses them (real time, no look-ahead), plus a
# keyframe every second for viewers who join late or lose a packet.
VP8_OPTIONS = {
    "cpu-used": "-6",
    "deadline": "realtime",
    "lag-in-frames": "0",
    "noise-sensitivity": "4",
    "partitions": "0",
    "static-thresh": "1",
    "undershoot-pct": "100",
    "overshoot-pct": "15",
}
H264_OPTIONS = {"preset": "ultrafast", "tune": "zerolatency", "profile": "baseline"}
SPECTATOR_REPLY = {
    "type": "error",
    "code": "spectator",
    "message": "Spectators cannot move the player; send an audience prompt in the room.",
}


class EncodedVideoSource(MediaStreamTrack):
    """The session's frames (at the pace the player's track sends them), encoded once."""

    kind = "video"

    def __init__(self, frames: LatestFrames, clock: MediaClock, fps: int, codec: str) -> None:
        super().__init__()
        self._raw = GeneratedVideoTrack(frames, clock, fps)
        self._fps = fps
        self._codec_name = codec.upper()
        self._encoder: Any = None
        self._pending: deque[Packet] = deque()
        self.keyframe_wanted = True
        self.frames_encoded = 0
        self._last_encoded_at = -1.0

    def _open_encoder(self, width: int, height: int) -> Any:
        name = "libvpx" if self._codec_name == "VP8" else "libx264"
        encoder: Any = av.CodecContext.create(name, "w")
        encoder.width, encoder.height = width, height
        encoder.pix_fmt = "yuv420p"
        encoder.bit_rate = VIDEO_BITRATE
        encoder.time_base = VIDEO_TIME_BASE
        encoder.framerate = fractions.Fraction(self._fps, 1)
        encoder.gop_size = self._fps
        encoder.thread_count = 1  # a 128x128 picture: threads cost more than they save
        encoder.options = VP8_OPTIONS if name == "libvpx" else H264_OPTIONS
        return encoder

    def encode(self, frame: av.VideoFrame) -> list[Packet]:
        if self._encoder is None:
            self._encoder = self._open_encoder(frame.width, frame.height)
        image = frame.reformat(format="yuv420p")
        image.pts, image.time_base = frame.pts, VIDEO_TIME_BASE
        if self.keyframe_wanted:
            image.pict_type = av.video.frame.PictureType.I
            self.keyframe_wanted = False
        packets = list(self._encoder.encode(image))
        for packet in packets:  # no look-ahead: each packet is this frame
            packet.pts, packet.time_base = frame.pts, VIDEO_TIME_BASE
        self.frames_encoded += 1
        return packets

    async def recv(self) -> Packet:
        while not self._pending:
            frame = await self._raw.recv()
            # A repeat of the last picture (the engine fell behind, or has not started) is
            # news to no decoder: send one a second to keep the stream alive, skip the rest.
            if self._raw.repeated and frame.time - self._last_encoded_at < KEEPALIVE_S:
                continue
            self._last_encoded_at = frame.time
            try:
                self._pending.extend(self.encode(frame))
            except Exception:  # a failure here would end the relay: every viewer's picture
                logger.exception("could not encode the audience's picture; skipped")
        return self._pending.popleft()

    def stop(self) -> None:
        super().stop()
        self._raw.stop()


class EncodedAudioSource(MediaStreamTrack):
    """The session's sound (its own tap, so the player hears all of theirs), Opus once, in
    60-ms packets: a third of the packets the player's 20-ms ones take, so each viewer costs
    the worker a third of the sending (spectators do not talk back, 40 ms more is unheard)."""

    kind = "audio"

    def __init__(self, frames: LatestFrames, clock: MediaClock, tap: AudioTap) -> None:
        super().__init__()
        self._raw = GeneratedAudioTrack(frames, clock, tap)
        encoder: Any = av.CodecContext.create("libopus", "w")
        encoder.bit_rate = AUDIO_BITRATE
        encoder.format = "s16"
        encoder.layout = "mono"
        encoder.sample_rate = AUDIO_RATE
        encoder.time_base = AUDIO_TIME_BASE
        encoder.options = {"application": "voip", "frame_duration": str(AUDIO_PACKET_MS)}
        encoder.open()
        self._encoder = encoder
        self._held: list[av.AudioFrame] = []  # the 20-ms frames of the packet being filled
        self._pending: deque[Packet] = deque()

    async def recv(self) -> Packet:
        while not self._pending:
            frame = await self._raw.recv()
            last = self._held[-1] if self._held else None
            if last is not None and frame.pts != (last.pts or 0) + last.samples:
                # The track skipped ahead (it fell behind the clock): the packet starts afresh
                # at the new time, so the viewers' sound stays in step with the picture.
                self._held.clear()
            self._held.append(frame)
            if sum(held.samples for held in self._held) >= self._encoder.frame_size:
                try:
                    self._pending.extend(self._encode(self._held))
                except Exception:  # a failure here would end the relay: every viewer's sound
                    logger.exception("could not encode the audience's sound; skipped")
                self._held = []
        return self._pending.popleft()

    def _encode(self, frames: list[av.AudioFrame]) -> list[Packet]:
        pcm = np.concatenate([frame.to_ndarray().reshape(-1) for frame in frames])
        chunk = av.AudioFrame.from_ndarray(pcm.reshape(1, -1), format="s16", layout="mono")
        chunk.sample_rate, chunk.pts, chunk.time_base = AUDIO_RATE, frames[0].pts, AUDIO_TIME_BASE
        packets = list(self._encoder.encode(chunk))
        for packet in packets:
            packet.pts, packet.time_base = chunk.pts, AUDIO_TIME_BASE
        return packets

    def stop(self) -> None:
        super().stop()
        self._raw.stop()


class ViewerPeer:
    """One spectator's receive-only connection, fed from the room's relay."""

    def __init__(
        self,
        viewer: str,
        *,
        ice_servers: list[dict[str, Any]],
        video_codec: str,
        on_state: Callable[["ViewerPeer", str], None],
    ) -> None:
        self.viewer = viewer
        self.video_codec = video_codec
        self.pc = RTCPeerConnection(rtc_configuration(ice_servers))
        self._tracks: list[MediaStreamTrack] = []
        self._channels: list = []
        pc = self.pc

        @pc.on("connectionstatechange")
        def _state_changed() -> None:
            on_state(self, pc.connectionState)

        @pc.on("datachannel")
        def _data_channel(channel) -> None:
            self._channels.append(channel)
            channel.on("message", lambda raw: self._send(channel, SPECTATOR_REPLY))

    def _send(self, channel, message: dict[str, Any]) -> None:
        try:
            if channel.readyState == "open":
                channel.send(json.dumps(message))
        except Exception:  # a closing channel must not break the relay
            logger.debug("could not reply on a viewer's data channel", exc_info=True)

    async def answer(self, offer_sdp: str, video: MediaStreamTrack, audio: MediaStreamTrack) -> str:
        await self.pc.setRemoteDescription(RTCSessionDescription(sdp=offer_sdp, type="offer"))
        self._tracks = [video, audio]
        self.pc.addTrack(video)
        self.pc.addTrack(audio)
        prefer_codec(self.pc, f"video/{self.video_codec}")
        await self.pc.setLocalDescription(await self.pc.createAnswer())
        return self.pc.localDescription.sdp

    def notify(self, message: dict[str, Any]) -> None:
        for channel in self._channels:
            self._send(channel, message)

    async def close(self) -> None:
        for track in self._tracks:
            track.stop()
        await self.pc.close()


class Audience:
    """The spectators of one session. The encoders run only while someone watches."""

    def __init__(
        self,
        frames: LatestFrames,
        *,
        fps: int,
        ice_servers: list[dict[str, Any]],
        codec: str,
        on_gone: Callable[[str], None] | None = None,
    ) -> None:
        self.frames = frames
        # Told the reply channel of a viewer whose connection failed or closed on its own (a
        # WHEP client that vanished without its DELETE): the room's viewer count drops too.
        self.on_gone = on_gone
        self.fps = fps
        self.ice_servers = ice_servers
        self.codec = codec
        self.viewers: dict[str, ViewerPeer] = {}  # reply channel -> connection
        self._relay: MediaRelay | None = None
        self._video: EncodedVideoSource | None = None
        self._audio: EncodedAudioSource | None = None
        self._tap: AudioTap | None = None
        self._hangups: set[asyncio.Task] = set()

    def _sources(self) -> tuple[MediaRelay, EncodedVideoSource, EncodedAudioSource]:
        if self._relay is None or self._video is None or self._audio is None:
            clock = MediaClock()
            self._tap = self.frames.audio_tap()
            self._video = EncodedVideoSource(self.frames, clock, self.fps, self.codec)
            self._audio = EncodedAudioSource(self.frames, clock, self._tap)
            self._relay = MediaRelay()
        return self._relay, self._video, self._audio

    @property
    def frames_encoded(self) -> int:
        return self._video.frames_encoded if self._video else 0

    async def watch(self, *, reply_channel: str, viewer: str, offer_sdp: str) -> str:
        """Answer a spectator's offer; a second offer on the same channel replaces the first."""
        await self.unwatch(reply_channel=reply_channel)
        relay, video, audio = self._sources()
        peer = ViewerPeer(
            viewer, ice_servers=self.ice_servers, video_codec=self.codec, on_state=self._state
        )
        try:
            answer = await peer.answer(
                offer_sdp, relay.subscribe(video, buffered=True), relay.subscribe(audio)
            )
        except Exception:
            await peer.close()
            await self._stop_sources_if_unwatched()
            raise
        self.viewers[reply_channel] = peer
        return answer

    def _state(self, peer: ViewerPeer, state: str) -> None:
        if state == "connected" and self._video is not None:
            self._video.keyframe_wanted = True  # a picture for the newcomer right away
        elif state in ("failed", "closed"):
            for channel, known in list(self.viewers.items()):
                if known is peer:  # (a hang-up we asked for has left self.viewers already)
                    task = asyncio.ensure_future(self.unwatch(reply_channel=channel))
                    self._hangups.add(task)
                    task.add_done_callback(self._hangups.discard)
                    if self.on_gone is not None:
                        self.on_gone(channel)

    async def unwatch(self, *, reply_channel: str) -> None:
        peer = self.viewers.pop(reply_channel, None)
        if peer is not None:
            await peer.close()
            await self._stop_sources_if_unwatched()

    async def eject(self, *, viewer: str) -> int:
        """Close every connection of one spectator (the host removed them)."""
        channels = [channel for channel, peer in self.viewers.items() if peer.viewer == viewer]
        for channel in channels:
            await self.unwatch(reply_channel=channel)
        return len(channels)

    async def close(self, message: dict[str, Any] | None = None) -> None:
        """The session is over: tell every viewer (if they opened a data channel), hang up."""
        peers, self.viewers = list(self.viewers.values()), {}
        if message is not None:
            for peer in peers:
                peer.notify(message)
        await asyncio.gather(*(peer.close() for peer in peers), return_exceptions=True)
        await self._stop_sources_if_unwatched()

    async def _stop_sources_if_unwatched(self) -> None:
        if self.viewers or self._relay is None:
            return
        for source in (self._video, self._audio):
            if source is not None:
                source.stop()
        if self._tap is not None:
            self.frames.drop_audio_tap(self._tap)
        self._relay = self._video = self._audio = self._tap = None
