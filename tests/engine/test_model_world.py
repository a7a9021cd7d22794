"""The causal world transformer: shapes, causality, memory arrival, KV cache == full pass."""

from __future__ import annotations

import pytest
import torch

from engine.model.audio_ae import AudioAE, AudioAEConfig
from engine.model.video_ae import VideoAE, VideoAEConfig
from engine.model.world import INPUT_FEATURES, Blocks, Memory, WorldModel, WorldModelConfig


def tiny_model(context: int = 3) -> WorldModel:
    torch.manual_seed(0)
    model = WorldModel(WorldModelConfig(width=32, depth=2, heads=2, context=context)).eval()
    torch.nn.init.normal_(model.video_out.weight, std=0.1)  # zero-init would hide differences
    return model


def blocks(frames: int, noisy_last: bool = True, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    lat = torch.randn(1, frames, 8, 16, 16, generator=g)
    prev = torch.cat([torch.zeros_like(lat[:, :1]), lat[:, :-1]], dim=1)
    audio = torch.randn(1, frames, 32, generator=g)
    inputs = torch.randn(1, frames, INPUT_FEATURES, generator=g)
    text = torch.zeros(1, frames, 384)
    level = torch.ones(1, frames)
    noisy = torch.zeros(1, frames, dtype=torch.bool)
    if noisy_last:
        level[0, -1], noisy[0, -1] = 0.4, True
    return dict(
        video=lat,
        prev=prev,
        audio=audio,
        inputs=inputs,
        text=text,
        level=level,
        frame=torch.arange(frames)[None],
        noisy=noisy,
    )


def memory(model: WorldModel, arrival: tuple[int, ...] = (0, 0, 0)):
    mem = model.embed_memory(
        torch.tensor([1]),
        torch.randn(1, len(arrival) - 2, 384, generator=torch.Generator().manual_seed(5)),
        torch.randn(1, 128, generator=torch.Generator().manual_seed(6)),
    )
    return mem, torch.tensor([arrival]), torch.ones(1, len(arrival), dtype=torch.bool)


def run(model, b, mem):
    return model(Blocks(**b), Memory(*mem))


def test_shapes_and_patchify_roundtrip():
    model = tiny_model()
    b = blocks(4)
    with torch.no_grad():
        v, a = run(model, b, memory(model))
    assert v.shape == (1, 4, 8, 16, 16) and a.shape == (1, 4, 32)
    z = torch.randn(2, 3, 8, 16, 16)
    tokens = model.patchify(z)
    assert tokens.shape == (2, 3, 16, 128)
    assert torch.equal(tokens[0, 0, 1].view(8, 4, 4), z[0, 0, :, 0:4, 4:8])
    assert torch.equal(model.unpatchify(tokens), z)


def test_tokenizer_shapes():
    video, audio = VideoAE(VideoAEConfig()).eval(), AudioAE(AudioAEConfig()).eval()
    with torch.no_grad():
        z = video.encode(torch.rand(2, 3, 128, 128))
        assert z.shape == (2, 8, 16, 16)
        assert video.decode(z).shape == (2, 3, 128, 128)
        za = audio.encode(torch.rand(3, 800) - 0.5)
        assert za.shape == (3, 32) and audio.decode(za).shape == (3, 800)


@pytest.mark.parametrize("field", ["video", "inputs", "audio", "text"])
def test_a_frame_never_depends_on_a_later_input(field):
    model = tiny_model()
    b = blocks(6, noisy_last=False)
    mem = memory(model)
    with torch.no_grad():
        v1, a1 = run(model, b, mem)
        b[field] = b[field].clone()
        b[field][:, 3] += 1.0  # perturb frame 3 only
        v2, a2 = run(model, b, mem)
    assert torch.allclose(v1[:, :3], v2[:, :3]) and torch.allclose(a1[:, :3], a2[:, :3])
    assert not torch.allclose(v1[:, 3:], v2[:, 3:])  # ...and the perturbation does matter later


def test_memory_is_seen_only_after_it_arrives():
    model = tiny_model()
    b = blocks(6, noisy_last=False)
    late = memory(model, (0, 0, 4))  # a sentence typed at frame 4
    absent = (late[0], late[1], torch.tensor([[True, True, False]]))
    with torch.no_grad():
        v_late, _ = run(model, b, late)
        v_absent, _ = run(model, b, absent)
    assert torch.allclose(v_late[:, :4], v_absent[:, :4])
    assert not torch.allclose(v_late[:, 4:], v_absent[:, 4:])


def test_kv_cached_inference_equals_full_pass_with_rolling_window():
    model = tiny_model(context=3)
    frames = 8  # longer than the context: the cache must evict exactly like the mask
    b = blocks(frames)
    mem = memory(model)
    with torch.no_grad():
        v_ref, a_ref = run(model, b, mem)
        cache = model.new_cache()
        cache.set_memory(model.memory_layers(mem[0]))
        for f in range(frames - 1):
            model.cached_block(
                cache,
                b["video"][:, f],
                b["prev"][:, f],
                b["audio"][:, f],
                b["inputs"][:, f],
                b["text"][:, f],
                1.0,
                f,
                write=True,
            )
        assert cache.frames == [4, 5, 6]
        f = frames - 1
        v, a = model.cached_block(
            cache,
            b["video"][:, f],
            b["prev"][:, f],
            b["audio"][:, f],
            b["inputs"][:, f],
            b["text"][:, f],
            0.4,
            f,
            write=False,
        )
    assert torch.allclose(v[:, 0], v_ref[:, f], atol=1e-5)
    assert torch.allclose(a[:, 0], a_ref[:, f], atol=1e-5)
    assert cache.frames == [4, 5, 6]  # a noisy block never enters the cache


def test_euler_sampler_walks_from_noise_to_data_in_equal_steps():
    from engine.model.sampler import EulerSampler

    sampler = EulerSampler(4)
    assert sampler.levels() == [0.0, 0.25, 0.5, 0.75]
    noise, data = torch.zeros(3), torch.tensor([1.0, -2.0, 0.5])
    x = noise
    for _ in sampler.levels():  # the exact velocity of the straight path is data - noise
        x = sampler.step(x, data - noise)
    assert torch.allclose(x, data)


def test_refiner_starts_as_identity_and_mixes_across_patch_borders(tmp_path):
    from engine.model.checkpoint import save_checkpoint
    from engine.train.finetune import warm_start_world

    plain = tiny_model()
    save_checkpoint(tmp_path / "world.pt", plain)
    grown = warm_start_world(tmp_path / "world.pt", refine_width=8)
    b, mem = blocks(4), memory(plain)
    with torch.no_grad():
        assert torch.allclose(run(plain, b, mem)[0], run(grown, b, mem)[0], atol=1e-6)
        torch.nn.init.normal_(grown.refine[-1].weight, std=0.1)  # a trained refiner
        grown.video_out.weight.zero_()
        grown.video_out.bias.zero_()
        b["video"] = torch.zeros_like(b["video"])
        blank, _ = run(grown, b, mem)
        b["video"][..., 3, 3] = 1.0  # one latent pixel at the corner of patch (0, 0)
        v, _ = run(grown, b, mem)
    # the per-token head is silent; the refiner spreads the pixel into the neighbouring patch
    moved = (v - blank)[0, -1].abs().sum(0)
    assert moved[4, 4] > 0 and moved[12, 12] == 0


def test_kv_cached_inference_equals_full_pass_with_refiner():
    torch.manual_seed(0)
    model = WorldModel(
        WorldModelConfig(width=32, depth=2, heads=2, context=3, refine_width=8)
    ).eval()
    torch.nn.init.normal_(model.refine[-1].weight, std=0.1)
    b, mem = blocks(4), memory(model)
    with torch.no_grad():
        v_ref, _ = run(model, b, mem)
        cache = model.new_cache()
        cache.set_memory(model.memory_layers(mem[0]))
        for f in range(3):
            model.cached_block(
                cache,
                b["video"][:, f],
                b["prev"][:, f],
                b["audio"][:, f],
                b["inputs"][:, f],
                b["text"][:, f],
                1.0,
                f,
                write=True,
            )
        v, _ = model.cached_block(
            cache,
            b["video"][:, 3],
            b["prev"][:, 3],
            b["audio"][:, 3],
            b["inputs"][:, 3],
            b["text"][:, 3],
            0.4,
            3,
            write=False,
        )
    assert torch.allclose(v[:, 0], v_ref[:, 3], atol=1e-5)


def test_texture_decoder_grows_from_a_single_output_one_and_sums_its_parts(tmp_path):
    from engine.model.audio_ae import texture_loss
    from engine.model.checkpoint import save_checkpoint
    from engine.train.tokenizers import audio_warm_start

    torch.manual_seed(0)
    old = AudioAE(AudioAEConfig(latent_scale=2.0)).eval()
    save_checkpoint(tmp_path / "audio_ae.pt", old)
    grown = audio_warm_start(str(tmp_path), texture=True).eval()
    x = torch.rand(3, 800) - 0.5
    with torch.no_grad():
        parts = grown.decode_parts(grown.encode(x))
        assert parts.shape == (3, 2, 800)
        assert torch.equal(parts[:, 0], torch.zeros(3, 800))  # coherent part starts silent
        assert torch.allclose(parts[:, 1], old(x), atol=1e-5)  # texture = the old sound
        assert torch.allclose(grown(x), parts.sum(1))
    losses = texture_loss(grown.decode_parts(grown.encode(x)), x)
    losses["spec"].backward()
    last = grown.decoder[-1]
    assert last.weight.grad[0].abs().sum() == 0  # the spectrum never moves the coherent part
    assert last.weight.grad[1].abs().sum() > 0
