"""A session's memory of each direction, whole-cell camera warps, and keeping shown codes."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from engine.model.checkpoint import save_checkpoint
from engine.model.conv_world import (
    ConvWorldModel,
    camera_shift,
    kept_logits,
    uncovered_cells,
    warp_by_camera,
)
from engine.model.view_memory import FULL_TURN_CELLS, ViewMemory
from engine.model.world_loader import load_world_model
from engine.runtime.conv_rollout import ConvRollout

from .test_conv_world import conditioning, held, small


def test_a_full_turn_is_four_frame_widths():
    assert FULL_TURN_CELLS == 64


def test_the_view_memory_gives_back_a_direction_seen_before():
    views = ViewMemory(8, 16)
    first = torch.randn(8, 16, 16)
    views.write(first)
    latent, seen = views.recall()
    assert seen.all() and torch.equal(latent, first)
    views.move(-3.0, 0.0)  # turned right by three cells: the picture went left
    latent, seen = views.recall()
    assert seen[:, :13].all() and not seen[:, 13:].any()
    assert torch.equal(latent[:, :, :13], first[:, :, 3:])
    assert not latent[:, :, 13:].any()  # never seen: zeros
    views.move(-61.0, 0.0)  # the rest of a full turn faces the first view again
    assert torch.equal(views.recall()[0], first)


def test_the_view_memory_keeps_the_newest_view_and_rounds_to_whole_cells():
    views = ViewMemory(2, 16)
    views.write(torch.zeros(2, 16, 16))
    views.move(-0.4, 0.0)  # under half a cell: the same cells
    newer = torch.ones(2, 16, 16)
    views.write(newer)
    views.move(0.4, 0.0)
    assert torch.equal(views.recall()[0], newer)


def test_a_tilt_beyond_the_canvas_forgets_nothing_it_cannot_hold():
    views = ViewMemory(2, 16, pad_rows=2)
    views.write(torch.ones(2, 16, 16))
    views.move(0.0, 5.0)  # looking up 5 cells: the top 3 rows are above the canvas
    views.write(torch.full((2, 16, 16), 2.0))
    latent, seen = views.recall()
    assert not seen[:3].any() and not latent[:, :3].any()
    assert seen[3:].all() and (latent[:, 3:] == 2.0).all()
    views.move(0.0, -5.0)  # back: the canvas held the lower rows of the tilted view
    latent, seen = views.recall()
    assert seen.all()
    assert (latent[:, :11] == 2.0).all() and (latent[:, 11:] == 1.0).all()


def test_only_the_cells_a_move_brings_in_are_uncovered():
    covered = uncovered_cells(torch.tensor([[0.4, 0.0]]), 16)
    assert not covered.any()
    right = uncovered_cells(torch.tensor([[1.0, 0.0], [0.0, -2.0]]), 16)
    assert right[0, :, 0].all() and not right[0, :, 1:].any()
    assert right[1, -2:].all() and not right[1, :-2].any()


def test_the_warp_fills_uncovered_cells_from_the_memory_where_it_has_them():
    context = torch.randn(1, 2, 8, 16, 16)
    remembered = torch.full((1, 9, 16, 16), 5.0)
    remembered[:, -1, :8] = 1.0  # the upper half of the view was seen before
    remembered[:, -1, 8:] = 0.0
    shift = torch.tensor([[1.0, 0.0]])  # a left turn: column 0 comes in from outside
    plain = warp_by_camera(context, shift)
    filled = warp_by_camera(context, shift, remembered)
    assert (filled[..., :8, 0] == 5.0).all()  # seen: what was there
    assert torch.equal(filled[..., 8:, 0], plain[..., 8:, 0])  # never seen: the border
    assert torch.equal(filled[..., 1:], plain[..., 1:])  # carried cells are the moved history


def code_model(**settings) -> ConvWorldModel:
    base = small(context=2)
    cfg = dataclasses.replace(base.config, codes=32, camera_warp=True, **settings)
    model = ConvWorldModel(cfg).eval()
    model.load_state_dict(base.state_dict(), strict=False)
    model.codebook.copy_(torch.randn(32, 8, generator=torch.Generator().manual_seed(1)))
    return model


def test_keeping_adds_the_bonus_to_each_carried_cells_shown_code_only():
    model = code_model(code_keep=3.0)
    codebook = model.codebook
    shown = torch.randint(0, 32, (1, 16, 16), generator=torch.Generator().manual_seed(2))
    context = codebook[shown].permute(0, 3, 1, 2)[:, None].repeat(1, 2, 1, 1, 1)
    cond = conditioning(1)
    cond.inputs = held("LEFT")
    cond.shift = torch.tensor([[1.0, 0.0]])  # a whole cell: column 0 is painted
    p = model.predict(context, torch.ones(1, 2, dtype=torch.bool), torch.zeros(1, 32), cond)
    gained = kept_logits(model, p, cond) - p.logits
    assert not gained[..., 0].any()  # uncovered, nothing remembered: left to the network
    carried = torch.roll(shown, 1, dims=-1)[0, :, 1:]  # a left turn moves the picture right
    winners = gained[0, :, :, 1:].argmax(dim=0)
    assert torch.equal(winners, carried)
    assert torch.allclose(gained[0, :, :, 1:].sum(dim=0), torch.full((16, 15), 3.0))
    walking = dataclasses.replace(cond, inputs=held("LEFT", "W"))
    assert torch.equal(kept_logits(model, p, walking), p.logits)  # the ground must flow
    asked = dataclasses.replace(cond, text=torch.ones(1, 384))
    assert torch.equal(kept_logits(model, p, asked), p.logits)  # a sentence must change it
    pictured = dataclasses.replace(cond, image_age=torch.tensor([39.0]))
    assert torch.equal(kept_logits(model, p, pictured), p.logits)  # a picture must recolour
    settled = dataclasses.replace(cond, image_age=torch.tensor([40.0]))
    assert torch.equal(kept_logits(model, p, settled), kept_logits(model, p, cond))


def test_a_session_tells_the_keep_how_long_ago_its_picture_arrived():
    roll = ConvRollout(code_model(code_keep=3.0), theme=0, seed=3)
    assert roll._conditioning(held()[0], 0, None).image_age is None
    roll.observe(torch.zeros(8, 16, 16), torch.zeros(32), held()[0], 0)
    roll.set_image(torch.ones(128))  # arrives with frame 1
    assert roll._conditioning(held()[0], 5, None).image_age.tolist() == [4.0]
    given = ConvRollout(code_model(), theme=0, seed=3, image_token=torch.ones(128))
    assert given._conditioning(held()[0], 0, None).image_age.tolist() == [0.0]


def test_a_session_moves_whole_cells_carries_the_rest_and_closes_a_full_turn():
    model = code_model(code_keep=50.0, warp_whole_cells=True, view_memory=True)
    roll = ConvRollout(model, theme=0, seed=3)
    codebook = model.codebook
    start = codebook[torch.randint(0, 32, (16, 16))].permute(2, 0, 1)
    idle = held()[0]
    for f in range(2):
        roll.observe(start, torch.zeros(32), idle, f)
    step = camera_shift(held("LEFT"))[0, 0].item()  # cells a frame (0.61)
    frames = round(FULL_TURN_CELLS / step)
    moved = 0.0
    for f in range(2, 2 + frames):
        roll.generate(held("LEFT")[0], f)
        moved += step
        assert abs(roll.warp_rest[0, 0].item()) <= 0.5 + 1e-6
    # the view faces where it started (within the half cell carried), and every cell the
    # turn brought back was remembered and kept: the start view, shifted by the remainder
    offset = round(moved - FULL_TURN_CELLS)
    z = roll.history[-1]
    assert abs(moved - FULL_TURN_CELLS) <= step
    back = torch.roll(start, offset, dims=-1)
    inner = slice(2, -2)
    assert torch.equal(z[..., inner], back[..., inner])


def test_the_camera_warp_settings_are_written_together(tmp_path):
    from engine.train.ship import set_camera_warp, set_code_draws

    model = code_model()
    save_checkpoint(tmp_path / "world.pt", model, {"config": dataclasses.asdict(model.config)})
    set_camera_warp(True, tmp_path, whole_cells=True, view_memory=True)
    set_code_draws(tmp_path, keep=2.5)
    cfg = load_world_model(tmp_path / "world.pt").config
    assert cfg.camera_warp and cfg.warp_whole_cells and cfg.view_memory
    assert cfg.code_keep == 2.5 and not cfg.keep_walking
    set_code_draws(tmp_path, keep_walking=True)
    cfg = load_world_model(tmp_path / "world.pt").config
    assert cfg.keep_walking and cfg.code_keep == 2.5
    set_camera_warp(True, tmp_path)  # plain warp: the session options are off again
    cfg = load_world_model(tmp_path / "world.pt").config
    assert cfg.camera_warp and not cfg.warp_whole_cells and not cfg.view_memory
    with pytest.raises(ValueError, match="settings of the camera warp"):
        set_camera_warp(False, tmp_path, view_memory=True)
    with pytest.raises(ValueError, match="keep must be >= 0"):
        set_code_draws(tmp_path, keep=-1.0)


def test_the_views_around_fill_only_the_directions_never_seen():
    views = ViewMemory(2, 16)
    first = torch.randn(2, 16, 16)
    views.write(first)
    views.move(-8.0, 0.0)  # half a frame to the right, seen: it must stay as seen
    second = torch.randn(2, 16, 16)
    views.write(second)
    views.move(8.0, 0.0)
    around = torch.randn(3, 2, 16, 16)  # a quarter, half, three quarters to the right
    views.write_around(around)
    assert views.offset == [0.0, 0.0]  # writing does not move the camera
    ahead = views.recall()[0]  # the first view, its right half overwritten by the second
    assert torch.equal(ahead[:, :, :8], first[:, :, :8])
    assert torch.equal(ahead[:, :, 8:], second[:, :, :8])
    views.move(-16.0, 0.0)  # a quarter turn right
    latent, seen = views.recall()
    assert seen.all()
    assert torch.equal(latent[:, :, :8], second[:, :, 8:])  # seen before the views around
    assert torch.equal(latent[:, :, 8:], around[0][:, :, 8:])
    for q in (1, 2):
        views.move(-16.0, 0.0)
        assert torch.equal(views.recall()[0], around[q])
    views.move(0.0, 12.0)  # looking up past the frame: rows no view around has shown
    assert not views.recall()[1][:4].any()


def test_a_session_told_its_surroundings_turns_into_them():
    model = code_model(code_keep=50.0, warp_whole_cells=True, view_memory=True)
    roll = ConvRollout(model, theme=0, seed=3)
    codebook = model.codebook
    gen = torch.Generator().manual_seed(4)
    start = codebook[torch.randint(0, 32, (16, 16), generator=gen)].permute(2, 0, 1)
    around = codebook[torch.randint(0, 32, (3, 16, 16), generator=gen)].permute(0, 3, 1, 2)
    idle = held()[0]
    for f in range(2):
        roll.observe(start, torch.zeros(32), idle, f)
    roll.remember_around(around + 0.01)  # snapped to codes, as the history holds them
    step = camera_shift(held("RIGHT"))[0, 0].item()  # cells a frame (-0.61)
    frames = round(16 / -step)
    for f in range(2, 2 + frames):
        roll.generate(held("RIGHT")[0], f)
    # a quarter turn right faces the first view around (within the half cell carried)
    offset = round(frames * step + 16)
    back = torch.roll(around[0], offset, dims=-1)
    inner = slice(2, -2)
    assert torch.equal(roll.history[-1][..., inner], back[..., inner])


def test_a_change_of_world_forgets_what_the_session_was_only_told():
    views = ViewMemory(2, 16)
    shown = torch.randn(2, 16, 16)
    views.write(shown)
    views.write_around(torch.randn(3, 2, 16, 16))
    views.move(-16.0, 0.0)
    looked = torch.randn(2, 16, 16)
    views.write(looked)  # the session faced the first view around: now it is its own
    views.forget_told()
    assert torch.equal(views.recall()[0], looked)
    views.move(-16.0, 0.0)  # half a turn: only told of, so forgotten
    latent, seen = views.recall()
    assert not seen.any() and not latent.any()
    views.move(32.0, 0.0)
    assert torch.equal(views.recall()[0], shown)


def test_a_rewrite_changes_every_direction_it_knows_and_nothing_it_does_not():
    views = ViewMemory(2, 16, pad_rows=4)
    shown = torch.randn(2, 16, 16)
    views.write(shown)
    around = torch.randn(3, 2, 16, 16)
    views.write_around(around)  # a quarter, half, three quarters to the right
    views.seen[:, 32:48] = False  # as if the half turn had never been told of
    views.latent[:, :, 32:48] = 0.0
    views.move(0.0, 3.0)  # looking up 3 cells: the frame's bottom 3 rows are beyond it
    frames: list[torch.Tensor] = []

    def change(latents: torch.Tensor) -> torch.Tensor:
        frames.append(latents)
        return latents * 2.0 + 1.0

    views.rewrite(change)
    assert frames[0].shape == (4, 2, 16, 16)  # the turn in place, as four frames
    assert views.offset == [0.0, 3.0] and not views.told.any()  # the changed world's own
    views.move(0.0, -3.0)
    latent, seen = views.recall()
    assert seen[:13].all() and not seen[13:].any()  # rows the frames did not hold: forgotten
    assert torch.equal(latent[:, :13], shown[:, :13] * 2.0 + 1.0)
    views.forget_told()  # a later change of world keeps them
    views.move(-16.0, 0.0)
    assert torch.equal(views.recall()[0][:, :13], around[0][:, :13] * 2.0 + 1.0)
    views.move(-16.0, 0.0)
    latent, seen = views.recall()
    assert not seen.any() and not latent.any()  # never seen: still unknown, not changed


def test_a_sentence_or_a_picture_makes_a_session_forget_the_views_it_was_told():
    model = code_model(warp_whole_cells=True, view_memory=True)
    for change in ("text", "image"):
        roll = ConvRollout(model, theme=0, seed=3)
        roll.observe(torch.zeros(8, 16, 16), torch.zeros(32), held()[0], 0)
        roll.remember_around(torch.randn(3, 8, 16, 16))
        assert roll.views is not None and int(roll.views.seen.sum()) == 4 * 16 * 16
        if change == "text":
            roll.add_text(torch.ones(384))
        else:
            roll.set_image(torch.ones(128))
        assert int(roll.views.seen.sum()) == 16 * 16


def test_a_picture_moves_by_the_rest_at_pixel_precision():
    from engine.model.conv_world import warp_picture

    picture = torch.zeros(1, 3, 128, 128)
    picture[..., 60:68] = 1.0  # a vertical stripe, columns 60..67
    half_cell = torch.zeros(1, 2, 16, 16)
    half_cell[:, 0] = 0.5  # half a latent cell to the right: 4 pixels
    moved = warp_picture(picture, half_cell)
    assert torch.allclose(moved[..., 64:72], torch.ones(1, 3, 128, 8))
    assert torch.allclose(moved[..., :63], torch.zeros(1, 3, 128, 63))


def test_a_whole_cell_session_shows_its_picture_where_the_camera_is():
    from engine.runtime.session import shown_pictures

    fractional = ConvRollout(code_model(), theme=0, seed=3)
    whole = ConvRollout(code_model(warp_whole_cells=True), theme=0, seed=3)
    for roll in (fractional, whole):
        roll.observe(torch.zeros(8, 16, 16), torch.zeros(32), held()[0], 0)
    assert whole.display_move() is None  # nothing carried yet
    step = camera_shift(held("LEFT"))[0, 0].item()  # 0.61 cells a frame
    for f in range(1, 4):
        for roll in (fractional, whole):
            roll.generate(held("LEFT")[0], f)
        move = whole.display_move()
        assert move is not None
        # the picture is moved by what the whole cells left: 3 frames of turning in all
        assert abs(move[0, 0].mean().item() - (f * step - round(f * step))) < 1e-5
        assert fractional.display_move() is None  # its history moved the whole way
    pictures = torch.rand(2, 3, 128, 128)
    shown = shown_pictures(pictures, [None, whole.display_move()])
    assert torch.equal(shown[0], pictures[0]) and not torch.equal(shown[1], pictures[1])
    assert shown_pictures(pictures, [None, None]) is pictures
