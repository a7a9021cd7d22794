"""A world's reference picture is kept beside the recording, so a re-render sees it again."""

import io
import json

import numpy as np
from PIL import Image

from sessions.export_builder import replay_inputs
from worldsite.engine_gateway.pictures import decode_png, shrink_to_png
from worldsite.engine_gateway.recording import REFERENCE_FILE, RecordingWriter, open_recording


class _FakeEngineSession:
    def push(self, event):
        pass

    def next_chunk(self):
        class Chunk:
            video = [np.zeros((128, 128, 3), np.uint8)]
            audio = np.zeros(800, np.int16)

        return Chunk()


def test_reference_picture_is_recorded_and_handed_to_the_re_render(tmp_path):
    buffer = io.BytesIO()
    Image.new("RGB", (300, 150), (200, 40, 10)).save(buffer, format="PNG")
    png, width, height = shrink_to_png(io.BytesIO(buffer.getvalue()))
    assert (width, height) == (128, 64)
    spec = {"seed": 3, "theme": "misty_coast", "reference_png": png}
    recorder = RecordingWriter(tmp_path, fps=20, width=128, height=128, spec=spec)
    recorder.write_frame(np.zeros((128, 128, 3), np.uint8), np.zeros(800, np.int16))
    recorder.close("Player left.")

    meta = json.loads((tmp_path / "meta.json").read_text())  # bytes never reach the JSON
    assert meta["spec"] == {"seed": 3, "theme": "misty_coast", "reference_file": REFERENCE_FILE}
    seen = []
    replay_inputs(open_recording(tmp_path), lambda s: seen.append(s) or _FakeEngineSession())
    assert seen[0]["reference_png"] == png and "reference_file" not in seen[0]
    assert tuple(decode_png(seen[0]["reference_png"])[0, 0]) == (200, 40, 10)
