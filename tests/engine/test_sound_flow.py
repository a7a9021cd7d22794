"""The flow-matching sound head: it draws sounds, not their average, and grows onto a model."""

from __future__ import annotations

import dataclasses

import numpy as np
import torch

from engine.model.sound_flow import SoundFlow
from engine.model.world import INPUT_FEATURES
from engine.model.world_loader import load_world_model
from engine.runtime.conv_rollout import ConvRollout
from engine.train.conv_generator import with_sound_head

from .test_conv_world import ConvWorldConfig, conditioning, small, tiny_config, training

__all__ = ["training"]  # the fixture, shared with the conv model's tests


def test_a_flow_draws_either_of_two_sounds_where_a_regression_hears_their_average():
    """Given the same context, the target is +1 or -1 at random (a footstep or none): the
    squared-error optimum is 0, a sound nobody made; the flow must draw both."""
    torch.manual_seed(0)
    flow = SoundFlow(context_dim=4, audio_dim=2, width=32, blocks=2)
    opt = torch.optim.Adam(flow.parameters(), lr=3e-3)
    gen = torch.Generator().manual_seed(0)
    context = torch.ones(128, 4)
    for _ in range(200):
        sign = torch.randint(0, 2, (128, 1), generator=gen).float() * 2 - 1
        target = torch.cat([sign, 0.05 * torch.randn(128, 1, generator=gen)], dim=1)
        loss = flow.loss(context, target, gen)
        opt.zero_grad()
        loss.backward()
        opt.step()
    with torch.no_grad():
        drawn = flow.draw(torch.ones(512, 4), torch.randn(512, 2, generator=gen), steps=8)
    first = drawn[:, 0]
    assert (first.abs() > 0.5).float().mean() > 0.85  # near one of the two sounds
    assert 0.3 < (first > 0).float().mean() < 0.7  # and both of them
    assert drawn[:, 1].std() < 0.3  # the quiet number stays quiet


def test_a_grown_flow_head_keeps_the_model_and_draws_by_the_sessions_seed():
    model = small().eval()
    ctx, valid = torch.randn(2, 3, 8, 16, 16), torch.ones(2, 3, dtype=torch.bool)
    heard = torch.randn(2, 3, 32)
    before = model.predict(ctx, valid, heard[:, -1], conditioning())
    grown = with_sound_head(model, history=3, sample=False, flow_steps=4).eval()
    assert grown.config.audio_flow_steps == 4 and grown.sound_flow is not None
    after = grown.predict(ctx, valid, heard, conditioning())
    assert torch.equal(after.video, before.video)
    assert torch.allclose(after.audio, before.audio, atol=1e-6)  # the regressed mean kept
    noise = torch.randn(2, 32, generator=torch.Generator().manual_seed(5))
    new_draw = grown.draw_audio(after, torch.Generator().manual_seed(5))
    assert torch.allclose(new_draw, noise)  # an untrained flow does not move its noise
    with torch.no_grad():
        for param in grown.sound_flow.parameters():
            param.normal_(0, 0.1)
    drawn = [grown.draw_audio(after, torch.Generator().manual_seed(s)) for s in (1, 1, 2)]
    assert torch.equal(drawn[0], drawn[1]) and not torch.equal(drawn[0], drawn[2])
    louder = dataclasses.replace(after, heard=after.heard + 1.0)  # the flow reads the context
    assert not torch.allclose(grown.draw_audio(louder, torch.Generator().manual_seed(1)), drawn[0])
    deeper = with_sound_head(grown, history=5, sample=False)  # more history: the flow is kept
    assert deeper.config.audio_flow_steps == 4 and deeper.config.audio_history == 5
    padded = torch.cat([torch.randn(2, 2, 32), heard], dim=1)  # two older sounds, weight 0
    same = deeper.predict(ctx, valid, padded, conditioning())
    again = deeper.draw_audio(same, torch.Generator().manual_seed(1))
    assert torch.allclose(again, drawn[0], atol=1e-5)
    roll = ConvRollout(grown, theme=0, seed=3)
    roll.observe(ctx[0, -1], heard[0, -1], np.zeros(INPUT_FEATURES), 0)
    with torch.no_grad():
        sounds = [roll.generate(np.zeros(INPUT_FEATURES), t)[1] for t in range(1, 4)]
    assert all(torch.isfinite(s).all() for s in sounds) and roll.audio.shape == (1, 3, 32)


def test_audio_only_training_of_a_flow_head_moves_only_the_sound_heads(tmp_path, training):
    conv, base = training
    first = load_world_model(
        conv.train_conv(tiny_config(base, tmp_path / "a", steps=2)) / "world.pt"
    )
    model = ConvWorldConfig(width=16, width_low=16, context=3, audio_flow_steps=3)
    cfg = tiny_config(
        base,
        tmp_path / "flow",
        steps=3,
        model=model,
        init=str(tmp_path / "a" / "weights" / "world.pt"),
        audio_only=True,
        lr=1e-2,
    )
    tuned = load_world_model(conv.train_conv(cfg) / "world.pt")
    assert tuned.config.audio_flow_steps == 3 and tuned.sound_flow is not None
    old, new = first.state_dict(), tuned.state_dict()
    moved = {k for k in new if k not in old or not torch.equal(new[k], old[k])}
    assert any(k.startswith("sound_flow") for k in moved)
    assert all(k.startswith(("audio_head", "sound_flow")) for k in moved), moved
