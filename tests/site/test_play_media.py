"""The worker's media plumbing: resampling, buffering, microphone features, frame stamps,
the runner's real-time loop and crash-safe recordings."""

import json
import threading
import time
from dataclasses import dataclass

import av
import numpy as np
import pytest

from sessions.worker.media import LatestFrames, upsample_16k_to_48k
from sessions.worker.microphone import MicrophoneFeatures
from sessions.worker.runner import SessionRunner, stamp_sequence
from worldsite.engine_gateway.recording import RecordingWriter


def test_upsampling_keeps_the_waveform_and_triples_the_length():
    tone = (np.sin(np.arange(800) * 2 * np.pi * 440 / 16_000) * 10_000).astype(np.int16)
    up = upsample_16k_to_48k(tone)
    assert up.dtype == np.int16 and up.size == 2400
    assert np.array_equal(up[::3], tone)


def test_audio_buffer_pads_with_silence_and_bounds_latency():
    frames = LatestFrames(8, 8)
    assert not frames.take_audio(960).any()  # nothing generated yet: silence
    for index in range(20):  # 1 s of audio arrives at once
        frames.put(np.zeros((8, 8, 3), np.uint8), np.full(800, 1000, np.int16), index)
    buffered = sum(1 for _ in iter(lambda: frames.take_audio(960).any(), False))
    assert buffered <= 13  # at most ~0.25 s is kept; the rest was dropped, not delayed


def test_microphone_loudness_and_clap_onsets():
    mic = MicrophoneFeatures(48_000, 0.05)
    quiet = mic.feed(np.zeros(2400 * 4, np.int16))
    assert [loudness for loudness, _ in quiet] == [0.0] * 4
    clap = mic.feed((np.random.default_rng(0).standard_normal(2400) * 12_000).astype(np.int16))
    assert clap[0][0] > 0.7 and clap[0][1] is True
    steady = mic.feed(
        (np.random.default_rng(1).standard_normal(2400 * 10) * 12_000).astype(np.int16)
    )
    assert steady[-1][1] is False  # a loud but steady sound is not an onset


@pytest.mark.parametrize("seq", [0, 1, 0b1010_0101_1100_0011, 65535])
def test_stamp_encodes_the_sequence_in_16_blocks(seq):
    frame = np.full((128, 128, 3), 90, np.uint8)
    stamped = stamp_sequence(frame, seq)
    read = sum(1 << bit for bit in range(16) if stamped[2, bit * 8 + 4, 0] > 128)
    assert read == seq
    assert (stamped[40:] == 90).all() and (frame == 90).all()


@dataclass
class Chunk:
    video: np.ndarray
    audio: np.ndarray


class CountingEngine:
    """Stands in for engine.runtime in this unit test only: frame value = frames generated."""

    def __init__(self, fail_after: int | None = None, sentence_s: float = 0.0) -> None:
        self.pushed: list[dict] = []
        self.generated = 0
        self.fail_after = fail_after
        self.sentence_s = sentence_s  # how long preparing a sentence takes
        self.asked: set[int | None] = set()
        self.frame_threads: set[str] = set()
        self.prepare_threads: set[str] = set()

    def prepare(self, event: dict) -> dict:
        self.prepare_threads.add(threading.current_thread().name)
        if event.get("text") == "unreadable":
            raise ValueError("cannot encode")
        time.sleep(self.sentence_s)
        return {**event, "encoded": True}

    def push(self, event: dict) -> None:
        if event.get("kind") == "bogus":
            raise ValueError("unknown event")
        self.pushed.append(event)

    def next_chunk(self, max_frames: int | None = None) -> Chunk:
        self.asked.add(max_frames)
        self.frame_threads.add(threading.current_thread().name)
        if self.fail_after is not None and self.generated >= self.fail_after:
            raise RuntimeError("boom")
        self.generated += 1
        frame = np.full((1, 16, 16, 3), self.generated % 256, np.uint8)
        return Chunk(frame, np.zeros(800, np.int16))


def test_runner_paces_frames_applies_inputs_and_survives_bad_events():
    engine = CountingEngine()
    frames = LatestFrames(16, 16)
    stopped = threading.Event()
    runner = SessionRunner(
        engine, frames, fps=20, samples_per_frame=800, on_stop=lambda reason: stopped.set()
    )
    runner.start()
    runner.push({"kind": "bogus"})
    runner.push({"kind": "action", "keys": ["W"]}, seq=7)
    time.sleep(0.5)
    runner.stop("done")
    runner.join(2)
    assert stopped.is_set() and not runner.failed
    assert 6 <= runner.stats.frames <= 14  # ~20 fps for 0.5 s, not as fast as possible
    assert engine.pushed == [{"kind": "action", "keys": ["W"]}]
    assert runner.last_applied_seq == 7
    assert len(runner.stats.input_latency_ms) == 1
    assert engine.asked == {1}  # one frame at a time, whatever the engine would chunk


def test_a_slow_sentence_is_prepared_beside_the_frames_never_holding_one_up():
    engine = CountingEngine(sentence_s=0.3)  # six frames' time
    frames = LatestFrames(16, 16)
    runner = SessionRunner(engine, frames, fps=20, samples_per_frame=800)
    runner.start()
    time.sleep(0.2)
    runner.push({"kind": "prompt", "text": "unreadable"})  # refused while preparing: dropped
    runner.push({"kind": "prompt", "text": "make it rain"})
    runner.push({"kind": "action", "keys": ["W"]}, seq=3)
    time.sleep(0.2)
    assert engine.pushed == [{"kind": "action", "keys": ["W"]}]  # the sentence is still encoding
    time.sleep(0.5)
    late = runner.stats.take_worst_late_ms()
    runner.stop("done")
    runner.join(2)
    assert engine.pushed[1] == {"kind": "prompt", "text": "make it rain", "encoded": True}
    assert len(engine.pushed) == 2 and not runner.failed
    assert engine.prepare_threads.isdisjoint(engine.frame_threads)
    assert 0 <= late < 150  # a frame's turn is 50 ms; the 300-ms sentence never entered one
    runner.stats.worst_late_ms = 12.34
    assert runner.stats.take_worst_late_ms() == 12.3
    assert runner.stats.take_worst_late_ms() == 0.0  # each heartbeat reports its own second


def test_runner_crash_ends_only_the_session_and_closes_the_recording(tmp_path):
    engine = CountingEngine(fail_after=5)
    recorder = RecordingWriter(tmp_path / "rec", fps=20, width=16, height=16, spec={})
    reasons = []
    runner = SessionRunner(
        engine,
        LatestFrames(16, 16),
        fps=20,
        samples_per_frame=800,
        recorder=recorder,
        on_stop=reasons.append,
    )
    runner.start()
    runner.join(3)
    assert runner.failed
    assert reasons and "internal error" in reasons[0]
    meta = json.loads((tmp_path / "rec" / "meta.json").read_text())
    assert meta["frames"] == 5 and "internal error" in meta["end_reason"]


def test_recording_of_a_killed_worker_is_still_readable(tmp_path):
    """Fragmented MP4: frames written before a crash decode without the file being closed."""
    recorder = RecordingWriter(tmp_path, fps=20, width=32, height=32, spec={"theme": "x"})
    for index in range(60):
        recorder.write_frame(np.full((32, 32, 3), index * 4, np.uint8), np.zeros(800, np.int16))
    # No close(): as if the process died here.
    with av.open(str(tmp_path / "av.mp4")) as container:
        decoded = sum(1 for _ in container.decode(video=0))
    assert decoded >= 40


async def test_tracks_share_one_clock_and_send_new_frames_promptly():
    import asyncio

    from sessions.worker.media import (
        AUDIO_SAMPLES,
        GeneratedAudioTrack,
        GeneratedVideoTrack,
        MediaClock,
    )

    frames = LatestFrames(16, 16)
    clock = MediaClock()
    video, audio = GeneratedVideoTrack(frames, clock, fps=20), GeneratedAudioTrack(frames, clock)
    first = await video.recv()
    started = time.monotonic()
    stamps = [(await video.recv()).pts for _ in range(4)]  # nothing new: repeats, paced
    assert 0.15 < time.monotonic() - started < 0.4
    assert all(b > a for a, b in zip([first.pts, *stamps], stamps, strict=False))

    await asyncio.sleep(0.02)
    asyncio.get_running_loop().call_later(
        0.03, frames.put, np.ones((16, 16, 3), np.uint8), np.zeros(800, np.int16), 0
    )
    waited = time.monotonic()
    fresh = await video.recv()
    assert time.monotonic() - waited < 0.06  # sent as soon as it was generated
    assert fresh.to_ndarray(format="rgb24").max() == 1

    sound = await audio.recv()
    assert sound.samples == AUDIO_SAMPLES and sound.sample_rate == 48_000
    assert abs(sound.pts / 48_000 - fresh.pts / 90_000) < 0.15  # one clock for both
    video.stop()
    audio.stop()


async def test_the_player_gets_picture_and_sound_as_two_streams():
    """One stream would make the browser hold the picture back to the sound's jitter buffer
    (tools.bench: the player's video buffer doubled over a session's first half-minute)."""
    from aiortc import RTCPeerConnection, RTCSessionDescription

    from sessions.worker.peer import PlayPeer

    frames = LatestFrames(16, 16)
    runner = SessionRunner(CountingEngine(), frames, fps=20, samples_per_frame=800)
    peer = PlayPeer(runner, frames, fps=20, ice_servers=[])
    page = RTCPeerConnection()
    page.addTransceiver("video", direction="recvonly")
    page.addTransceiver("audio", direction="sendrecv")
    page.createDataChannel("input")
    await page.setLocalDescription(await page.createOffer())
    try:
        answer = await peer.answer(page.localDescription.sdp)
        await page.setRemoteDescription(RTCSessionDescription(sdp=answer, type="answer"))
        streams = {}
        kind = None
        for line in answer.splitlines():
            if line.startswith("m="):
                kind = line[2:].split()[0]
            elif line.startswith("a=msid:"):
                streams[kind] = line.split(":", 1)[1].split()[0]
        assert set(streams) == {"video", "audio"}
        assert streams["video"] != streams["audio"]
    finally:
        await peer.close()
        await page.close()
