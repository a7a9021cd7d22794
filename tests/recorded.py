"""A finished play session with a real recording on disk, for export tests."""

from collections.abc import Callable
from pathlib import Path

import numpy as np

from sessions import services
from sessions.models import PlaySession
from worldsite.engine_gateway.recording import RecordingWriter


def finished_session_with_recording(
    user,
    world,
    recordings_root: Path,
    frames: int,
    picture: Callable[[int], np.ndarray],
    audio: np.ndarray | None = None,
) -> PlaySession:
    """Reserve, go live, end, and record `frames` frames drawn by `picture(index)`."""
    session = services.session_reserve(user=user, world=world).session
    services.session_mark_live(session=session)
    services.session_end(session=session, reason="Player left.")
    recorder = RecordingWriter(
        recordings_root / str(session.pk),
        fps=20,
        width=128,
        height=128,
        spec={"seed": world.seed, "theme": world.theme},
    )
    sound = audio if audio is not None else np.zeros(800, np.int16)
    for index in range(frames):
        recorder.write_frame(picture(index), sound)
    recorder.log_input(0, {"kind": "action", "keys": ["W"], "yaw": 0.0, "pitch": 0.0})
    recorder.close("Player left.")
    return session
