"""The convolutional world model: its step, its rollout, and training on its own rollouts."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
import torch

from engine.model.checkpoint import save_checkpoint
from engine.model.conv_world import MEMORY_SLOTS, Conditioning, ConvWorldConfig, ConvWorldModel
from engine.model.world import INPUT_FEATURES
from engine.model.world_loader import load_world_model
from engine.runtime.conv_rollout import ConvRollout
from engine.train.bank import LatentBank
from engine.train.conv_generator import (
    ConvTrainConfig,
    collect_histories,
    conv_windows,
    frame_conditioning,
    unrolled_loss,
    weighted_code_loss,
)

from .test_train_generator import episode, table


def small(context: int = 3) -> ConvWorldModel:
    torch.manual_seed(0)
    return ConvWorldModel(ConvWorldConfig(width=16, width_low=16, cond_dim=16, context=context))


def nudge_parameters(model: torch.nn.Module) -> None:
    """Add small seeded noise to every parameter (zero-initialised heads start to matter)."""
    for p in model.parameters():
        p.add_(0.05 * torch.randn(p.shape, generator=torch.Generator().manual_seed(p.numel())))


def conditioning(b: int = 2) -> Conditioning:
    return Conditioning(
        inputs=torch.zeros(b, INPUT_FEATURES),
        text=torch.zeros(b, 384),
        memory=torch.zeros(b, MEMORY_SLOTS, 384),
        memory_age=torch.zeros(b, MEMORY_SLOTS),
        memory_valid=torch.zeros(b, MEMORY_SLOTS, dtype=torch.bool),
        theme=torch.zeros(b, dtype=torch.long),
        image=torch.zeros(b, 128),
        noise=torch.zeros(b),
    )


def test_a_new_model_copies_the_newest_frame_and_ignores_missing_history():
    model = small()
    ctx = torch.randn(2, 3, 8, 16, 16)
    valid = torch.ones(2, 3, dtype=torch.bool)
    z, a = model(ctx, valid, torch.zeros(2, 32), conditioning())
    assert z.shape == (2, 8, 16, 16) and a.shape == (2, 32)
    assert torch.allclose(z, ctx[:, -1])  # the zero-initialised output: "nothing changed"
    with torch.no_grad():
        model.out.bias.fill_(0.1)  # now it does change the picture
    valid[:, 0] = False
    changed = ctx.clone()
    changed[:, 0] = 100.0  # a frame marked missing must not matter
    z1, _ = model(ctx, valid, torch.zeros(2, 32), conditioning())
    z2, _ = model(changed, valid, torch.zeros(2, 32), conditioning())
    assert torch.allclose(z1, z2)


def test_the_world_loader_tells_the_two_generators_apart(tmp_path):
    from engine.model.world import WorldModel, WorldModelConfig

    save_checkpoint(tmp_path / "conv.pt", small(), half=True)
    save_checkpoint(
        tmp_path / "tokens.pt", WorldModel(WorldModelConfig(width=32, depth=1, heads=2))
    )
    assert isinstance(load_world_model(tmp_path / "conv.pt"), ConvWorldModel)
    assert isinstance(load_world_model(tmp_path / "tokens.pt"), WorldModel)


def test_training_lays_out_memory_exactly_as_the_rollout_does():
    """A window whose sentences arrive at frames 3 and 12 (and 5, 7, 9 in the second episode):
    at every position the training conditioning equals what ConvRollout builds at run time."""
    eps = [episode(frames=20, prompt_rows=(3, 12)), episode(prompt_rows=(3, 5, 7, 9, 12), seed=1)]
    tab = table()
    bank = LatentBank.build(eps, tab)
    for start in (0, 20 + 4):
        w = conv_windows(bank, torch.tensor([start]), window=14)
        ep = eps[0] if start < 20 else eps[1]
        roll = ConvRollout(small(), theme=ep.theme)
        first = int(w["frame"][0, 0])
        for row, text in zip(ep.prompt_rows, ep.prompt_texts, strict=True):
            if row < first:
                roll.add_text(tab[text], frame=row)
        for t in range(14):
            frame = int(w["frame"][0, t])
            if frame in ep.prompt_rows:
                roll.add_text(tab[ep.prompt_texts[ep.prompt_rows.index(frame)]], frame=frame)
            run_time = roll._conditioning(w["inputs"][0, t], frame, None)
            trained = frame_conditioning(w, t, torch.zeros(1))
            assert torch.equal(trained.memory_valid, run_time.memory_valid), (start, t)
            assert torch.allclose(trained.memory, run_time.memory), (start, t)
            assert torch.equal(trained.memory_age.float(), run_time.memory_age), (start, t)


def test_unrolled_training_backpropagates_through_its_own_predictions():
    bank = LatentBank.build([episode(frames=30), episode(frames=30, seed=1)], table())
    model = small().train()
    cfg = ConvTrainConfig(unroll=3, noise_share=0.0, drop_share=0.0)
    w = conv_windows(bank, torch.tensor([0, 35]), window=3 + cfg.unroll)
    losses = unrolled_loss(model, w, cfg, torch.Generator().manual_seed(0))
    losses.loss.backward()
    # the stem only reaches the loss through the chain of predictions (the first step of an
    # untrained model copies, but later steps read the earlier predictions)
    assert model.stem.weight.grad is not None and model.stem.weight.grad.abs().sum() > 0
    assert torch.isfinite(losses.video) and torch.isfinite(losses.audio)
    assert losses.pairs is None  # no critic asked for


def test_silenced_windows_train_the_sound_head_without_the_sounds_before_them():
    bank = LatentBank.build([episode(frames=30), episode(frames=30, seed=1)], table())
    model = ConvWorldModel(
        ConvWorldConfig(width=16, width_low=16, cond_dim=16, context=3, audio_history=3)
    )
    with torch.no_grad():
        model.audio_head[0].weight.normal_(0, 0.1)  # a head that listens to its history

    def sound_loss(drop: float, louder: float) -> float:
        cfg = ConvTrainConfig(unroll=2, noise_share=0.0, drop_share=0.0, audio_drop_share=drop)
        w = conv_windows(bank, torch.tensor([0, 35]), window=3 + cfg.unroll)
        w["audio"][:, :3] += louder  # only what was heard before the chain
        return unrolled_loss(model, w, cfg, torch.Generator().manual_seed(0)).audio.item()

    assert sound_loss(0.0, 0.0) != sound_loss(0.0, 2.0)
    assert sound_loss(1.0, 0.0) == sound_loss(1.0, 2.0)  # every window heard nothing


def test_a_few_steps_on_one_batch_lower_the_unrolled_loss():
    bank = LatentBank.build([episode(frames=30)], table())
    model = small().train()
    cfg = ConvTrainConfig(unroll=2, noise_share=0.0, drop_share=0.0)
    w = conv_windows(bank, torch.tensor([0, 5, 10]), window=5)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    losses = []
    for _ in range(40):
        loss = unrolled_loss(model, w, cfg, torch.Generator().manual_seed(0)).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.8 * losses[0], losses


def test_error_bank_histories_point_at_their_true_continuation():
    bank = LatentBank.build([episode(frames=80), episode(frames=80, seed=1)], table())
    cfg = ConvTrainConfig(bank_rollouts=4, bank_horizon=12, unroll=2)
    found = collect_histories(small(), bank, cfg, torch.Generator().manual_seed(0))
    assert len(found.row) == 4 * 2  # stored at horizons 4 and 12
    assert found.video.shape[1:] == (3, 8, 16, 16)
    # room for the targets after each history, inside its episode
    ends = bank.local[found.row] + cfg.unroll
    assert (ends <= bank.lengths[bank.episode[found.row]]).all()
    assert (found.error >= 0).all()


def test_a_conv_weights_folder_plays_through_the_runtime_deterministically(tmp_path):
    from engine.model.audio_ae import AudioAE, AudioAEConfig
    from engine.model.video_ae import VideoAE, VideoAEConfig
    from engine.runtime.session import World

    save_checkpoint(tmp_path / "video_ae.pt", VideoAE(VideoAEConfig(stem=8, widths=(8, 8, 8))))
    save_checkpoint(tmp_path / "audio_ae.pt", AudioAE(AudioAEConfig(width=8)))
    model = small(context=4)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.05 * torch.randn_like(p))  # a model whose picture follows the inputs
    save_checkpoint(tmp_path / "world.pt", model, half=True)
    world = World.load(tmp_path)
    assert isinstance(world.model, ConvWorldModel)

    def play(keys: tuple[str, ...]) -> np.ndarray:
        session = world.start(seed=2, theme="frost_valley")
        frames = []
        for t in range(8):
            session.push({"kind": "action", "keys": list(keys) if t >= 4 else []})
            if t == 2:
                session.push({"kind": "prompt", "text": "make it night"})
            frames.append(session.next_chunk().video)
        return np.concatenate(frames)

    a, b, walked = play(()), play(()), play(("W",))
    assert a.shape[1:] == (128, 128, 3) and len(a) == 2 + 4 + 5  # a sentence opens 4 frames
    assert np.array_equal(a, b)
    assert np.array_equal(a[:7], walked[:7]) and not np.array_equal(a[7:], walked[7:])


@pytest.fixture
def training(tmp_path, monkeypatch):
    """`engine.train.conv_generator` training on two small episodes (nothing encoded) with toy
    tokenizers in `tmp_path / "base"`: (the module, that weights folder)."""
    import engine.train.conv_generator as conv

    eps = [episode(frames=80), episode(frames=80, seed=1)]
    monkeypatch.setattr(conv, "encode_dataset", lambda *a, **k: (eps, table()))
    monkeypatch.setattr(conv, "tokenizer_fingerprint", lambda *a: "0" * 40)
    from engine.model.audio_ae import AudioAE, AudioAEConfig
    from engine.model.video_ae import VideoAE, VideoAEConfig

    base = tmp_path / "base"
    save_checkpoint(base / "video_ae.pt", VideoAE(VideoAEConfig(stem=8, widths=(8, 8, 8))))
    save_checkpoint(base / "audio_ae.pt", AudioAE(AudioAEConfig(width=8)))
    return conv, base


@pytest.mark.parametrize("share", [0.0, 0.5])
def test_training_writes_weights_and_resumes(tmp_path, share, training):
    conv, base = training
    cfg = ConvTrainConfig(
        weights=str(base),
        out=str(tmp_path / "run"),
        steps=4,
        minutes=None,
        batch=4,
        unroll=2,
        model=ConvWorldConfig(width=16, width_low=16, context=3),
        bank_share=share,
        bank_every=2,
        bank_rollouts=2,
        bank_horizon=8,
        checkpoint_every=2,
    )
    dest = conv.train_conv(cfg)
    assert sorted(p.name for p in dest.iterdir()) == ["audio_ae.pt", "video_ae.pt", "world.pt"]
    first = load_world_model(dest / "world.pt")
    assert isinstance(first, ConvWorldModel) and first.config.context == 3
    saved = torch.load(tmp_path / "run" / "state.pt", weights_only=True)
    assert saved["step"] == 4 and (len(saved["errors"]["row"]) > 0) == (share > 0)
    conv.train_conv(dataclasses.replace(cfg, steps=6))  # resumes from step 4
    assert torch.load(tmp_path / "run" / "state.pt", weights_only=True)["step"] == 6
    rows = (tmp_path / "run" / "loss.jsonl").read_text().splitlines()
    assert len(rows) == 6 and (tmp_path / "run" / "loss.png").exists()


def test_warp_moves_a_latent_by_whole_and_fractional_cells():
    from engine.model.conv_world import warp

    ramp = torch.arange(16.0).view(1, 1, 1, 16).expand(1, 3, 16, 16).contiguous()
    right = torch.zeros(1, 2, 16, 16)
    right[:, 0] = 1.0
    assert torch.allclose(warp(ramp, torch.zeros(1, 2, 16, 16)), ramp, atol=1e-5)
    assert torch.allclose(warp(ramp, right)[0, 0, 5, 1:], ramp[0, 0, 5, :-1], atol=1e-5)
    assert torch.allclose(warp(ramp, right * 0.5)[0, 0, 5, 4], torch.tensor(3.5), atol=1e-5)


def test_a_flow_model_starts_as_copy_last_and_its_motion_field_trains():
    model = ConvWorldModel(
        ConvWorldConfig(width=16, width_low=16, cond_dim=16, context=3, flow=True)
    )
    ctx = torch.randn(2, 3, 8, 16, 16)
    z, _ = model(ctx, torch.ones(2, 3, dtype=torch.bool), torch.zeros(2, 32), conditioning())
    assert torch.allclose(z, ctx[:, -1], atol=1e-5)
    with torch.no_grad():
        model.out_norm.bias.fill_(1.0)  # the flow head's zero weights get a gradient
    z, _ = model(ctx, torch.ones(2, 3, dtype=torch.bool), torch.zeros(2, 32), conditioning())
    (z - torch.roll(ctx[:, -1], 1, dims=-1)).pow(2).mean().backward()
    assert model.flow_out is not None and model.flow_out.weight.grad.abs().sum() > 0


def test_a_denoising_model_samples_from_its_seed_and_trains_on_noisy_frames():
    from engine.model.conv_world import sample_frame
    from engine.train.conv_generator import denoise_loss

    torch.manual_seed(0)
    model = ConvWorldModel(
        ConvWorldConfig(width=16, width_low=16, cond_dim=16, context=3, denoise=True)
    )
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.05 * torch.randn_like(p))
    ctx = torch.randn(1, 3, 8, 16, 16)
    valid = torch.ones(1, 3, dtype=torch.bool)

    def draw(seed: int) -> torch.Tensor:
        noise = torch.randn(1, 8, 16, 16, generator=torch.Generator().manual_seed(seed))
        z, _ = sample_frame(model, ctx, valid, torch.zeros(1, 32), conditioning(1), noise)
        return z

    assert torch.equal(draw(1), draw(1)) and not torch.allclose(draw(1), draw(2))
    with pytest.raises(AssertionError, match="noisy frame"):
        model(ctx, valid, torch.zeros(1, 32), conditioning(1))  # no noisy frame given

    bank = LatentBank.build([episode(frames=30)], table())
    w = conv_windows(bank, torch.tensor([0, 5, 10]), window=5)
    losses = denoise_loss(model, w, ConvTrainConfig(unroll=2), torch.Generator())
    losses.loss.backward()
    assert torch.isfinite(losses.video) and model.stem.weight.grad.abs().sum() > 0


def test_the_critic_scores_every_chain_step_and_pushes_the_generator():
    from engine.train.latent_critic import LatentCritic, critic_loss

    bank = LatentBank.build([episode(frames=30), episode(frames=30, seed=1)], table())
    model = small().train()
    cfg = ConvTrainConfig(unroll=3, noise_share=0.0, drop_share=0.0, adv_weight=0.1)
    w = conv_windows(bank, torch.tensor([0, 35]), window=3 + cfg.unroll)
    torch.manual_seed(0)
    critic = LatentCritic(8, width=8)
    plain = unrolled_loss(model, w, cfg, torch.Generator().manual_seed(0))
    losses = unrolled_loss(model, w, cfg, torch.Generator().manual_seed(0), critic=critic)
    assert losses.adversarial is not None and losses.pairs is not None
    previous, real, fake, inputs = losses.pairs
    assert previous.shape == real.shape == fake.shape == (2 * 3, 8, 16, 16)
    assert inputs.shape == (2 * 3, INPUT_FEATURES)
    # each real is paired with the frame before it in the window, each fake with its real
    assert torch.equal(previous[1], w["video"][0, 3]) and torch.equal(real[1], w["video"][0, 4])
    assert torch.allclose(losses.loss, plain.loss + 0.1 * losses.adversarial)
    losses.loss.backward()
    assert model.stem.weight.grad is not None and model.stem.weight.grad.abs().sum() > 0

    # the critic learns to tell the true frames from a blurred copy of them
    opt = torch.optim.Adam(critic.parameters(), lr=3e-3)
    blurred = torch.nn.functional.avg_pool2d(real, 5, stride=1, padding=2)
    first = None
    for _ in range(60):
        loss, relativistic = critic_loss(critic, previous, real, blurred, inputs, gamma=0.1)
        opt.zero_grad()
        loss.backward()
        opt.step()
        first = relativistic.item() if first is None else first
    assert relativistic.item() < 0.5 * first


def tiny_config(base, out, steps: int, model: ConvWorldConfig | None = None, **changes):
    """A tiny run's config: `steps` steps, one checkpoint at the end."""
    return ConvTrainConfig(
        weights=str(base),
        out=str(out),
        steps=steps,
        minutes=None,
        batch=2,
        unroll=2,
        model=model or ConvWorldConfig(width=16, width_low=16, context=3),
        checkpoint_every=steps,
        **changes,
    )


def adversarial_config(base, out, steps: int, **changes) -> ConvTrainConfig:
    """A tiny adversarial run's config."""
    return tiny_config(base, out, steps, adv_weight=0.1, **changes)


def test_adversarial_training_checkpoints_its_critic_and_refuses_denoisers(tmp_path, training):
    conv, base = training
    cfg = adversarial_config(base, tmp_path / "run", steps=3)
    conv.train_conv(cfg)
    saved = torch.load(tmp_path / "run" / "state.pt", weights_only=True)
    assert "critic" in saved and "critic_opt" in saved
    log = (tmp_path / "run" / "loss.jsonl").read_text().splitlines()
    assert '"critic"' in log[-1] and '"generator_adv"' in log[-1]
    conv.train_conv(dataclasses.replace(cfg, steps=4))  # resumes the critic too
    denoiser = dataclasses.replace(
        cfg,
        out=str(tmp_path / "denoise"),
        model=ConvWorldConfig(width=16, width_low=16, context=3, denoise=True),
    )
    with pytest.raises(ValueError, match="regressing models"):
        conv.train_conv(denoiser)


def same_weights(a: torch.nn.Module, b: torch.nn.Module) -> bool:
    pairs = zip(a.state_dict().values(), b.state_dict().values(), strict=True)
    return all(torch.equal(x, y) for x, y in pairs)


def test_a_critic_warmup_holds_the_generator_and_the_critic_travels_with_the_weights(
    tmp_path, training
):
    conv, base = training
    cfg = adversarial_config(base, tmp_path / "warm", steps=2, critic_warmup=2)
    dest = conv.train_conv(cfg)
    held = load_world_model(dest / "world.pt")
    torch.manual_seed(cfg.seed)  # the run's new model, as it was before its first step
    fresh = ConvWorldModel(cfg.model).half().float()
    assert same_weights(held, fresh)  # two steps of warm-up: only the critic learnt
    critic_file = dest / "critic.pt"
    saved = torch.load(critic_file, weights_only=True)["critic"]
    assert all(v.dtype == torch.float16 for v in saved.values() if v.is_floating_point())
    trained = dataclasses.replace(
        cfg,
        out=str(tmp_path / "next"),
        init=str(dest / "world.pt"),
        init_critic=str(critic_file),
        critic_warmup=0,
    )
    moved = load_world_model(conv.train_conv(trained) / "world.pt")
    assert not same_weights(held, moved)


def test_image_windows_replace_the_first_share_of_a_batch():
    from engine.train.conv_generator import with_event_windows

    late = episode(frames=30, seed=1, image=True)
    late.labels["image_event"][12] = True
    bank = LatentBank.build([episode(frames=30), late], table())
    starts = torch.zeros(8, dtype=torch.long)
    cfg = ConvTrainConfig(image_share=0.5)
    mixed = with_event_windows(starts, bank, cfg, window=6, context=3, gen=torch.Generator())
    arrival = 30 + 12
    assert all(0 <= arrival - int(s) - 3 < 3 for s in mixed[:4])  # a predicted frame sees it
    assert mixed[4:].tolist() == [0] * 4
    plain = bank.windows(mixed[:1], 6)
    assert plain["frame_has_image"][0].any() and not plain["frame_has_image"][0, 0]


def test_sentence_windows_follow_the_image_windows_and_see_a_sentence_typed():
    from engine.train.conv_generator import with_event_windows

    late = episode(frames=30, seed=1, image=True)
    late.labels["image_event"][12] = True
    bank = LatentBank.build([episode(frames=30), late], table())
    typed = torch.nonzero(bank.text.abs().sum(dim=1) > 0).flatten().tolist()
    assert typed, "the test episodes type sentences"
    pool = bank.sentence_event_starts(6, 3).tolist()
    for start in range(len(bank.local)):
        fits = int(bank.local[start]) + 6 <= int(bank.lengths[bank.episode[start]])
        sees = any(start + 3 <= row < start + 6 for row in typed)
        assert (start in pool) == (fits and sees)
    cfg = ConvTrainConfig(image_share=0.25, sentence_share=0.5)
    starts = torch.full((8,), -1, dtype=torch.long)
    mixed = with_event_windows(starts, bank, cfg, window=6, context=3, gen=torch.Generator())
    assert len(mixed) == 8
    assert all(0 <= 42 - int(s) - 3 < 3 for s in mixed[:2])
    assert all(int(s) in pool for s in mixed[2:6])
    assert mixed[6:].tolist() == [-1, -1]


def test_sentence_onset_windows_open_on_the_sentence():
    from engine.train.conv_generator import with_event_windows

    bank = LatentBank.build([episode(frames=30), episode(frames=30, seed=1)], table())
    typed = set(torch.nonzero(bank.text.abs().sum(dim=1) > 0).flatten().tolist())
    onset = bank.sentence_event_starts(6, 3, 4).tolist()
    assert onset, "the test episodes type sentences"
    for start in range(len(bank.local)):
        fits = int(bank.local[start]) + 6 <= int(bank.lengths[bank.episode[start]])
        assert (start in onset) == (fits and start + 3 in typed)
    cfg = ConvTrainConfig(sentence_share=1.0, sentence_onset=True)
    starts = torch.full((8,), -1, dtype=torch.long)
    mixed = with_event_windows(starts, bank, cfg, window=6, context=3, gen=torch.Generator())
    assert all(int(s) + 3 in typed for s in mixed)


def test_guidance_moves_away_from_the_prediction_without_the_sentence_or_picture(tmp_path):
    import dataclasses as dc

    from engine.model.conv_world import sample_frame, without_image, without_text
    from engine.train.ship import set_guidance

    model = small().eval()
    with torch.no_grad():  # a model whose output depends on text and picture
        nudge_parameters(model)
    ctx, valid, audio = (
        torch.randn(1, 3, 8, 16, 16),
        torch.ones(1, 3, dtype=torch.bool),
        torch.zeros(1, 32),
    )
    cond = conditioning(1)
    cond.text = torch.randn(1, 384)
    cond.image = torch.randn(1, 128)
    with torch.no_grad():
        full, full_audio = model(ctx, valid, audio, cond)
        no_text, _ = model(ctx, valid, audio, without_text(cond))
        no_image, _ = model(ctx, valid, audio, without_image(cond))
        assert torch.allclose(sample_frame(model, ctx, valid, audio, cond)[0], full)  # off
        model.config = dc.replace(model.config, text_guidance=3.0, image_guidance=2.0)
        z, a = sample_frame(model, ctx, valid, audio, cond)
        want = full + 2.0 * (full - no_text) + 1.0 * (full - no_image)
        assert torch.allclose(z, want.clamp(-8, 8), atol=1e-5)
        assert torch.allclose(a, full_audio, atol=1e-6) and not torch.allclose(z, full)
        # a frame with neither a sentence nor a picture is one plain evaluation
        plain = conditioning(1)
        assert torch.equal(
            sample_frame(model, ctx, valid, audio, plain)[0], model(ctx, valid, audio, plain)[0]
        )
    folder = tmp_path / "w"
    folder.mkdir()
    torch.save({"config": dc.asdict(ConvWorldConfig()), "state": {}}, folder / "world.pt")
    set_guidance(2.5, 4.0, folder, text_frames=20)
    saved = torch.load(folder / "world.pt", weights_only=True)["config"]
    assert (saved["text_guidance"], saved["image_guidance"]) == (2.5, 4.0)
    assert saved["text_guidance_frames"] == 20
    with pytest.raises(ValueError, match="frames"):
        set_guidance(2.0, 1.0, folder, text_frames=-1)
    torch.save({"config": {"width": 160}, "state": {}}, folder / "world.pt")  # a transformer
    with pytest.raises(ValueError, match="convolutional"):
        set_guidance(2.0, 2.0, folder)


def test_a_code_models_guidance_moves_its_code_logits_and_so_its_draws():
    import dataclasses as dc

    from engine.model.conv_world import guided_prediction, sample_frame, without_text

    torch.manual_seed(0)
    cfg = ConvWorldConfig(width=16, width_low=16, cond_dim=16, context=3, codes=16)
    model = ConvWorldModel(dc.replace(cfg, code_temperature=0.0)).eval()
    with torch.no_grad():
        model.codebook.normal_()
        nudge_parameters(model)
    ctx, valid, audio = (
        torch.randn(1, 3, 8, 16, 16),
        torch.ones(1, 3, dtype=torch.bool),
        torch.zeros(1, 32),
    )
    cond = conditioning(1)
    cond.text = 3.0 * torch.randn(1, 384)
    with torch.no_grad():
        full = model.predict(ctx, valid, audio, cond).logits
        bare = model.predict(ctx, valid, audio, without_text(cond)).logits
        plain_codes = sample_frame(model, ctx, valid, audio, cond)[0]
        model.config = dc.replace(model.config, text_guidance=4.0)
        guided = guided_prediction(model, ctx, valid, audio, cond).logits
        assert torch.allclose(guided, full + 3.0 * (full - bare), atol=1e-4)
        codes = sample_frame(model, ctx, valid, audio, cond)[0]
    picked = guided.argmax(dim=1)
    assert torch.equal(codes, model.codebook[picked].permute(0, 3, 1, 2))  # the likeliest guided
    assert not torch.equal(codes, plain_codes)  # and the sentence now weighs more


def test_text_guidance_can_end_a_set_time_after_the_newest_sentence():
    import dataclasses as dc

    from engine.model.conv_world import guided_prediction, guided_rows

    cond = conditioning(3)
    cond.memory_valid[:, -1] = True
    cond.memory = torch.randn(3, MEMORY_SLOTS, 384)
    cond.memory_age[:, -1] = torch.tensor([5.0, 19.0, 60.0])
    assert guided_rows(cond, 0).tolist() == [True, True, True]  # while remembered
    assert guided_rows(cond, 20).tolist() == [True, True, False]
    cond.text[2] = 1.0  # a sentence typed now is always guided
    assert guided_rows(cond, 20).tolist() == [True, True, True]
    cond.text[2] = 0.0
    cond.drawn = torch.zeros(3, MEMORY_SLOTS, dtype=torch.bool)
    cond.drawn[0, -1] = True  # row 0's sentence is drawn into its history already
    assert guided_rows(cond, 20).tolist() == [False, True, False]
    cond.text[0], cond.memory_age[0, -1] = 1.0, 0.0  # ... and typed now, at its own frame
    assert guided_rows(cond, 20).tolist() == [False, True, False]
    cond.text[0], cond.memory_age[0, -1], cond.drawn = 0.0, 5.0, None
    model = small().eval()
    with torch.no_grad():
        nudge_parameters(model)
    ctx, valid = torch.randn(3, 3, 8, 16, 16), torch.ones(3, 3, dtype=torch.bool)
    with torch.no_grad():
        plain = model.predict(ctx, valid, torch.zeros(3, 32), cond).video
        model.config = dc.replace(model.config, text_guidance=3.0, text_guidance_frames=20)
        guided = guided_prediction(model, ctx, valid, torch.zeros(3, 32), cond).video
    assert not torch.allclose(guided[:2], plain[:2])
    assert torch.allclose(guided[2], plain[2], atol=1e-6)  # its sentence is 60 frames old


def test_the_decoder_tune_sees_the_conv_models_chain_where_its_frames_stand():
    """The GameNGen decoder tune on a conv generator: rounds 0 gives the true latents of the
    frames after each window's context; otherwise the model's own chain from that context,
    its first frame exactly one prediction from the truth and the rows the same."""
    from engine.model.conv_world import sample_frame
    from engine.train.finetune import decoder_latents

    bank = LatentBank.build([episode(frames=30), episode(frames=30, seed=1)], table())
    model = small(context=3).eval()
    starts = torch.tensor([0, 34])
    truth, rows = decoder_latents(model, bank, starts, window=4, rounds=0)
    assert rows.tolist() == [3, 4, 5, 6, 37, 38, 39, 40]
    assert torch.equal(truth, bank.video[rows].float())
    with torch.no_grad():
        chain, chain_rows = decoder_latents(model, bank, starts, window=4, rounds=2)
        w = conv_windows(bank, starts, 7)
        first, _ = sample_frame(
            model,
            w["video"][:, :3],
            torch.ones(2, 3, dtype=torch.bool),
            w["audio"][:, 2],
            frame_conditioning(w, 3, torch.zeros(2)),
        )
    assert torch.equal(chain_rows, rows) and chain.shape == truth.shape
    assert torch.allclose(chain.view(2, 4, *chain.shape[1:])[:, 0], first, atol=1e-6)
    assert not torch.allclose(chain, truth)


def test_k_means_codes_cover_the_cells_they_were_fitted_on():
    from engine.model.latent_codes import (
        code_latents,
        fit_codebook,
        nearest_codes,
        quantization_error,
    )

    gen = torch.Generator().manual_seed(0)
    centres = torch.randn(6, 8, generator=gen) * 4
    cells = centres[torch.randint(6, (3000,), generator=gen)] + 0.05 * torch.randn(3000, 8)
    codebook = fit_codebook(cells, 6)
    latents = cells[:512].reshape(2, 16, 16, 8).permute(0, 3, 1, 2)
    assert quantization_error(latents, codebook) < 0.01  # every cluster found
    idx = nearest_codes(latents, codebook)
    assert idx.shape == (2, 16, 16) and code_latents(idx, codebook).shape == latents.shape
    with pytest.raises(ValueError):
        fit_codebook(cells[:3], 6)


def coded(model: ConvWorldModel, codes: int = 16) -> ConvWorldModel:
    from engine.train.conv_generator import with_code_heads

    out = with_code_heads(model, codes)
    with torch.no_grad():
        out.codebook.copy_(torch.randn(codes, 8, generator=torch.Generator().manual_seed(1)))
    return out


def test_a_regressor_with_code_heads_starts_at_the_code_nearest_its_prediction():
    from engine.model.latent_codes import nearest_codes

    model = small()
    with torch.no_grad():
        model.out.bias.fill_(0.3)
    model_c = coded(model)
    ctx = torch.randn(2, 3, 8, 16, 16)
    valid = torch.ones(2, 3, dtype=torch.bool)
    z, _ = model(ctx, valid, torch.zeros(2, 32), conditioning())
    p = model_c.predict(ctx, valid, torch.zeros(2, 32), conditioning())
    assert torch.allclose(p.video, z)  # the regressor's weights came along
    assert p.logits is not None and p.logits.shape == (2, 16, 16, 16)
    assert torch.equal(p.logits.argmax(dim=1), nearest_codes(z, model_c.codebook))
    model_c.config.code_temperature = 0.0
    drawn = model_c.draw_codes(p.logits)
    assert torch.equal(nearest_codes(drawn, model_c.codebook), p.logits.argmax(dim=1))
    model_c.config.code_temperature = 1.0
    a = model_c.draw_codes(p.logits, torch.Generator().manual_seed(3))
    b = model_c.draw_codes(p.logits, torch.Generator().manual_seed(3))
    assert torch.equal(a, b)  # a session's seed decides its draws


def test_code_training_scores_cells_by_cross_entropy_and_goes_on_from_drawn_codes():
    bank = LatentBank.build([episode(frames=30), episode(frames=30, seed=1)], table())
    model = coded(small()).train()
    cfg = ConvTrainConfig(unroll=3, noise_share=0.0, drop_share=0.0)
    starts = torch.tensor([0, 35])
    w = conv_windows(bank, starts, window=6)
    w["codes"] = torch.randint(16, (2, 6, 16, 16))
    losses = unrolled_loss(model, w, cfg, torch.Generator().manual_seed(0))
    assert losses.codes is not None and losses.codes > 0
    losses.loss.backward()
    assert model.code_out.weight.grad is not None and model.code_out.weight.grad.abs().sum() > 0
    assert model.code_scale.grad is not None


def test_the_onset_weight_leans_the_code_loss_towards_frames_a_sentence_governs():
    gen = torch.Generator().manual_seed(0)
    logits = torch.randn(4, 16, 8, 8, generator=gen)
    codes = torch.randint(16, (4, 8, 8), generator=gen)
    governed = torch.tensor([True, False, False, False])
    rows = torch.stack(
        [torch.nn.functional.cross_entropy(logits[i : i + 1], codes[i : i + 1]) for i in range(4)]
    )
    plain = weighted_code_loss(logits, codes, governed, ConvTrainConfig())
    assert torch.allclose(plain, rows.mean())
    leaned = weighted_code_loss(logits, codes, governed, ConvTrainConfig(onset_weight=5.0))
    assert torch.allclose(leaned, (5 * rows[0] + rows[1:].sum()) / 8)
    nobody = weighted_code_loss(logits, codes, governed & False, ConvTrainConfig(onset_weight=5.0))
    assert torch.allclose(nobody, rows.mean())


def test_code_training_fits_a_codebook_quantizes_its_data_and_resumes(tmp_path, training):
    conv, base = training
    codes = ConvWorldConfig(width=16, width_low=16, context=3, codes=8)
    cfg = tiny_config(base, tmp_path / "run", steps=3, model=codes)
    dest = conv.train_conv(cfg)
    model = load_world_model(dest / "world.pt")
    assert isinstance(model, ConvWorldModel) and model.config.codes == 8
    fitted = model.codebook.float().clone()
    assert fitted.abs().sum() > 0 and len(torch.unique(fitted, dim=0)) == 8
    conv.train_conv(dataclasses.replace(cfg, steps=5))  # resumes: the codebook is kept
    again = load_world_model(dest / "world.pt")
    assert torch.equal(again.codebook.float(), fitted)
    assert "codes" in (tmp_path / "run" / "loss.jsonl").read_text()
    with pytest.raises(ValueError):
        conv.train_conv(dataclasses.replace(cfg, out=str(tmp_path / "adv"), adv_weight=0.1))


def test_a_code_model_plays_from_its_seed_with_a_history_of_codes():
    from engine.model.latent_codes import code_latents, nearest_codes

    model = coded(small(context=4)).eval()
    with torch.no_grad():
        model.code_out.bias.normal_(0, 1.0)  # several codes in play at every cell
    model.config.code_temperature = 1.0
    first = torch.randn(8, 16, 16)

    def play(seed: int) -> list[torch.Tensor]:
        roll = ConvRollout(model, theme=0, seed=seed)
        with torch.inference_mode():
            roll.observe(first, torch.zeros(32), np.zeros(INPUT_FEATURES), 0)
            return [roll.generate(np.zeros(INPUT_FEATURES), t)[0] for t in range(1, 4)]

    a, b, c = play(1), play(1), play(2)
    assert all(torch.equal(x, y) for x, y in zip(a, b, strict=True))
    assert not all(torch.equal(x, y) for x, y in zip(a, c, strict=True))
    roll = ConvRollout(model, theme=0)
    roll.observe(first, torch.zeros(32), np.zeros(INPUT_FEATURES), 0)
    seen = roll.history[-1][None]  # an observed frame joins as its nearest codes
    assert torch.equal(seen, code_latents(nearest_codes(seen, model.codebook), model.codebook))


def residual(model: ConvWorldModel, codes: int = 16) -> ConvWorldModel:
    from engine.train.conv_generator import with_residual_head

    out = with_residual_head(model, codes)
    with torch.no_grad():
        gen = torch.Generator().manual_seed(2)
        out.residual_codebook.copy_(0.3 * torch.randn(codes, 8, generator=gen))
    return out


def test_a_residual_stage_starts_at_the_residual_nearest_what_the_first_code_leaves():
    from engine.model.conv_world import Prediction
    from engine.model.latent_codes import code_indices, code_latents, nearest_codes

    model = residual(coded(small()))
    book = model.residual_codebook
    z = torch.randn(2, 8, 16, 16)
    shown = model.snap(z)  # the history's snap: both stages, and closer than one
    firsts, rests = code_indices(z, model.codebook, book)
    assert rests is not None and torch.equal(nearest_codes(shown, model.codebook), firsts)
    one = code_latents(firsts, model.codebook)
    assert (shown - z).pow(2).mean() < (one - z).pow(2).mean()
    features = torch.randn(2, 16, 16, 16)
    p = Prediction(shown, torch.zeros(2, 32), features=features, newest=shown)
    first = code_latents(nearest_codes(shown, model.codebook), model.codebook)
    assert torch.equal(model.draw_residual(p, first), model.snap(shown))  # a kept patch
    other = torch.roll(first, 1, dims=-1)  # first codes that mostly differ from the shown
    moved = (other != first).any(dim=1)
    drawn = model.draw_residual(p, other)
    rest = other + code_latents(nearest_codes(shown - other, book), book)
    assert moved.float().mean() > 0.5
    assert torch.equal(drawn.permute(0, 2, 3, 1)[moved], rest.permute(0, 2, 3, 1)[moved])
    model.config.residual_mean = True  # the expected residual: between the codes, not one
    mean = model.draw_residual(p, other) - other
    assert mean.abs().max() < book.abs().max() and not torch.equal(mean + other, drawn)
    ctx = torch.randn(2, 3, 8, 16, 16)
    valid = torch.ones(2, 3, dtype=torch.bool)
    played = model.predict(ctx, valid, torch.zeros(2, 32), conditioning())
    assert played.features is not None and played.features.shape == (2, 16, 16, 16)
    from engine.train.conv_generator import with_residual_head

    with pytest.raises(ValueError, match="code model"):
        with_residual_head(small(), 16)


def test_residual_training_fits_its_codebook_and_moves_the_second_head_alone(tmp_path, training):
    from engine.model.latent_codes import quantization_error

    conv, base = training
    codes = ConvWorldConfig(width=16, width_low=16, context=3, codes=8)
    first_run = conv.train_conv(tiny_config(base, tmp_path / "one", 2, codes))
    first = load_world_model(first_run / "world.pt")
    cfg = tiny_config(
        base,
        tmp_path / "two",
        steps=3,
        model=dataclasses.replace(codes, residual_codes=8),
        init=str(tmp_path / "one" / "weights" / "world.pt"),
        residual_only=True,
        lr=1e-2,
    )
    tuned = load_world_model(conv.train_conv(cfg) / "world.pt")
    assert isinstance(tuned, ConvWorldModel) and tuned.config.residual_codes == 8
    book = tuned.residual_codebook.float()
    assert book.abs().sum() > 0 and torch.equal(tuned.codebook, first.codebook)
    old, new = first.state_dict(), tuned.state_dict()
    moved = {k for k in new if k not in old or not torch.equal(new[k], old[k])}
    assert moved and all(k.startswith("residual") for k in moved), moved
    assert "residual" in (tmp_path / "two" / "loss.jsonl").read_text()
    cells = torch.randn(4, 8, 16, 16)
    fitted = first.codebook.float()
    assert quantization_error(cells, fitted, book) < quantization_error(cells, fitted)
    roll = ConvRollout(tuned.float().eval(), theme=0, seed=1)
    with torch.inference_mode():
        roll.observe(torch.randn(8, 16, 16), torch.zeros(32), np.zeros(INPUT_FEATURES), 0)
        z, _ = roll.generate(np.zeros(INPUT_FEATURES), 1)
    pairs = (fitted[:, None] + book[None]).reshape(-1, 8)  # every code plus every residual
    drawn = z.permute(1, 2, 0).reshape(-1, 8)
    gap = (drawn[:, None] - pairs[None]).abs().amax(dim=-1).min(dim=1).values
    assert gap.max() < 1e-5  # every cell of a drawn frame is a code plus a residual code
    with pytest.raises(ValueError, match="residual head alone"):
        conv.train_conv(dataclasses.replace(cfg, out=str(tmp_path / "x"), bank_share=0.5))
    with pytest.raises(ValueError, match="needs a residual"):
        conv.train_conv(tiny_config(base, tmp_path / "y", 1, codes, residual_only=True))


def test_the_eval_reads_a_code_models_tokenizer_ceiling_through_its_codebook():
    from engine.eval.episodes import agent_episode
    from engine.eval.run import tokenizers
    from engine.model.audio_ae import AudioAE, AudioAEConfig
    from engine.model.checkpoint import load_checkpoint
    from engine.model.video_ae import VideoAE, VideoAEConfig, frames_to_tensor
    from engine.runtime.session import DEFAULT_WEIGHTS, World

    torch.manual_seed(0)  # the shipped video tokenizer: a toy decoder hardly reads its latent
    ae = load_checkpoint(DEFAULT_WEIGHTS / "video_ae.pt", VideoAE, VideoAEConfig).eval()
    sound = AudioAE(AudioAEConfig(width=8))
    episodes = [agent_episode(3, 8)]
    model = coded(small(), codes=4 * 256)
    with torch.inference_mode():
        truth = frames_to_tensor(episodes[0].frames[::2])  # the frames the section reads
        cells = ae.encode(truth).permute(0, 2, 3, 1).reshape(-1, 8)
        model.codebook.copy_(cells)  # every true cell is a code: nothing is lost
        exact = tokenizers(World(ae, sound, model), episodes)
        model.codebook.copy_(cells.mean(dim=0).expand_as(cells))  # one code for every cell
        flat = tokenizers(World(ae, sound, model), episodes)
        plain = tokenizers(World(ae, sound, small()), episodes)
    assert exact["code_recon_psnr"] == pytest.approx(exact["ae_recon_psnr"], abs=0.05)
    assert flat["code_recon_psnr"] < flat["ae_recon_psnr"] - 1.0
    assert "code_recon_psnr" not in plain and plain["ae_recon_psnr"] == exact["ae_recon_psnr"]


def test_code_draws_are_set_on_code_models_only(tmp_path):
    from engine.train.ship import set_code_draws

    save_checkpoint(tmp_path / "world.pt", coded(small()), half=True)
    set_code_draws(tmp_path, temperature=0.3)
    set_code_draws(tmp_path, blur=1.5, memory=0.9)
    cfg = load_world_model(tmp_path / "world.pt").config
    assert (cfg.code_temperature, cfg.code_noise_blur, cfg.code_noise_memory) == (0.3, 1.5, 0.9)
    save_checkpoint(tmp_path / "world.pt", small(), half=True)
    with pytest.raises(ValueError, match="no code model"):
        set_code_draws(tmp_path, temperature=0.3)
    for bad in ({"temperature": -1.0}, {"blur": -0.5}, {"memory": 1.0}, {}):
        with pytest.raises(ValueError):
            set_code_draws(tmp_path, **bad)
    save_checkpoint(tmp_path / "world.pt", coded(small()), half=True)
    with pytest.raises(ValueError, match="no residual code model"):
        set_code_draws(tmp_path, residual_mean=True)
    save_checkpoint(tmp_path / "world.pt", residual(coded(small())), half=True)
    set_code_draws(tmp_path, residual_temperature=0.2, residual_mean=True)
    cfg = load_world_model(tmp_path / "world.pt").config
    assert (cfg.residual_temperature, cfg.residual_mean) == (0.2, True)
    with pytest.raises(ValueError):
        set_code_draws(tmp_path, residual_temperature=-0.1)


def test_correlated_code_draws_keep_gumbel_marginals_and_share_luck():
    from engine.model.latent_codes import CodeDraws

    shape = torch.Size([1, 64, 16, 16])
    plain = CodeDraws(torch.Generator().manual_seed(0))
    assert not plain.correlated
    shared = CodeDraws(torch.Generator().manual_seed(0), blur=2.0, memory=0.9)
    frames = [shared.gumbel(shape) for _ in range(40)]
    noise = torch.stack(frames)
    many = CodeDraws(torch.Generator().manual_seed(1), blur=2.0, memory=0.9)
    pooled = torch.stack([many.gumbel(torch.Size([32, 64, 16, 16])) for _ in range(4)])
    # every cell's noise is standard Gumbel: mean Euler's constant, variance pi^2 / 6
    assert abs(pooled.mean().item() - 0.5772) < 0.03
    assert abs(pooled.var().item() - math.pi**2 / 6) < 0.08

    def corr(a: torch.Tensor, b: torch.Tensor) -> float:
        return torch.corrcoef(torch.stack([a.flatten(), b.flatten()]))[0, 1].item()

    assert corr(noise[:, ..., :-1], noise[:, ..., 1:]) > 0.5  # neighbouring cells
    assert corr(noise[:-1], noise[1:]) > 0.7  # successive frames
    fresh = torch.stack([plain.gumbel(shape) for _ in range(2)])
    assert abs(corr(fresh[..., :-1], fresh[..., 1:])) < 0.05
    assert abs(corr(fresh[0], fresh[1])) < 0.05
    again = CodeDraws(torch.Generator().manual_seed(0), blur=2.0, memory=0.9)
    assert torch.equal(again.gumbel(shape), frames[0])  # a session's seed decides its draws
    with pytest.raises(ValueError):
        CodeDraws(torch.Generator(), memory=1.0)


def test_a_session_with_shared_code_noise_draws_calmer_frames():
    """Equally unsure cells: independent draws paint a grain that changes every frame; shared
    noise paints patches that stay."""
    model = coded(small())
    model.config.code_temperature = 1.0
    with torch.no_grad():
        model.code_scale.fill_(0.0)  # every code equally likely in every cell
    first = torch.randn(1, 8, 16, 16)

    def changes(**noise: float) -> tuple[float, float]:
        model.config.code_noise_blur = noise.get("blur", 0.0)
        model.config.code_noise_memory = noise.get("memory", 0.0)
        roll = ConvRollout(model, theme=0, seed=5)
        roll.observe(first, torch.zeros(32), np.zeros(INPUT_FEATURES), 0)
        frames = [roll.generate(np.zeros(INPUT_FEATURES), t)[0] for t in range(1, 6)]
        across = sum((f[:, :, 1:] != f[:, :, :-1]).any(0).float().mean() for f in frames)
        pairs = zip(frames, frames[1:], strict=False)
        between = sum((a != b).any(0).float().mean() for a, b in pairs)
        return across.item() / len(frames), between.item() / (len(frames) - 1)

    grain_across, grain_between = changes()
    calm_across, calm_between = changes(blur=3.0, memory=0.95)
    assert grain_across > 0.9 and grain_between > 0.9
    assert calm_across < 0.5 * grain_across
    assert calm_between < 0.5 * grain_between


def test_a_grown_sound_head_starts_as_the_old_one_and_draws_around_its_mean():
    from engine.train.conv_generator import with_sound_head

    model = small().eval()
    with torch.no_grad():
        for param in model.audio_head.parameters():
            param.normal_(0, 0.1)
    ctx, valid = torch.randn(2, 3, 8, 16, 16), torch.ones(2, 3, dtype=torch.bool)
    heard = torch.randn(2, 3, 32)
    before = model.predict(ctx, valid, heard[:, -1], conditioning())
    grown = with_sound_head(model, history=3, sample=True).eval()
    assert grown.config.audio_history == 3 and grown.config.audio_sample
    after = grown.predict(ctx, valid, heard, conditioning())
    assert torch.allclose(after.audio, before.audio, atol=1e-6)  # older sounds weigh 0 at first
    assert torch.equal(after.video, before.video)
    assert after.audio_spread is not None and torch.allclose(after.audio_spread, torch.ones(2, 32))
    with torch.no_grad():
        grown.audio_head[0].weight.normal_(0, 0.1)  # now the older sounds matter
    older = heard.clone()
    older[:, 0] += 1.0
    assert not torch.allclose(
        grown.predict(ctx, valid, older, conditioning()).audio,
        grown.predict(ctx, valid, heard, conditioning()).audio,
    )
    one = grown.predict(ctx, valid, heard[:, -1], conditioning())  # fewer known: zero-padded
    assert one.audio.shape == (2, 32)
    drawn = [grown.draw_audio(after, torch.Generator().manual_seed(s)) for s in (1, 1, 2)]
    assert torch.equal(drawn[0], drawn[1]) and not torch.equal(drawn[0], drawn[2])
    assert 0.5 < (drawn[0] - after.audio).std().item() < 1.5  # spread 1 around the mean
    assert torch.equal(model.draw_audio(before), before.audio)  # a regressed sound is its mean
    assert with_sound_head(grown, history=1, sample=False) is grown  # never shrunk
    roll = ConvRollout(grown, theme=0, seed=3)
    roll.observe(ctx[0, -1], heard[0, -1], np.zeros(INPUT_FEATURES), 0)
    for t in range(1, 4):
        roll.generate(np.zeros(INPUT_FEATURES), t)
    assert roll.audio.shape == (1, 3, 32)  # a session hears its last sounds, newest last


def test_audio_only_training_moves_the_sound_head_alone(tmp_path, training):
    conv, base = training
    cfg = tiny_config(base, tmp_path / "first", steps=2)
    first = load_world_model(conv.train_conv(cfg) / "world.pt")
    model = ConvWorldConfig(width=16, width_low=16, context=3, audio_history=3, audio_sample=True)
    tuned_cfg = tiny_config(
        base,
        tmp_path / "sound",
        steps=3,
        model=model,
        init=str(tmp_path / "first" / "weights" / "world.pt"),
        audio_only=True,
        lr=1e-2,
    )
    tuned = load_world_model(conv.train_conv(tuned_cfg) / "world.pt")
    assert tuned.config.audio_history == 3 and tuned.config.audio_sample
    old, new = first.state_dict(), tuned.state_dict()
    moved = {k for k in new if k not in old or not torch.equal(new[k], old[k])}
    assert moved and all(k.startswith("audio_head") for k in moved), moved
    with pytest.raises(ValueError, match="sound head alone"):
        conv.train_conv(dataclasses.replace(tuned_cfg, out=str(tmp_path / "x"), bank_share=0.5))


def held(*keys: str, yaw: float = 0.0, pitch: float = 0.0) -> torch.Tensor:
    """(1, INPUT_FEATURES) features of one frame's held keys and mouse deltas."""
    from engine.model.inputs import input_features
    from engine.spec import KEY_BITS

    mask = sum(KEY_BITS[k] for k in keys)
    return torch.as_tensor(input_features(mask, yaw, pitch, 0.0, False, False))[None]


def test_the_camera_shift_reads_the_turn_keys_and_the_mouse():
    from engine.model.conv_world import camera_shift
    from engine.spec import PITCH_RATE, TURN_CELLS_PER_RADIAN, TURN_RATE

    right, left, up = camera_shift(torch.cat([held("RIGHT"), held("LEFT"), held("UP", "W")]))
    assert right[0] == pytest.approx(-TURN_RATE * TURN_CELLS_PER_RADIAN)  # the picture goes left
    assert right[1] == 0 and left[0] == pytest.approx(-right[0].item())
    assert up[0] == 0 and up[1] == pytest.approx(PITCH_RATE * 8.0)  # looking up moves it down
    mouse = camera_shift(held("RIGHT", yaw=0.04, pitch=-0.02))[0]
    assert mouse[0] == pytest.approx(-(TURN_RATE + 0.04) * TURN_CELLS_PER_RADIAN, rel=1e-5)
    assert mouse[1] == pytest.approx(-0.02 * 8.0, rel=1e-5)
    assert not camera_shift(held("W", "A")).any()  # walking is not a camera move


def test_the_camera_shift_predicts_how_the_simulators_picture_moves():
    """Sign and size against the real thing: the tokenizer's latent of a turning or tilting
    simulator frame, moved by the camera shift, is nearer the next frame's than unmoved."""
    from engine.model.checkpoint import load_checkpoint
    from engine.model.conv_world import camera_shift, warp_by_camera
    from engine.model.video_ae import VideoAE, VideoAEConfig, frames_to_tensor
    from engine.runtime.session import DEFAULT_WEIGHTS
    from engine.sim import FrameInputs, SimWorld, WorldSpec

    ae = load_checkpoint(DEFAULT_WEIGHTS / "video_ae.pt", VideoAE, VideoAEConfig).eval()
    for keys, better in ((("RIGHT",), 0.8), (("LEFT",), 0.8), (("UP",), 0.97)):
        sim = SimWorld(WorldSpec(seed=3, theme="frost_valley"))
        sim.reset()
        frames = np.stack([sim.step(FrameInputs.hold(*keys)).rgb for _ in range(7)])
        with torch.inference_mode():
            z = ae.encode(frames_to_tensor(frames))
        before, after = z[:-1, None], z[1:]
        moved = warp_by_camera(before, camera_shift(held(*keys)).expand(len(after), -1))[:, 0]
        inner = (..., slice(2, -2), slice(2, -2))  # away from the cells a move uncovers
        ratio = (moved - after)[inner].pow(2).mean() / (before[:, 0] - after)[inner].pow(2).mean()
        assert ratio < better, (keys, ratio)


def test_a_camera_warp_model_starts_as_the_newest_frame_moved_by_the_turn():
    from engine.model.conv_world import camera_shift, warp

    model = ConvWorldModel(dataclasses.replace(small().config, camera_warp=True))
    ctx = torch.randn(2, 3, 8, 16, 16)
    valid = torch.ones(2, 3, dtype=torch.bool)
    cond = conditioning()
    cond.inputs = torch.cat([held("RIGHT"), held()])
    z, _ = model(ctx, valid, torch.zeros(2, 32), cond)
    shift = camera_shift(cond.inputs)[:1, :, None, None].expand(1, 2, 16, 16)
    assert torch.allclose(z[:1], warp(ctx[:1, -1], shift), atol=1e-5)
    assert not torch.allclose(z[:1], ctx[:1, -1], atol=1e-3)
    assert torch.allclose(z[1:], ctx[1:, -1], atol=1e-5)  # no turn, no move


def test_code_draw_noise_moves_with_the_picture_and_stays_gumbel():
    from engine.model.latent_codes import CodeDraws

    shape = torch.Size([1, 4, 16, 16])
    draws = CodeDraws(torch.Generator().manual_seed(0), memory=0.999)
    draws.gumbel(shape)
    before = draws.field.clone()
    draws.move(0.3, 0.0)  # less than half a cell: nothing moves yet
    assert torch.equal(draws.field, before)
    draws.move(0.3, -1.0)  # 0.6 in all: one cell right, and one up
    after = draws.field
    assert torch.equal(after[..., :-1, 1:], before[..., 1:, :-1])
    assert not torch.allclose(after[..., :, 0], before[..., :, -1])  # the uncovered column is new
    assert draws.offset == pytest.approx([-0.4, 0.0])
    many = CodeDraws(torch.Generator().manual_seed(1), memory=0.9)
    pooled = []
    for _ in range(30):
        many.move(2.6, 0.7)
        pooled.append(many.gumbel(torch.Size([8, 16, 16, 16])))
    noise = torch.stack(pooled)
    assert abs(noise.mean().item() - 0.5772) < 0.03
    assert abs(noise.var().item() - math.pi**2 / 6) < 0.08


def test_an_init_model_gets_the_camera_warp_it_is_asked_for(tmp_path):
    from engine.train.conv_generator import initial_model

    path = tmp_path / "world.pt"
    model = small()
    save_checkpoint(path, model, {"config": dataclasses.asdict(model.config)})
    cfg = ConvTrainConfig(init=str(path), model=dataclasses.replace(model.config, camera_warp=True))
    warm = initial_model(cfg)
    assert warm.config.camera_warp and same_weights(warm, model)
    # a weights folder whose world.pt reads moved history is continued as it is, asked or not
    save_checkpoint(path, warm, {"config": dataclasses.asdict(warm.config)})
    again = initial_model(ConvTrainConfig(weights=str(tmp_path), model=small().config))
    assert again.config.camera_warp and same_weights(again, model)


def test_the_camera_warp_is_set_on_conv_models_only(tmp_path):
    from engine.model.world import WorldModel, WorldModelConfig
    from engine.train.ship import set_camera_warp

    save_checkpoint(tmp_path / "world.pt", small(), half=True)
    set_camera_warp(True, tmp_path)
    assert load_world_model(tmp_path / "world.pt").config.camera_warp
    set_camera_warp(False, tmp_path)
    assert not load_world_model(tmp_path / "world.pt").config.camera_warp
    save_checkpoint(tmp_path / "world.pt", WorldModel(WorldModelConfig(width=32, depth=1, heads=2)))
    with pytest.raises(ValueError, match="no convolutional world model"):
        set_camera_warp(True, tmp_path)


def test_a_sentence_head_starts_silent_and_speaks_only_while_a_sentence_is_recent():
    from engine.train.conv_generator import with_sentence_head

    model = coded(small())
    ctx = torch.randn(3, 3, 8, 16, 16)
    valid = torch.ones(3, 3, dtype=torch.bool)
    cond = conditioning(3)
    cond.memory[:, -1] = torch.randn(3, 384, generator=torch.Generator().manual_seed(4))
    cond.memory_valid[:2, -1] = True  # rows 0 and 1 remember a sentence; row 2 none
    cond.memory_age[:, -1] = torch.tensor([5.0, 200.0, 0.0])  # row 1's is old
    with torch.no_grad():
        before = model.predict(ctx, valid, torch.zeros(3, 32), cond).logits
        grown = with_sentence_head(model, 8)
        assert torch.equal(grown.predict(ctx, valid, torch.zeros(3, 32), cond).logits, before)
        nudge_parameters(grown.sentence_head)
        after = grown.predict(ctx, valid, torch.zeros(3, 32), cond).logits
    assert not torch.allclose(after[0], before[0])  # a recent sentence: the head adds
    assert torch.equal(after[1:], before[1:])  # an old one, or none: the trunk's logits
    with pytest.raises(ValueError, match="code model"):
        with_sentence_head(small(), 8)


def test_guidance_scales_the_trunks_reading_of_a_sentence_and_adds_the_heads_once():
    from engine.model.conv_world import guided_prediction, without_text
    from engine.train.conv_generator import with_sentence_head

    grown = with_sentence_head(coded(small()), 8)
    with torch.no_grad():
        nudge_parameters(grown.sentence_head)
    grown.config = dataclasses.replace(grown.config, text_guidance=4.0)
    ctx = torch.randn(2, 3, 8, 16, 16)
    valid = torch.ones(2, 3, dtype=torch.bool)
    cond = conditioning(2)
    cond.memory[:, -1] = torch.randn(2, 384, generator=torch.Generator().manual_seed(5))
    cond.memory_valid[:, -1] = True
    cond.memory_age[:, -1] = 3.0
    audio = torch.zeros(2, 32)
    with torch.no_grad():
        full = grown.predict(ctx, valid, audio, cond)
        bare = grown.predict(ctx, valid, audio, without_text(cond))
        guided = guided_prediction(grown, ctx, valid, audio, cond)
    assert bare.told is not None and not bare.told.abs().any()  # silent without a sentence
    assert full.told is not None and full.told.abs().amax() > 0
    trunk = full.logits - full.told
    expected = trunk + 3.0 * (trunk - bare.logits) + full.told
    assert torch.allclose(guided.logits, expected, atol=1e-5)
    assert torch.equal(guided.told, full.told)


def test_sentence_head_training_moves_the_sentence_head_alone(tmp_path, training):
    conv, base = training
    codes = ConvWorldConfig(width=16, width_low=16, context=3, codes=8)
    conv.train_conv(tiny_config(base, tmp_path / "one", 2, codes))
    first = load_world_model(tmp_path / "one" / "weights" / "world.pt")
    cfg = tiny_config(
        base,
        tmp_path / "two",
        steps=3,
        model=dataclasses.replace(codes, sentence_head=8),
        init=str(tmp_path / "one" / "weights" / "world.pt"),
        sentence_only=True,
        sentence_share=1.0,
        lr=1e-2,
    )
    tuned = load_world_model(conv.train_conv(cfg) / "world.pt")
    assert isinstance(tuned, ConvWorldModel) and tuned.config.sentence_head == 8
    old, new = first.state_dict(), tuned.state_dict()
    moved = {k for k in new if k not in old or not torch.equal(new[k], old[k])}
    assert moved and all(k.startswith("sentence_head") for k in moved), moved
    with pytest.raises(ValueError, match="sentence head alone"):
        conv.train_conv(dataclasses.replace(cfg, out=str(tmp_path / "x"), bank_share=0.5))
    with pytest.raises(ValueError, match="needs a code model with --sentence-head"):
        conv.train_conv(tiny_config(base, tmp_path / "y", 1, codes, sentence_only=True))


def test_the_prompt_test_reads_the_asked_for_state_through_the_tokenizer_and_codebook():
    """The ceilings judge the simulator's judged frames after the autoencoder and after the
    codebook: a codebook that keeps every cell keeps what the judge sees, one code loses it."""
    from engine.eval.classifiers import STATE_HEADS
    from engine.eval.episodes import agent_episode
    from engine.eval.protocols import prompt_target
    from engine.eval.run import _prompt_ceilings
    from engine.model.audio_ae import AudioAE, AudioAEConfig
    from engine.model.checkpoint import load_checkpoint
    from engine.model.video_ae import VideoAE, VideoAEConfig, frames_to_tensor
    from engine.runtime.session import DEFAULT_WEIGHTS, World

    class DetailJudge:  # reads "rain" wherever the picture keeps its detail
        def read_state(self, frames: np.ndarray) -> dict[str, np.ndarray]:
            seen = frames.reshape(len(frames), -1).std(axis=1) > 20.0
            rain = prompt_target("rain")[1]
            return {h: np.where(seen, rain, 0 if rain else 1) for h in STATE_HEADS}

    torch.manual_seed(0)
    ae = load_checkpoint(DEFAULT_WEIGHTS / "video_ae.pt", VideoAE, VideoAEConfig).eval()
    truth = list(agent_episode(3, 8).frames[::4])
    assert all(f.std() > 25.0 for f in truth)  # the simulator's frames all read as rain
    targets = [prompt_target("rain")] * len(truth)
    model = coded(small(), codes=2 * 256)
    world = World(ae, AudioAE(AudioAEConfig(width=8)), model)

    def ceilings() -> dict:
        return _prompt_ceilings(world, DetailJudge(), truth, targets, lambda v: {"rain": v.mean()})  # type: ignore[arg-type]

    with torch.inference_mode():
        cells = ae.encode(frames_to_tensor(np.stack(truth))).permute(0, 2, 3, 1).reshape(-1, 8)
        model.codebook.copy_(cells)
        exact = ceilings()
        model.codebook.copy_(cells.mean(dim=0).expand_as(cells))
        flat = ceilings()
    assert exact["prompt_following_judge_on_ae"] == 1.0
    assert exact["prompt_following_judge_on_codes"] == 1.0
    assert flat["prompt_following_judge_on_ae"] == 1.0
    assert flat["prompt_following_judge_on_codes"] == 0.0
    assert flat["prompt_following_judge_on_codes_by_event"] == {"rain": 0.0}
    plain_world = World(ae, world.audio_ae, small())
    plain = _prompt_ceilings(plain_world, DetailJudge(), truth, targets, lambda v: {})  # type: ignore[arg-type]
    assert "prompt_following_judge_on_codes" not in plain
