"""Runs one engine session on its own thread, in real time, off the event loop.

Inputs arrive from the event loop (data channel, microphone, uploads) through a queue; the
thread applies them before generating the next frame, paces frames at the engine's frame rate,
hands each frame to the media tracks and the recorder, and measures input-to-frame latency and
how late each frame came. A sentence is encoded on a helper thread before it joins the queue
(~30 ms that would otherwise hold up a frame), and frames are generated one at a time, even
where the engine would make a longer chunk after a sentence: at 20 fps a frame has 50 ms.
"""

import logging
import queue
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

logger = logging.getLogger(__name__)


class EngineChunk(Protocol):
    video: np.ndarray  # (n, H, W, 3) uint8
    audio: np.ndarray  # (n * samples_per_frame,) int16


class EngineSession(Protocol):
    def prepare(self, event: dict[str, Any]) -> Any: ...  # validated, its slow part done

    def push(self, event: Any) -> None: ...

    def next_chunk(self, max_frames: int | None = None) -> EngineChunk: ...


class FrameSink(Protocol):
    def put(self, frame: np.ndarray, audio_16k: np.ndarray, index: int) -> None: ...


@dataclass
class RunnerStats:
    frames: int = 0
    late_frames: int = 0
    input_latency_ms: deque = field(default_factory=lambda: deque(maxlen=512))
    frame_ms: deque = field(default_factory=lambda: deque(maxlen=512))
    last_input_at: float = field(default_factory=time.monotonic)
    worst_late_ms: float = 0.0  # the latest frame since `take_worst_late_ms` last asked

    def take_worst_late_ms(self) -> float:
        """How late (ms after its turn began) the latest frame since the last call came."""
        worst, self.worst_late_ms = self.worst_late_ms, 0.0
        return round(worst, 1)


class SessionRunner:
    def __init__(
        self,
        engine: EngineSession,
        sink: FrameSink,
        *,
        fps: int,
        samples_per_frame: int,
        recorder: Any | None = None,
        stamp_inputs: bool = False,
        on_stop: Callable[[str], None] | None = None,  # called on the thread; check .failed
    ) -> None:
        self.engine = engine
        self.sink = sink
        self.fps = fps
        self.samples_per_frame = samples_per_frame
        self.recorder = recorder
        self.stamp_inputs = stamp_inputs  # bench mode: paint the last applied input seq
        self.on_stop = on_stop
        self.stats = RunnerStats()
        self.last_applied_seq = 0
        self._inputs: queue.Queue = queue.Queue(maxsize=256)
        self._stop = threading.Event()
        self._stop_reason = ""
        self.failed = False
        self._started = False
        self._thread = threading.Thread(target=self._run, name="engine-session", daemon=True)
        self._pending_frames: deque[tuple[np.ndarray, np.ndarray]] = deque()
        self._sentences: queue.Queue = queue.Queue(maxsize=16)
        self._encoder = threading.Thread(
            target=self._prepare_sentences, name="engine-sentences", daemon=True
        )

    def start(self) -> None:
        self._started = True
        self._thread.start()
        self._encoder.start()

    def push(self, event: dict[str, Any], seq: int = 0) -> bool:
        """Queue an engine event (engine.runtime's dict form) for the next frame; `seq` is the
        page's input counter, reported back so the page can time input-to-frame latency.
        False if the queue is full (the input is dropped)."""
        item = (time.monotonic(), seq, event)
        try:
            if event.get("kind") == "prompt":
                self._sentences.put_nowait(item)
            else:
                self._inputs.put_nowait((*item, event))
        except queue.Full:
            return False
        self.stats.last_input_at = time.monotonic()
        return True

    def _prepare_sentences(self) -> None:
        """Encode each sentence here, then queue it for the frame thread (quick to push)."""
        while not self._stop.is_set():
            try:
                arrived, seq, event = self._sentences.get(timeout=0.2)
            except queue.Empty:
                continue
            try:
                prepared = self.engine.prepare(event)
            except (ValueError, TypeError) as exc:  # the engine refused this event
                logger.info("engine refused an input: %s", exc)
                continue
            except Exception:  # the frame thread would have crashed on it: log, go on
                logger.exception("could not prepare a sentence; dropped")
                continue
            try:
                self._inputs.put((arrived, seq, event, prepared), timeout=1.0)
            except queue.Full:
                logger.info("input queue full; a sentence was dropped")

    def stop(self, reason: str) -> None:
        """Ask the thread to stop; a runner that never started is finished right here."""
        if self._stop.is_set():
            return
        self._stop_reason = reason
        self._stop.set()
        if not self._started:
            self._finish(reason)

    def join(self, timeout: float | None = None) -> None:
        self._thread.join(timeout)

    @property
    def started(self) -> bool:
        return self._started

    @property
    def running(self) -> bool:
        return self._thread.is_alive() and not self._stop.is_set()

    def _apply_inputs(self) -> list[float]:
        """Push queued inputs into the engine; return their arrival times."""
        arrivals: list[float] = []
        while True:
            try:
                arrived, seq, event, prepared = self._inputs.get_nowait()
            except queue.Empty:
                return arrivals
            try:
                self.engine.push(prepared)
            except (ValueError, TypeError) as exc:  # the engine refused this event
                logger.info("engine refused an input: %s", exc)
                continue
            if self.recorder is not None:
                self.recorder.log_input(self.stats.frames, _loggable(event))
            self.last_applied_seq = max(self.last_applied_seq, seq)
            arrivals.append(arrived)

    def _next_frame(self) -> tuple[np.ndarray, np.ndarray]:
        if not self._pending_frames:
            chunk = self.engine.next_chunk(max_frames=1)
            audio = np.asarray(chunk.audio, np.int16).reshape(len(chunk.video), -1)
            self._pending_frames.extend(zip(chunk.video, audio, strict=True))
        return self._pending_frames.popleft()

    def _run(self) -> None:
        period = 1.0 / self.fps
        next_tick = time.monotonic()
        reason = ""
        try:
            while not self._stop.is_set():
                arrivals = self._apply_inputs() if not self._pending_frames else []
                started = time.monotonic()
                frame, audio = self._next_frame()
                if self.stamp_inputs:
                    frame = stamp_sequence(frame, self.last_applied_seq)
                produced = time.monotonic()
                late_ms = (produced - next_tick) * 1000
                self.stats.worst_late_ms = max(self.stats.worst_late_ms, late_ms)
                self.sink.put(frame, audio, self.stats.frames)
                if self.recorder is not None:
                    self.recorder.write_frame(frame, audio)
                self.stats.frames += 1
                self.stats.frame_ms.append((produced - started) * 1000)
                for arrived in arrivals:
                    self.stats.input_latency_ms.append((produced - arrived) * 1000)
                next_tick += period
                delay = next_tick - time.monotonic()
                if delay > 0:
                    self._stop.wait(delay)
                else:
                    self.stats.late_frames += 1
                    next_tick = time.monotonic()  # fall behind gracefully, never build a backlog
            reason = self._stop_reason
        except Exception:  # a crash ends this session, never the worker
            logger.exception("engine session crashed")
            self.failed = True
            reason = "The world engine hit an internal error and stopped this session."
        finally:
            self._finish(reason or "stopped")

    def _finish(self, reason: str) -> None:
        if self.recorder is not None:
            self.recorder.close(reason)
        if self.on_stop is not None:
            self.on_stop(reason)


def _loggable(event: dict[str, Any]) -> dict[str, Any]:
    """The event as JSON can hold it (an uploaded picture is logged by shape, not pixels)."""
    if isinstance(event.get("image"), np.ndarray):
        return {**event, "image": {"shape": list(event["image"].shape)}}
    return event


STAMP_BITS = 16


def stamp_sequence(frame: np.ndarray, seq: int) -> np.ndarray:
    """Paint `seq` into the top rows as 16 black/white blocks (bit 0 leftmost).

    Blocks of width/16 pixels survive VP8 at any sane bitrate, so the page can read back which
    input a decoded frame already reflects: that is how the bench times input-to-frame latency.
    """
    stamped = frame.copy()
    width = frame.shape[1] // STAMP_BITS
    height = max(4, frame.shape[0] // 16)
    for bit in range(STAMP_BITS):
        value = 255 if (seq >> bit) & 1 else 0
        stamped[:height, bit * width : (bit + 1) * width] = value
    return stamped
