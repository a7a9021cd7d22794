"""Generator training pieces on synthetic latent episodes (no data set, no tokenizer run)."""

from __future__ import annotations

import numpy as np
import torch

from engine.model.world import INPUT_FEATURES, WorldModel, WorldModelConfig
from engine.sim.labels import empty_labels
from engine.train.generator import flow_loss, make_memory, sample_windows, window_tensors
from engine.train.latents import LatentEpisode
from engine.train.plots import line_plot


def episode(frames: int = 20, prompt_rows=(3, 12)) -> LatentEpisode:
    g = torch.Generator().manual_seed(0)
    return LatentEpisode(
        video=torch.randn(frames, 8, 16, 16, generator=g).half(),
        audio=torch.randn(frames, 32, generator=g),
        inputs=torch.zeros(frames, INPUT_FEATURES),
        prompt_rows=list(prompt_rows), prompt_texts=[f"text {r}" for r in prompt_rows],
        theme=1, image=None, labels=empty_labels(frames))


def table() -> dict[str, np.ndarray]:
    return {f"text {r}": np.full(384, r / 10, np.float32) for r in (3, 12)}


def test_memory_holds_only_prompts_typed_before_the_window_ends():
    model = WorldModel(WorldModelConfig(width=32, depth=1, heads=2))
    ep = episode()
    _, arrival, valid = make_memory(model, [(ep, 0), (ep, 10)], window=5, text_table=table())
    # window [0, 5): only the prompt at 3; window [10, 15): prompts at 3 and 12
    assert valid[0].tolist() == [True, False, True, False, False, False]
    assert arrival[0, 2] == 3
    assert valid[1].tolist() == [True, False, True, True, False, False]
    assert arrival[1, 2:4].tolist() == [3, 12]


def test_windows_stay_inside_episodes_and_carry_fresh_text():
    ep = episode()
    rng = np.random.default_rng(0)
    batch = sample_windows([ep], 50, 6, rng)
    assert all(0 <= s <= 14 for _, s in batch)
    w = window_tensors([(ep, 10)], 6, table())
    assert w["frame"][0].tolist() == list(range(10, 16))
    assert torch.equal(w["prev"][0, 0], ep.video[9].float())  # previous frame, not zeros
    assert w["text"][0, 2].abs().sum() > 0 and w["text"][0, 1].abs().sum() == 0


def test_flow_loss_trains():
    torch.manual_seed(0)
    model = WorldModel(WorldModelConfig(width=32, depth=1, heads=2, context=3))
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    ep = episode()
    rng = np.random.default_rng(0)
    losses = []
    for _ in range(15):
        batch = sample_windows([ep], 4, 4, rng)
        loss, video, audio = flow_loss(model, batch, 4, table(), 0.5, torch.device("cpu"))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert np.isfinite(losses).all()
    assert np.mean(losses[-5:]) < np.mean(losses[:5])


def test_line_plot_writes_png(tmp_path):
    line_plot(tmp_path / "loss.png", {"loss": [(0, 1.0), (10, 0.5), (20, 0.25)]}, "loss")
    assert (tmp_path / "loss.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
