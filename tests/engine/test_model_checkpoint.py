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


def test_kept_candidates_are_conv_models_a_recipe_can_continue():
    """engine/weights/candidates holds generators the GPU recipe warm-starts from: each loads
    without unpickling code, is a conv model, stays under the 15 MB file limit, and a code
    model carries a fitted codebook (its codes must not be refitted on a continuation)."""
    from pathlib import Path

    from engine.model.conv_world import ConvWorldModel

    folder = Path(__file__).resolve().parents[2] / "engine" / "weights" / "candidates"
    kept = sorted(p for p in folder.glob("*.pt") if not p.name.endswith(".critic.pt"))
    assert kept
    for path in kept:
        assert path.stat().st_size < 15 * 2**20
        model = load_world_model(path)
        assert isinstance(model, ConvWorldModel)
        if model.config.codes:
            codebook = model.codebook.float()
            assert codebook.shape == (model.config.codes, model.config.latent_channels)
            assert len(torch.unique(codebook, dim=0)) == model.config.codes
