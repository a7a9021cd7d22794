"""The judge-free text-reading figure: teacher forcing through a code model's rollout, told a
sentence vs nothing typed."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from engine.eval import text_reading as tr
from engine.eval.protocols import PromptCase, prompt_episode
from engine.model.conv_world import ConvWorldConfig, ConvWorldModel
from engine.model.inputs import input_features
from engine.model.latent_codes import code_latents, nearest_codes
from engine.model.video_ae import frames_to_tensor
from engine.runtime.session import World

from .test_conv_world import nudge_parameters
from .test_runtime_session import FakeText, tiny_world

CASE = PromptCase("night", "turn the lights out")


def code_world() -> World:
    """A small untrained code model whose codebook is cells of the test episode's own
    latents (a random codebook would give every cell of an untrained autoencoder one code)."""
    base = tiny_world()
    torch.manual_seed(0)
    cfg = ConvWorldConfig(width=16, width_low=16, cond_dim=16, context=3, codes=16)
    model = ConvWorldModel(cfg).eval()
    with torch.no_grad():
        nudge_parameters(model)
        z = base.video_ae.encode(frames_to_tensor(prompt_episode(CASE, 0).frames))
        cells = z.permute(0, 2, 3, 1).reshape(-1, z.shape[1])
        model.codebook.copy_(cells[torch.randperm(len(cells))[:16]])
    return World(base.video_ae, base.audio_ae, model, text_encoder=FakeText())


@pytest.fixture(scope="module")
def world() -> World:
    return code_world()


def test_teacher_forcing_scores_a_frame_then_keeps_the_true_one(world):
    roll = world.new_rollout(0)
    idle = input_features(0, 0, 0, 0, False, False)
    z = torch.randn(8, 16, 16)
    with torch.inference_mode():
        logits = roll.teacher_logits(z, torch.zeros(32), idle, 0)
        again = roll.teacher_logits(z, torch.zeros(32), idle, 1)
    assert logits.shape == (1, 16, 16, 16)
    codebook = world.model.codebook
    expected = code_latents(nearest_codes(z[None], codebook), codebook)[0]
    assert torch.equal(roll.history[-1], expected) and len(roll.history) == 2
    assert not torch.equal(logits, again)  # the second frame saw the first in its history


def test_a_sentence_moves_the_figure_and_no_sentence_leaves_it_at_zero(world, monkeypatch):
    gain, told, share = tr.case_gain(world, CASE, 0)
    assert gain != 0.0 and told > 0 and 0 < share <= 1

    def untyped(c, i):
        ep = prompt_episode(c, i)
        return dataclasses.replace(ep, model_text={})

    monkeypatch.setattr(tr, "prompt_episode", untyped)
    gain, _, _ = tr.case_gain(world, CASE, 0)
    assert gain == 0.0


def test_a_model_without_codes_gets_no_figure():
    assert tr.text_reading(tiny_world(), print) == {}
