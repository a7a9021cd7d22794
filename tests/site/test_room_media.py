"""A live room's media in one process: the audience relay encodes each frame once, however many
spectators decode it, every spectator hears all the sound the player hears, and spectators
cannot move the player."""

import asyncio
import json
import threading
import time

import numpy as np
import pytest
from aiortc import RTCPeerConnection, RTCSessionDescription

from sessions.worker.audience import SPECTATOR_REPLY, Audience, EncodedAudioSource
from sessions.worker.media import LatestFrames, MediaClock

FPS = 20


def test_every_audio_tap_hears_every_sample():
    frames = LatestFrames(8, 8)
    room = frames.audio_tap()
    for index in range(3):
        frames.put(np.zeros((8, 8, 3), np.uint8), np.full(800, 1000 + index, np.int16), index)
    player = np.concatenate([frames.take_audio(2400) for _ in range(3)])
    heard = np.concatenate([frames.take_audio(2400, room) for _ in range(3)])
    assert np.array_equal(player, heard) and player.min() >= 1000  # neither took the other's
    frames.drop_audio_tap(room)
    frames.put(np.zeros((8, 8, 3), np.uint8), np.full(800, 7, np.int16), 3)
    assert not frames.take_audio(960, room).any()  # a dropped tap hears nothing more


async def test_the_audience_sound_survives_a_skip_ahead():
    """Under load the sound track skips ahead to the clock; the audience's 60-ms packets start
    afresh at the new time (a version that re-buffered through PyAV's AudioFifo raised on the
    gap, which ended the relay: every spectator joining later got no sound at all)."""
    frames = LatestFrames(8, 8)
    source = EncodedAudioSource(frames, MediaClock(), frames.audio_tap())
    before = [(await source.recv()).pts for _ in range(3)]
    await asyncio.sleep(0.5)  # 25 frames behind: the track jumps
    after = [(await source.recv()).pts for _ in range(3)]
    source.stop()
    assert before == [0, 2880, 5760]
    assert after[0] >= 5760 + 0.4 * 48_000 and after[1:] == [after[0] + 2880, after[0] + 5760]


class FakeEngine:
    """Paints a moving gradient into LatestFrames at 20 fps on a thread, as the runner does."""

    def __init__(self, frames: LatestFrames) -> None:
        self.frames = frames
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        index = 0
        ramp = np.linspace(0, 255, 64, dtype=np.float32)
        while not self.stop.wait(1 / FPS):
            picture = np.zeros((64, 64, 3), np.uint8)
            picture[..., 0] = (ramp[None, :] + index * 4) % 256
            picture[..., 1] = ramp[:, None]
            tone = (np.sin(np.arange(800) * 0.05 + index) * 8000).astype(np.int16)
            self.frames.put(picture, tone, index)
            index += 1


class Spectator:
    """A receive-only aiortc viewer, as a browser's room page (or a WHEP tool) makes one."""

    def __init__(self) -> None:
        self.pc = RTCPeerConnection()
        self.pc.addTransceiver("video", direction="recvonly")
        self.pc.addTransceiver("audio", direction="recvonly")
        self.channel = self.pc.createDataChannel("input")
        self.replies: list[dict] = []
        self.channel.on("message", lambda raw: self.replies.append(json.loads(raw)))
        self.video_frames: list[np.ndarray] = []
        self.audio_samples = 0
        self._readers: list[asyncio.Task] = []
        self.pc.on("track", self._track)

    def _track(self, track) -> None:
        self._readers.append(asyncio.ensure_future(self._read(track)))

    async def _read(self, track) -> None:
        while True:
            try:
                frame = await track.recv()
            except Exception:  # the track ended
                return
            if track.kind == "video":
                self.video_frames.append(frame.to_ndarray(format="rgb24"))
            else:
                self.audio_samples += frame.samples

    async def join(self, audience: Audience, name: str) -> None:
        await self.pc.setLocalDescription(await self.pc.createOffer())
        answer = await audience.watch(
            reply_channel=name, viewer=name, offer_sdp=self.pc.localDescription.sdp
        )
        await self.pc.setRemoteDescription(RTCSessionDescription(sdp=answer, type="answer"))

    async def close(self) -> None:
        for reader in self._readers:
            reader.cancel()
        await self.pc.close()


async def _until(condition, timeout: float = 30.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, "condition never became true"
        await asyncio.sleep(0.05)


@pytest.fixture
def loopback_ice():
    import aioice.ice

    from sessions.worker.loopback import enable_loopback_candidates

    original = aioice.ice.get_host_addresses
    enable_loopback_candidates(only=True)
    yield
    aioice.ice.get_host_addresses = original


async def test_three_spectators_decode_one_encoding(loopback_ice):
    frames = LatestFrames(64, 64)
    engine = FakeEngine(frames)
    audience = Audience(frames, fps=FPS, ice_servers=[], codec="VP8")
    spectators = [Spectator() for _ in range(3)]
    try:
        for index, spectator in enumerate(spectators):
            await spectator.join(audience, f"viewer-{index}")
        await _until(lambda: all(len(s.video_frames) >= 30 for s in spectators))
        await _until(lambda: all(s.audio_samples >= 48_000 for s in spectators))  # 1 s of sound
        started, encoded = time.monotonic(), audience.frames_encoded
        counts = [len(s.video_frames) for s in spectators]
        await asyncio.sleep(2.0)
        elapsed = time.monotonic() - started
        # One encoder for the room: it ran at the frame rate, not three times it, and every
        # spectator decoded about as many frames as were encoded.
        encoded_rate = (audience.frames_encoded - encoded) / elapsed
        assert 12 <= encoded_rate <= 22, encoded_rate
        for spectator, before in zip(spectators, counts, strict=True):
            decoded_rate = (len(spectator.video_frames) - before) / elapsed
            assert decoded_rate >= 0.8 * encoded_rate, (decoded_rate, encoded_rate)
            picture = spectator.video_frames[-1]
            assert picture.shape == (64, 64, 3) and picture[..., 1].std() > 40  # the gradient

        # A spectator's data channel cannot steer: every message is answered with the refusal.
        viewer = spectators[0]
        await _until(lambda: viewer.channel.readyState == "open")
        viewer.channel.send(json.dumps({"type": "input", "keys": ["W"], "seq": 1}))
        await _until(lambda: SPECTATOR_REPLY in viewer.replies, timeout=10)

        # The host removes viewer-1: its connection closes, the others go on.
        assert await audience.eject(viewer="viewer-1") == 1
        assert set(audience.viewers) == {"viewer-0", "viewer-2"}
        await _until(lambda: spectators[1].pc.connectionState in ("closed", "failed"), 20)
        before = len(spectators[2].video_frames)
        await asyncio.sleep(0.5)
        assert len(spectators[2].video_frames) > before

        # The session ends: everyone is told on their data channel, then hung up.
        ended = {"type": "ended", "reason": "Player ended the session."}
        await audience.close(ended)
        assert audience.viewers == {} and audience.frames_encoded == 0  # encoders stopped
        await _until(lambda: ended in viewer.replies, timeout=10)
        await _until(lambda: spectators[0].pc.connectionState in ("closed", "failed"), 20)
    finally:
        engine.stop.set()
        await audience.close()
        for spectator in spectators:
            await spectator.close()


async def test_a_spectator_who_leaves_without_a_goodbye_is_reported_gone(loopback_ice):
    """A viewer that closes its own connection (a tab closed, a WHEP client that never sent
    its DELETE) is dropped and reported, so the room's viewer count falls; a hang-up the room
    asked for is not reported again."""
    frames = LatestFrames(64, 64)
    engine = FakeEngine(frames)
    gone: list[str] = []
    audience = Audience(frames, fps=FPS, ice_servers=[], codec="VP8", on_gone=gone.append)
    leaver, stayer = Spectator(), Spectator()
    try:
        await leaver.join(audience, "viewer-0")
        await stayer.join(audience, "viewer-1")
        await _until(lambda: len(leaver.video_frames) >= 5 and len(stayer.video_frames) >= 5)
        await leaver.pc.close()
        await _until(lambda: gone == ["viewer-0"], timeout=20)
        await _until(lambda: set(audience.viewers) == {"viewer-1"}, timeout=5)
        await audience.unwatch(reply_channel="viewer-1")  # asked for: not "gone"
        await asyncio.sleep(0.5)
        assert gone == ["viewer-0"] and audience.viewers == {}
    finally:
        engine.stop.set()
        await audience.close()
        for spectator in (leaver, stayer):
            await spectator.close()
