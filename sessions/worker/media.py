"""Media tracks that stream what the engine generates, stamped from one shared clock.

The engine produces frames on its own thread; the tracks never wait for it. The video track
hands out the newest frame at each tick (a slow generator repeats a frame rather than building
delay), the audio track drains a short buffer and plays silence when it runs dry. Both stamp
their pts from the same MediaClock, so a late-starting track cannot drift out of sync.
"""

import asyncio
import fractions
import threading
import time
from collections import deque

import numpy as np
from aiortc import MediaStreamTrack
from aiortc.mediastreams import MediaStreamError
from av import AudioFrame, VideoFrame

VIDEO_CLOCK_RATE = 90_000
VIDEO_TIME_BASE = fractions.Fraction(1, VIDEO_CLOCK_RATE)
AUDIO_RATE = 48_000
AUDIO_TIME_BASE = fractions.Fraction(1, AUDIO_RATE)
AUDIO_PTIME = 0.020
AUDIO_SAMPLES = int(AUDIO_RATE * AUDIO_PTIME)  # 960 per Opus frame
MAX_AUDIO_BUFFER_S = 0.25  # beyond this, old audio is dropped to keep latency bounded


class MediaClock:
    """One time origin for every track of a session, set by whichever track asks first."""

    def __init__(self) -> None:
        self._start: float | None = None

    def elapsed(self) -> float:
        now = time.monotonic()
        if self._start is None:
            self._start = now
        return now - self._start

    async def sleep_until(self, media_seconds: float) -> None:
        delay = media_seconds - self.elapsed()
        if delay > 0:
            await asyncio.sleep(delay)


def upsample_16k_to_48k(samples: np.ndarray) -> np.ndarray:
    """Linear interpolation x3 (int16 in, int16 out); the engine speaks 16 kHz, Opus 48 kHz."""
    if samples.size == 0:
        return samples.astype(np.int16)
    source = samples.astype(np.float32)
    positions = np.arange(source.size * 3, dtype=np.float32) / 3.0
    resampled = np.interp(positions, np.arange(source.size, dtype=np.float32), source)
    return np.clip(np.round(resampled), -32768, 32767).astype(np.int16)


class AudioTap:
    """One reader's queue of generated sound (the player's track, or a room's audience):
    each reader hears every sample once, whoever else is listening."""

    def __init__(self) -> None:
        self._chunks: deque[np.ndarray] = deque()
        self._samples = 0

    def _append(self, audio: np.ndarray) -> None:  # with LatestFrames' lock held
        self._chunks.append(audio)
        self._samples += audio.size
        while self._samples > MAX_AUDIO_BUFFER_S * AUDIO_RATE and len(self._chunks) > 1:
            self._samples -= self._chunks.popleft().size

    def _take(self, count: int) -> np.ndarray:  # with LatestFrames' lock held
        out = np.zeros(count, np.int16)
        filled = 0
        while filled < count and self._chunks:
            chunk = self._chunks[0]
            used = min(count - filled, chunk.size)
            out[filled : filled + used] = chunk[:used]
            filled += used
            if used == chunk.size:
                self._chunks.popleft()
            else:
                self._chunks[0] = chunk[used:]
            self._samples -= used
        return out


class LatestFrames:
    """Thread-safe hand-off from the generating thread to the media tracks."""

    def __init__(self, height: int, width: int) -> None:
        self._lock = threading.Lock()
        self._video = np.zeros((height, width, 3), np.uint8)
        self._video_index = -1
        self._player_audio = AudioTap()
        self._taps: list[AudioTap] = [self._player_audio]

    def put(self, frame: np.ndarray, audio_16k: np.ndarray, index: int) -> None:
        audio = upsample_16k_to_48k(audio_16k)
        with self._lock:
            self._video = frame
            self._video_index = index
            for tap in self._taps:
                tap._append(audio)

    def latest_video(self) -> tuple[np.ndarray, int]:
        with self._lock:
            return self._video, self._video_index

    def take_audio(self, count: int, tap: AudioTap | None = None) -> np.ndarray:
        """`count` samples, padded with silence when the generator has fallen behind."""
        with self._lock:
            return (tap or self._player_audio)._take(count)

    def audio_tap(self) -> AudioTap:
        """A second reader of the sound from now on (a live room's audience)."""
        tap = AudioTap()
        with self._lock:
            self._taps.append(tap)
        return tap

    def drop_audio_tap(self, tap: AudioTap) -> None:
        with self._lock:
            if tap in self._taps and tap is not self._player_audio:
                self._taps.remove(tap)


class GeneratedVideoTrack(MediaStreamTrack):
    """Sends each generated frame as soon as it exists (stamped with the shared clock), and
    repeats the newest one if the generator falls behind, so the stream never stalls."""

    kind = "video"
    POLL_SECONDS = 0.004

    def __init__(self, frames: LatestFrames, clock: MediaClock, fps: int) -> None:
        super().__init__()
        self._frames = frames
        self._clock = clock
        self._fps = fps
        self._last_index = -1
        self._last_sent = -1.0
        self.repeated = False

    async def recv(self) -> VideoFrame:
        if self.readyState != "live":
            raise MediaStreamError
        # Never faster than the frame rate, never slower than 1.5 frame times.
        earliest = self._last_sent + 0.8 / self._fps
        latest = self._last_sent + 1.5 / self._fps
        await self._clock.sleep_until(earliest)
        while self._clock.elapsed() < latest:
            if self._frames.latest_video()[1] != self._last_index:
                break
            await asyncio.sleep(self.POLL_SECONDS)
        pixels, index = self._frames.latest_video()
        self.repeated = index == self._last_index  # the generator fell behind: a repeat
        self._last_index = index
        self._last_sent = self._clock.elapsed()
        frame = VideoFrame.from_ndarray(pixels, format="rgb24")
        frame.pts = int(round(self._last_sent * VIDEO_CLOCK_RATE))
        frame.time_base = VIDEO_TIME_BASE
        return frame


class GeneratedAudioTrack(MediaStreamTrack):
    kind = "audio"

    def __init__(
        self, frames: LatestFrames, clock: MediaClock, tap: AudioTap | None = None
    ) -> None:
        super().__init__()
        self._frames = frames
        self._clock = clock
        self._tap = tap  # None: the player's own
        self._count = 0

    async def recv(self) -> AudioFrame:
        if self.readyState != "live":
            raise MediaStreamError
        behind = int(self._clock.elapsed() / AUDIO_PTIME) - self._count
        if behind > 10:  # over 200 ms late: skip ahead (a short gap) instead of piling up delay
            self._count += behind
        media_time = self._count * AUDIO_PTIME
        await self._clock.sleep_until(media_time)
        samples = self._frames.take_audio(AUDIO_SAMPLES, self._tap)
        frame = AudioFrame(format="s16", layout="mono", samples=AUDIO_SAMPLES)
        frame.planes[0].update(samples.tobytes())
        frame.sample_rate = AUDIO_RATE
        frame.pts = self._count * AUDIO_SAMPLES
        frame.time_base = AUDIO_TIME_BASE
        self._count += 1
        return frame
