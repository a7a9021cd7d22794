"""The walk warp: a step spreads the ground out from the horizon or slides it sideways."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from engine.model.conv_world import history_move, kept_logits, walk_flow, warp
from engine.runtime.conv_rollout import HORIZON_LIMIT, ConvRollout
from engine.spec import EYE_HEIGHT, WALK_SPEED

from .test_conv_world import conditioning, held
from .test_view_memory import code_model


def test_a_step_forward_spreads_the_ground_out_and_leaves_the_sky():
    flow = walk_flow(held("W"), 16)[0]  # (2, S, S): x right, y down
    dx, dy = flow
    assert not flow[:, :8].any()  # at and above the horizon nothing moves
    assert (dy[9:] > 0).all() and (dy[9:-1, 0] < dy[10:, 0]).all()  # down, faster when nearer
    assert (dx[9:, :8] < 0).all() and (dx[9:, 8:] > 0).all()  # and out to either side
    assert torch.allclose(dx[:, :8], -dx[:, 8:].flip(-1))  # symmetric about the middle
    # the nearest row: depth EYE_HEIGHT * 8 / 7.5 cells, a step of WALK_SPEED
    depth = EYE_HEIGHT * 8 / 7.5
    assert dy[15, 0].item() == pytest.approx(7.5 * WALK_SPEED / (depth - WALK_SPEED), rel=1e-5)
    back = walk_flow(held("S"), 16)[0]
    assert (back[1, 9:] < 0).all() and (back[1, 9:].abs() < dy[9:]).all()  # nearer, slower


def test_a_side_step_slides_the_ground_the_other_way_and_diagonals_are_no_faster():
    right = walk_flow(held("D"), 16)[0]
    assert not right[1].any() and not right[0, :8].any()
    assert (right[0, 9:] < 0).all()  # stepping right, the ground goes left
    assert torch.allclose(right[0, 15], torch.full((16,), -WALK_SPEED * 7.5 / EYE_HEIGHT))
    assert torch.allclose(walk_flow(held("A"), 16), -walk_flow(held("D"), 16))
    diagonal = walk_flow(held("W", "D"), 16)[0]
    straight = walk_flow(held("W"), 16)[0]
    assert (diagonal[1, 9:] < straight[1, 9:]).all()  # WALK_SPEED shared by the two
    assert not walk_flow(held("LEFT", "UP"), 16).any()  # the camera alone is not a step


def test_looking_up_lowers_the_horizon_the_ground_starts_from():
    level = walk_flow(held("W"), 16)[0, 1]
    up = walk_flow(held("W"), 16, horizon=torch.tensor([3.0]))[0, 1]
    assert not up[:11].any() and level[9:11].any()
    assert (up[11:] < level[11:]).all()  # the same row is further below a lower horizon


def test_the_history_move_adds_the_step_only_where_asked():
    model = code_model()
    inputs = torch.cat([held("RIGHT", "W"), held("RIGHT")])
    plain = history_move(model.config, inputs)
    assert plain.shape == (2, 2)
    walked = history_move(dataclasses.replace(model.config, walk_warp=True), inputs)
    assert walked.shape == (2, 2, 16, 16)
    assert torch.allclose(walked[1], plain[1, :, None, None].expand(2, 16, 16))
    assert torch.allclose(walked[0], plain[0, :, None, None] + walk_flow(inputs[:1], 16)[0])


def test_the_walk_flow_predicts_how_the_simulators_ground_moves():
    """Against the real thing: the tokenizer's latents of a walking simulator, moved by four
    steps of the walk flow, are nearer the frame four steps on than unmoved, under the horizon."""
    from engine.model.checkpoint import load_checkpoint
    from engine.model.video_ae import VideoAE, VideoAEConfig, frames_to_tensor
    from engine.runtime.session import DEFAULT_WEIGHTS
    from engine.sim import FrameInputs, SimWorld, WorldSpec

    ae = load_checkpoint(DEFAULT_WEIGHTS / "video_ae.pt", VideoAE, VideoAEConfig).eval()
    for keys, better in ((("W",), 0.7), (("D",), 0.6)):
        sim = SimWorld(WorldSpec(seed=3, theme="frost_valley"))
        sim.reset()
        frames = np.stack([sim.step(FrameInputs.hold(*keys)).rgb for _ in range(13)])
        with torch.inference_mode():
            z = ae.encode(frames_to_tensor(frames))
        before, after = z[:-4], z[4:]
        moved = before
        for _ in range(4):
            moved = warp(moved, walk_flow(held(*keys), 16).expand(len(moved), -1, -1, -1))
        ground = (..., slice(9, 16), slice(2, -2))
        ratio = (moved - after)[ground].pow(2).mean() / (before - after)[ground].pow(2).mean()
        assert ratio < better, (keys, ratio)


def test_a_walking_session_moves_whole_cells_each_with_its_own_rest():
    model = code_model(code_keep=50.0, warp_whole_cells=True, walk_warp=True, keep_walking=True)
    roll = ConvRollout(model, theme=0, seed=3)
    codebook = model.codebook
    start = codebook[torch.randint(0, 32, (16, 16))].permute(2, 0, 1)
    for f in range(2):
        roll.observe(start, torch.zeros(32), held()[0], f)
    for f in range(2, 8):
        roll.generate(held("W")[0], f)
        assert roll.walk_rest.abs().max() <= 0.5 + 1e-6
    z = roll.history[-1]
    assert torch.equal(z[:, :9], start[:, :9])  # the sky and the far ground stay where they were
    assert not torch.equal(z[:, 12:], start[:, 12:])  # the near ground came toward the eye
    # the bottom row's middle cells read from rows above them: the ground moved down
    bottom = z[:, 15, 6:10]
    assert not torch.equal(bottom, start[:, 15, 6:10])
    assert any(torch.equal(bottom[:, 1], start[:, r, 7]) for r in range(9, 15))


def test_the_horizon_follows_the_tilt_within_the_simulators_limit():
    model = code_model(warp_whole_cells=True, walk_warp=True)
    roll = ConvRollout(model, theme=0, seed=3)
    for f in range(40):
        roll.observe(torch.zeros(8, 16, 16), torch.zeros(32), held("UP")[0], f)
    assert roll.horizon.item() == pytest.approx(HORIZON_LIMIT)
    roll.generate(held("DOWN")[0], 40)
    assert roll.horizon.item() < HORIZON_LIMIT


def test_keeping_while_walking_is_its_own_setting():
    model = code_model(code_keep=3.0)
    shown = torch.randint(0, 32, (1, 16, 16), generator=torch.Generator().manual_seed(2))
    context = model.codebook[shown].permute(0, 3, 1, 2)[:, None].repeat(1, 2, 1, 1, 1)
    cond = conditioning(1)
    cond.inputs = held("W")
    p = model.predict(context, torch.ones(1, 2, dtype=torch.bool), torch.zeros(1, 32), cond)
    assert torch.equal(kept_logits(model, p, cond), p.logits)
    model.config = dataclasses.replace(model.config, keep_walking=True)
    gained = kept_logits(model, p, cond) - p.logits
    assert torch.equal(gained.argmax(dim=1), shown)


def test_the_walk_is_written_with_the_camera_warp(tmp_path):
    from engine.model.checkpoint import save_checkpoint
    from engine.model.world_loader import load_world_model
    from engine.train.ship import set_camera_warp

    save_checkpoint(tmp_path / "world.pt", code_model())
    set_camera_warp(True, tmp_path, whole_cells=True, view_memory=True, walk=True)
    assert load_world_model(tmp_path / "world.pt").config.walk_warp
    set_camera_warp(True, tmp_path, whole_cells=True)
    assert not load_world_model(tmp_path / "world.pt").config.walk_warp
    with pytest.raises(ValueError, match="walk"):
        set_camera_warp(False, tmp_path, walk=True)


def test_a_cell_moves_by_its_own_depth_and_flat_ground_is_the_default():
    from engine.model.conv_world import flat_ground_inverse_depth

    n = torch.arange(16, dtype=torch.float32) + 0.5 - 8
    flat = flat_ground_inverse_depth(n[None, :, None].expand(1, 16, 16), 16)
    assert torch.allclose(walk_flow(held("W"), 16, inverse_depth=flat), walk_flow(held("W"), 16))
    assert torch.allclose(walk_flow(held("D"), 16, inverse_depth=flat), walk_flow(held("D"), 16))
    # a tree a few steps ahead, standing above the horizon where flat ground sees only sky
    near = flat.clone()
    near[0, 2:8, 10:13] = 0.3
    moved = walk_flow(held("W"), 16, inverse_depth=near)[0]
    assert not walk_flow(held("W"), 16)[0, :, 2:8, 10:13].any()
    assert (moved[0, 2:8, 10:13] > 0).all()  # right of the middle: it spreads further right
    assert (moved[1, 2:8, 10:13] < 0).all()  # above the horizon: it grows upward
    side = walk_flow(held("D"), 16, inverse_depth=near)[0, 0, 2:8, 10:13]
    assert torch.allclose(side, torch.full_like(side, -WALK_SPEED * 8 * 0.3))
    assert not walk_flow(held("W"), 16, inverse_depth=torch.zeros(1, 16, 16)).any()  # all sky


def test_a_session_with_a_depth_head_moves_its_history_by_the_depth_it_reads():
    from engine.model.depth_head import DepthHead, DepthHeadConfig

    model = code_model(walk_warp=True)
    head = DepthHead(DepthHeadConfig(latent_channels=8, latent_size=16)).eval()
    with torch.no_grad():
        head.out.bias.fill_(1.0)  # softplus(-1): everything about 3 units away
    flat, deep = ConvRollout(model, theme=0, seed=3), ConvRollout(model, 0, seed=3, depth=head)
    start = torch.randn(8, 16, 16, generator=torch.Generator().manual_seed(4))
    for roll in (flat, deep):
        roll.observe(start, torch.zeros(32), held()[0], 0)
    cond = conditioning(1)
    cond.inputs = held("W")
    with torch.no_grad():
        q = head(deep.history[-1][None])  # the newest frame, as the history holds it (codes)
    assert torch.allclose(deep._history_move(cond), walk_flow(cond.inputs, 16, inverse_depth=q))
    assert torch.allclose(flat._history_move(cond), walk_flow(cond.inputs, 16))
    cond.inputs = held("LEFT")  # no step: the head is not asked, the turn alone moves it
    assert deep._inverse_depth(cond) is None
