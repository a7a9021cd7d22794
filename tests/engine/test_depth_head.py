"""The walk warp's depth head: learnt from the simulator's depth, loaded with the weights."""

from __future__ import annotations

import torch

from engine.model.depth_head import DepthHead, DepthHeadConfig, cell_inverse_depth
from engine.runtime import World


def test_the_cell_target_is_the_mean_inverse_depth_and_the_sky_is_zero():
    depth = torch.full((1, 16, 16), float("inf"))
    depth[0, 8:, :8] = 2.0
    depth[0, 12:, :4] = 0.5
    q = cell_inverse_depth(depth, 8)[0]
    assert q[0].tolist() == [0.0, 0.0]
    assert torch.isclose(q[1, 0], torch.tensor((48 * 0.5 + 16 * 2.0) / 64))
    head = DepthHead(DepthHeadConfig(latent_channels=8, latent_size=16))
    out = head(torch.randn(3, 8, 16, 16))
    assert out.shape == (3, 16, 16) and (out > 0).all()


def test_a_depth_training_run_writes_a_head_that_a_world_loads(tmp_path):
    import json
    import shutil

    from engine.model.depth_head import DEPTH_FILE
    from engine.runtime.session import DEFAULT_WEIGHTS
    from engine.train.depth import DepthTrainConfig, train_depth

    cfg = DepthTrainConfig(out=str(tmp_path / "run"), episodes=2, frames=30, minutes=0.02)
    path = train_depth(cfg)
    report = json.loads((tmp_path / "run" / "report.json").read_text())["heldout"]
    assert report["frames"] == 10 and report["head_l1"] > 0 and report["flat_ground_l1"] > 0
    assert (tmp_path / "run" / "loss.png").exists()
    assert train_depth(cfg) == path  # resumes: the budget is spent, nothing retrains
    folder = tmp_path / "weights"
    shutil.copytree(DEFAULT_WEIGHTS, folder)
    shutil.copy(path, folder / DEPTH_FILE)
    world = World.load(folder)
    assert world.depth is not None and world.new_rollout(0).depth is world.depth
