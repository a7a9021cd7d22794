"""Builds the MP4 of a past session: a title card, then the picture and sound of the session.

Two sources: the A/V recording the worker wrote while streaming, or a re-render that replays
the inputs log through the world model (same seed + same inputs -> the same world), which works
after the A/V recording has expired. No Django here: callers pass folders and callbacks.
"""

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image, ImageDraw, ImageFont

from worldsite.engine_gateway.constants import SAMPLE_RATE
from worldsite.engine_gateway.recording import Recording
from worldsite.engine_gateway.video import write_mp4

TITLE_SECONDS = 1.5
SCALE = 4  # 128 -> 512 pixels, nearest neighbour
CRF = {"standard": 20, "high": 14}


class ExportError(Exception):
    """The export cannot be built; the message is shown to the player."""


def title_card(title: str, subtitle: str, height: int, width: int) -> np.ndarray:
    """The world's name on a dark card, drawn at the export's resolution."""
    card = Image.new("RGB", (width, height), (11, 14, 26))
    draw = ImageDraw.Draw(card)
    big = ImageFont.load_default(size=max(12, width // 14))
    small = ImageFont.load_default(size=max(10, width // 28))
    for text, font, y in ((title, big, 0.42), (subtitle, small, 0.58)):
        box = draw.textbbox((0, 0), text, font=font)
        x = (width - (box[2] - box[0])) // 2
        draw.text(
            (x, int(height * y) - (box[3] - box[1]) // 2), text, fill=(232, 235, 247), font=font
        )
    draw.rectangle(
        (width // 3, int(height * 0.68), 2 * width // 3, int(height * 0.68) + 3),
        fill=(45, 226, 230),
    )
    return np.asarray(card)


def replay_inputs(
    recording: Recording,
    open_session: Callable[[dict], Any],
    on_frame: Callable[[int, int], None] | None = None,
) -> tuple[list[np.ndarray], np.ndarray]:
    """Re-run the world model from the session's spec and inputs log."""
    frames_total = recording.frames
    if frames_total <= 0:
        raise ExportError("This session has no inputs log to re-render from.")
    by_frame = recording.inputs_by_frame()
    session = open_session(recording.spec())
    frames: list[np.ndarray] = []
    audio: list[np.ndarray] = []
    while len(frames) < frames_total:
        for event in by_frame.get(len(frames), ()):
            session.push(event)
        chunk = session.next_chunk()
        frames.extend(chunk.video)
        audio.append(np.asarray(chunk.audio, np.int16))
        if on_frame is not None:
            on_frame(min(len(frames), frames_total), frames_total)
    samples_per_frame = recording.audio_rate // recording.fps
    return frames[:frames_total], np.concatenate(audio)[: frames_total * samples_per_frame]


def build_export(
    recording: Recording,
    output: Path,
    *,
    title: str,
    subtitle: str,
    quality: str,
    source: Iterator | tuple[list[np.ndarray], np.ndarray],
    on_progress: Callable[[int], None],
) -> int:
    """Write title card + frames + audio to `output`; returns the number of frames written."""
    frames, audio = source
    height, width = recording.size
    out_h, out_w = height * SCALE, width * SCALE
    fps = recording.fps
    card = title_card(title, subtitle, out_h, out_w)
    card_frames = int(round(TITLE_SECONDS * fps))
    samples_per_frame = SAMPLE_RATE // fps
    sound = np.concatenate([np.zeros(card_frames * samples_per_frame, np.int16), audio])
    total = card_frames + len(frames)
    pictures = [card] * card_frames + list(frames)

    def progress(written: int) -> None:
        if written % 10 == 0 or written == total:
            on_progress(int(100 * written / total))

    return write_mp4(
        output,
        pictures,
        fps=fps,
        width=out_w,
        height=out_h,
        audio=sound,
        crf=CRF.get(quality, CRF["standard"]),
        on_frame=progress,
    )
