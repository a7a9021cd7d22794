"""The engine gateway: the one spec shape, the reference picture once per world version, the
versioned recording format, and constants that do not load the engine."""

import io
import json

import numpy as np
import pytest
from django.core.files.base import ContentFile
from PIL import Image

from gallery.services import world_save
from tests.factories import WorldFactory
from tests.imports import modules_loaded_by
from worldsite.engine_gateway import world_spec
from worldsite.engine_gateway.recording import (
    FORMAT,
    RecordingError,
    RecordingWriter,
    open_recording,
)


def _png(colour) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (300, 150), colour).save(buffer, format="PNG")
    return buffer.getvalue()


@pytest.mark.django_db
def test_the_reference_picture_is_shrunk_once_per_world_version(monkeypatch):
    world = WorldFactory(theme="misty_coast", seed=3, initial_prompt="fog")
    world.reference_image.save("sea.png", ContentFile(_png((20, 40, 200))))
    shrinks = []
    real_shrink = world_spec.shrink_to_png
    monkeypatch.setattr(
        world_spec, "shrink_to_png", lambda source: shrinks.append(1) or real_shrink(source)
    )

    first = world_spec.engine_spec_for(world)
    again = world_spec.engine_spec_for(world)
    assert len(shrinks) == 1 and first == again
    assert {k: first[k] for k in ("seed", "theme", "initial_prompt", "world")} == {
        "seed": 3,
        "theme": "misty_coast",
        "initial_prompt": "fog",
        "world": world.slug,
    }
    assert first["reference_png"] is not None and first["reference_png"].startswith(b"\x89PNG")

    world.reference_image.save("sunset.png", ContentFile(_png((250, 120, 10))), save=False)
    world_save(world=world)  # a new version of the world
    changed = world_spec.engine_spec_for(world)
    assert len(shrinks) == 2 and changed["reference_png"] != first["reference_png"]


@pytest.mark.django_db
def test_a_world_without_a_reference_picture_sends_none():
    assert world_spec.engine_spec_for(WorldFactory())["reference_png"] is None


def test_recordings_carry_their_format_and_newer_ones_are_refused(tmp_path):
    writer = RecordingWriter(tmp_path / "r", fps=20, width=16, height=16, spec={"seed": 1})
    writer.write_frame(np.zeros((16, 16, 3), np.uint8), np.zeros(800, np.int16))
    writer.close("done")
    meta_path = tmp_path / "r" / "meta.json"
    meta = json.loads(meta_path.read_text())
    assert meta["format"] == FORMAT and open_recording(tmp_path / "r").frames == 1

    del meta["format"]  # written before the format was numbered: format 1
    meta_path.write_text(json.dumps(meta))
    assert open_recording(tmp_path / "r").spec() == {"seed": 1}

    meta["format"] = FORMAT + 1
    meta_path.write_text(json.dumps(meta))
    with pytest.raises(RecordingError, match=f"format {FORMAT + 1}"):
        open_recording(tmp_path / "r")


def test_the_gateway_constants_load_neither_torch_nor_the_simulator():
    loaded = modules_loaded_by(
        "worldsite.engine_gateway.constants", under=("torch", "engine.sim", "engine.runtime")
    )
    assert loaded == []
