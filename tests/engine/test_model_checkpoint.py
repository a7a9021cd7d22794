"""Checkpoints carry their dataclass config; the model is rebuilt from it."""

from __future__ import annotations

import torch

from engine.model.checkpoint import load_checkpoint, save_checkpoint
from engine.model.video_ae import VideoAE, VideoAEConfig
from engine.model.world import WorldModel, WorldModelConfig
from engine.model.world_loader import load_world_model


def test_round_trip_rebuilds_config_and_weights(tmp_path):
    torch.manual_seed(0)
    model = WorldModel(WorldModelConfig(width=32, depth=1, heads=2, context=2))
    save_checkpoint(tmp_path / "w.pt", model, {"step": 7})
    loaded = load_checkpoint(tmp_path / "w.pt", WorldModel, WorldModelConfig)
    assert loaded.config == model.config
    assert torch.load(tmp_path / "w.pt", weights_only=True)["step"] == 7
    for (k, a), (_, b) in zip(model.state_dict().items(), loaded.state_dict().items(), strict=True):
        assert torch.equal(a, b), k


def test_half_precision_file_loads_as_float32_with_tuple_fields(tmp_path):
    cfg = VideoAEConfig(widths=(16, 24, 32), latent_mean=[0.5] * 8, latent_std=[2.0] * 8)
    model = VideoAE(cfg)
    save_checkpoint(tmp_path / "v.pt", model, half=True)
    raw = torch.load(tmp_path / "v.pt", weights_only=True)
    assert all(v.dtype == torch.float16 for v in raw["model"].values() if v.is_floating_point())
    loaded = load_checkpoint(tmp_path / "v.pt", VideoAE, VideoAEConfig)
    assert loaded.config.widths == (16, 24, 32)
    assert next(loaded.parameters()).dtype == torch.float32
    x = torch.rand(1, 3, 64, 64)
    with torch.no_grad():
        assert torch.allclose(loaded(x), model(x), atol=0.05)
        # the normalisation statistics came back from the config
        assert torch.allclose(loaded.encode(x), (loaded.encoder(x * 2 - 1) - 0.5) / 2.0)


def test_shipped_weights_load_without_unpickling_code():
    from pathlib import Path

    from engine.model.checkpoint import load_payload

    weights = Path(__file__).resolve().parents[2] / "engine" / "weights"
    for name in ("video_ae.pt", "audio_ae.pt", "world.pt"):
        assert isinstance(load_payload(weights / name)["config"], dict)
    world = load_world_model(weights / "world.pt")  # whichever generator kind is shipped
    assert not world.training and all(p.dtype == torch.float32 for p in world.parameters())
