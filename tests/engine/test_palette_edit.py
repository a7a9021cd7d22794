"""The palette edit: a reference picture recolours the session's history at once."""

from __future__ import annotations

import numpy as np
import torch

from engine.model.checkpoint import load_checkpoint
from engine.model.palette_edit import PaletteEdit, PaletteEditConfig, picture_palette
from engine.runtime import Image, World
from engine.sim import FrameInputs, SimWorld, WorldSpec
from engine.sim.reference import load_reference_image, palette_from_image

from .test_runtime_session import FakeText, tiny_code_model, tiny_world

PALETTE = {"sky": [250, 20, 30], "foliage": [10, 200, 40], "ground": [20, 30, 240]}


def edit_world(edit: PaletteEdit | None) -> World:
    w = tiny_world()
    return World(w.video_ae, w.audio_ae, tiny_code_model(), FakeText(), palette_edit=edit)


def test_the_palette_is_the_simulators_reading_of_the_picture():
    picture = load_reference_image(PALETTE)
    told = picture_palette(picture).numpy() * 255
    read = palette_from_image(picture)
    assert np.allclose(told, np.concatenate([read["sky"], read["foliage"], read["ground"]]))
    odd = np.random.default_rng(0).integers(0, 256, (37, 50, 3)).astype(np.uint8)
    read = palette_from_image(odd)
    expected = np.concatenate([read["sky"], read["foliage"], read["ground"]])
    assert np.abs(picture_palette(odd).numpy() * 255 - expected).max() <= 0.5  # sim rounds


def test_the_edit_starts_as_nothing_changed_and_hears_the_palette_and_theme():
    edit = PaletteEdit(PaletteEditConfig()).eval()
    latents = torch.randn(2, 8, 16, 16)
    picture = load_reference_image(PALETTE)
    assert torch.equal(edit.recolour(latents, picture, theme=1), latents)
    with torch.no_grad():
        torch.nn.init.normal_(edit.out.weight, std=0.1)
        other = load_reference_image({**PALETTE, "sky": [0, 0, 0]})
        a = edit.recolour(latents, picture, theme=1)
        assert not torch.allclose(a, edit.recolour(latents, other, theme=1))
        assert not torch.allclose(a, edit.recolour(latents, picture, theme=2))


def test_apply_reference_recolours_the_world_as_a_pushed_picture_does():
    picture = load_reference_image(PALETTE)
    looked, stepped = (SimWorld(WorldSpec(seed=4, theme="frost_valley")) for _ in range(2))
    before = looked.look(0)
    looked.apply_reference(picture)
    stepped.step(FrameInputs(image=picture))
    assert looked.theme == stepped.theme != stepped.base_theme
    assert np.abs(looked.look(0).astype(int) - before).mean() > 10  # the picture changed


def test_a_reference_picture_rewrites_the_history_undrawn_and_settled():
    edit = PaletteEdit(PaletteEditConfig()).eval()
    told: list[tuple[np.ndarray, int]] = []
    real = edit.recolour

    def spying(latents, picture, theme):
        told.append((picture, theme))
        return real(latents, picture, theme) + 1.0

    edit.recolour = spying  # type: ignore[method-assign]
    world = edit_world(edit)
    session = world.start({"seed": 0, "theme": "misty_coast"}, opening=False)
    session.prime(np.zeros((2, 128, 128, 3), np.uint8))
    roll = session.rollout
    before = torch.stack(roll.history)
    picture = load_reference_image(PALETTE)
    session.push(Image(picture))
    session.next_chunk(max_frames=1)
    assert len(told) == 2  # the history, then the directions the view memory holds
    assert all(np.array_equal(p, picture) and t == int(roll.theme[0]) for p, t in told)
    # every history frame edited and snapped, then the new frame generated on top of it
    assert torch.equal(torch.stack(roll.history[:-1]), world.model.snap(before + 1.0)[1:])
    assert roll.drawn == set()  # no sentence asked for it: a sentence now is still guided
    assert roll.image_since is not None and roll.frame - roll.image_since >= 40  # settled


def test_a_reference_picture_recolours_the_directions_the_session_knows():
    """Told of its surroundings at the start, a session given a picture still knows them
    after it, recoloured: a turn shows the place in the picture's colours."""
    edit = PaletteEdit(PaletteEditConfig()).eval()
    with torch.no_grad():
        torch.nn.init.normal_(edit.out.weight, std=0.5)
    world = edit_world(edit)
    session = world.start({"seed": 0, "theme": "misty_coast"}, opening=False)
    around = np.random.default_rng(1).integers(0, 256, (3, 128, 128, 3)).astype(np.uint8)
    session.prime(np.zeros((2, 128, 128, 3), np.uint8), around=around)
    roll = session.rollout
    views = roll.views
    assert views is not None
    views.move(-16.0, 0.0)  # a quarter turn right: the first view around
    told = views.recall()[0].clone()
    views.move(16.0, 0.0)
    known = int(views.seen.sum())
    picture = load_reference_image(PALETTE)
    session.push(Image(picture))
    session.next_chunk(max_frames=1)
    assert int(views.seen.sum()) >= known  # nothing forgotten
    views.move(-16.0 - views.offset[0], 0.0)
    theme = int(roll.theme[0])
    recoloured = world.model.snap(edit.recolour(told[None], picture, theme))[0]
    assert not torch.equal(recoloured, told)
    inner = slice(3, -3)  # the edit sees the frames beside it at the window's edges
    assert torch.equal(views.recall()[0][..., inner], recoloured[..., inner])


def test_an_edit_trained_to_hold_recolours_every_new_frame_until_another_picture():
    calls: list[int] = []
    for holds in (False, True):
        edit = PaletteEdit(PaletteEditConfig(holds=holds)).eval()
        real = edit.recolour
        edit.recolour = lambda z, p, t, real=real: calls.append(len(z)) or real(z, p, t)  # type: ignore
        session = edit_world(edit).start({"seed": 0, "theme": "misty_coast"}, opening=False)
        session.prime(np.zeros((2, 128, 128, 3), np.uint8))
        calls.clear()
        session.push(Image(load_reference_image(PALETTE)))
        for _ in range(3):
            session.next_chunk(max_frames=1)
        held = session.rollout.held_change
        if holds:  # the history, the views it knows, then each of the 3 frames
            assert calls == [2, 4, 1, 1, 1] and held is not None
        else:
            assert calls == [2, 4] and held is None
    other = load_reference_image({**PALETTE, "sky": [0, 0, 0]})
    session.push(Image(other))
    session.next_chunk(max_frames=1)
    assert session.rollout.held_change is not held  # the newest picture's edit holds


def test_a_held_change_is_what_every_new_frame_shows_and_remembers():
    from engine.runtime.conv_rollout import ConvRollout

    from .test_view_memory import code_model, held

    model = code_model(warp_whole_cells=True, view_memory=True)
    code = model.codebook[5][:, None, None]
    frames = []
    for hold in (False, True):
        roll = ConvRollout(model, theme=0, seed=3)
        roll.observe(torch.zeros(8, 16, 16), torch.zeros(32), held()[0], 0)
        if hold:
            roll.hold_change(lambda z: torch.zeros_like(z) + code + 0.01)  # snapped to code 5
        frames.append(roll.generate(held("W")[0], 1)[0])
    assert torch.equal(frames[1], code.expand(8, 16, 16)) and torch.equal(
        roll.history[-1], frames[1]
    )
    assert not torch.equal(frames[0], frames[1])  # unheld, the network's own frame
    roll.hold_change(None)
    assert roll.held_change is None


def test_the_inputs_are_partly_recoloured_in_blocks_of_cells():
    from engine.train.palette_edit import PATCH_CELLS, partly_recoloured

    before, after = torch.zeros(400, 1, 16, 16), torch.ones(400, 1, 16, 16)
    gen = torch.Generator().manual_seed(0)
    assert torch.equal(partly_recoloured(before, after, 0.0, gen), before)
    mixed = partly_recoloured(before, after, 0.5, gen)
    share = mixed.mean(dim=(1, 2, 3))
    assert 0.4 < float((share == 0).float().mean()) < 0.6  # the world before, as it was
    assert 0.15 < float((share == 1).float().mean()) < 0.35  # recoloured already
    blocks = mixed[:, 0, ::PATCH_CELLS, ::PATCH_CELLS]
    patchwork = mixed[(share > 0) & (share < 1)]
    assert len(patchwork) > 60
    assert torch.equal(
        blocks.repeat_interleave(PATCH_CELLS, 1).repeat_interleave(PATCH_CELLS, 2), mixed[:, 0]
    )  # whole blocks either way


def test_a_world_without_the_edit_leaves_the_history_to_the_network():
    session = edit_world(None).start({"seed": 2, "theme": "ember_forest"}, opening=False)
    session.prime(np.zeros((2, 128, 128, 3), np.uint8))
    roll = session.rollout
    rewrites: list[bool] = []
    roll.rewrite_history = lambda *a, **k: rewrites.append(True)  # type: ignore[method-assign]
    session.push(Image(load_reference_image(PALETTE)))
    session.next_chunk(max_frames=1)
    assert rewrites == [] and roll.image_since == roll.frame - 1  # the settle window is open


def test_a_training_run_writes_an_edit_that_loads_and_reports(tmp_path):
    from engine.train.palette_edit import (
        PaletteEditTrainConfig,
        simulate_pairs,
        train_palette_edit,
    )

    pairs = simulate_pairs(episodes=1, frames=20, resolution=128)
    assert pairs["before"].shape == pairs["after"].shape == (4, 128, 128, 3)
    assert pairs["palette"].shape == (4, 9) and 0 <= pairs["palette"].min() <= 1
    assert (np.abs(pairs["after"].astype(int) - pairs["before"]).mean(axis=(1, 2, 3)) > 1).all()
    cfg = PaletteEditTrainConfig(out=str(tmp_path), episodes=2, frames=20, minutes=0.02)
    path = train_palette_edit(cfg)
    edit = load_checkpoint(path, PaletteEdit, PaletteEditConfig)
    out = edit.recolour(torch.zeros(1, 8, 16, 16), load_reference_image(PALETTE), theme=0)
    assert out.shape == (1, 8, 16, 16)
    assert edit.config.holds  # trained on frames already recoloured too
    report = (tmp_path / "report.json").read_text()
    assert '"changed_right"' in report and (tmp_path / "loss.png").exists()
    assert '"recoloured"' in report and '"by_theme"' in report
    assert train_palette_edit(cfg) == path  # resumes: the budget is spent, nothing retrains


def test_the_shipped_edit_brings_the_pictures_sky_at_once():
    """Shipped weights: a session given a red-sky picture shows, in the oldest frame of its
    history (from before the picture), a sky nearer to the picture's than without the edit."""
    shipped = World.load()
    assert shipped.palette_edit is not None
    sky = np.array(PALETTE["sky"], np.float32) / 255
    distances = []
    for edit in (None, shipped.palette_edit):
        shipped.palette_edit = edit
        session = shipped.start({"seed": 3, "theme": "misty_coast"})
        session.next_chunk()
        session.push(Image(load_reference_image(PALETTE)))
        session.next_chunk(max_frames=1)
        oldest = session.rollout.history[0][None]
        with torch.no_grad():
            picture = shipped.video_ae.decode(oldest)[0]  # (3, H, W) in [0, 1]
        top = picture[:, : picture.shape[1] * 3 // 10].mean(dim=(1, 2)).numpy()
        distances.append(float(np.linalg.norm(top - sky)))
    assert distances[1] < distances[0] - 0.05
