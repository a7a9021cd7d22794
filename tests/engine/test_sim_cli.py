import json

import av
import numpy as np
from PIL import Image

from engine.sim.__main__ import main


def test_bench_prints_one_json_object_with_fps_and_resolution(capsys):
    assert main(["bench", "--json", "--frames", "20", "--repeats", "1", "--resolution", "64"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["resolution"] == 64 and result["fps"] > 0


def test_render_writes_an_mp4_with_sound_and_a_contact_sheet(tmp_path, capsys):
    assert (
        main(
            [
                "render",
                "--seed",
                "2",
                "--frames",
                "30",
                "--out",
                str(tmp_path),
                "--theme",
                "neon_night",
                "--resolution",
                "64",
            ]
        )
        == 0
    )
    paths = json.loads(capsys.readouterr().out)
    with av.open(paths["mp4"]) as container:
        assert container.streams.video[0].codec_context.name == "h264"
        assert container.streams.audio[0].codec_context.name == "aac"
        frames = sum(1 for _ in container.decode(video=0))
    with av.open(paths["mp4"]) as container:
        samples = sum(f.samples for f in container.decode(audio=0))
    assert frames == 30
    assert abs(samples / 16_000 - 30 / 20) < 0.1  # sound lasts as long as the picture
    sheet = np.asarray(Image.open(paths["contact_sheet"]))
    assert sheet.shape[0] > 64 and sheet.std() > 10


def test_render_reports_a_bad_script_clearly(tmp_path, capsys):
    script = tmp_path / "bad.json"
    script.write_text('{"seed": 1, "theme": "neon_night", "frames": 5, "inputs": [{"t": -2}]}')
    assert main(["render", "--script", str(script), "--out", str(tmp_path)]) == 2
    assert "inputs[0].t: negative frame index" in capsys.readouterr().err
