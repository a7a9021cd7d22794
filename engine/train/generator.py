"""Train the causal world transformer with flow matching on tokenizer latents.

Teacher forcing with every frame a target: a window of T frames runs as T clean blocks plus
T noisy blocks in one pass (see engine/model/world.py). Half the windows get slightly noised
context frames (their level tells the model so), which makes rollouts on the model's own,
imperfect frames more robust (GameNGen / DIAMOND noise augmentation).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import torch
from tqdm import tqdm

from engine.model.checkpoint import save_checkpoint
from engine.model.text import TEXT_DIM
from engine.model.video_ae import tensor_to_frames
from engine.model.world import WorldModel, WorldModelConfig

from .common import Budget, LossLog, pick_device
from .generator_config import GeneratorTrainConfig
from .latents import LatentEpisode, encode_dataset, load_tokenizers
from .plots import image_grid, line_plot

MAX_TEXT_MEMORY = 4


def make_memory(model: WorldModel, batch: list[tuple[LatentEpisode, int]], window: int,
                text_table: dict[str, np.ndarray]
                ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Memory tokens for windows (episode, start): theme, reference image, last 4 prompts."""
    cfg = model.config
    b = len(batch)
    theme = torch.tensor([ep.theme for ep, _ in batch])
    text = torch.zeros(b, MAX_TEXT_MEMORY, TEXT_DIM)
    image = torch.zeros(b, cfg.image_dim)
    arrival = torch.zeros(b, 2 + MAX_TEXT_MEMORY, dtype=torch.long)
    valid = torch.zeros(b, 2 + MAX_TEXT_MEMORY, dtype=torch.bool)
    valid[:, 0] = True
    for i, (ep, start) in enumerate(batch):
        if ep.image is not None:
            image[i] = ep.image.float()
            valid[i, 1] = True
        prompts = [(r, t) for r, t in zip(ep.prompt_rows, ep.prompt_texts, strict=True)
                   if r < start + window][-MAX_TEXT_MEMORY:]
        for j, (row, t) in enumerate(prompts):
            text[i, j] = torch.from_numpy(text_table[t])
            arrival[i, 2 + j] = row
            valid[i, 2 + j] = True
    return model.embed_memory(theme, text, image), arrival, valid


def sample_windows(episodes: list[LatentEpisode], n: int, window: int,
                   rng: np.random.Generator) -> list[tuple[LatentEpisode, int]]:
    out = []
    for _ in range(n):
        ep = episodes[int(rng.integers(len(episodes)))]
        start = 0 if rng.random() < 0.05 else int(rng.integers(len(ep.video) - window + 1))
        out.append((ep, start))
    return out


def window_tensors(batch: list[tuple[LatentEpisode, int]], window: int,
                   text_table: dict[str, np.ndarray]) -> dict[str, torch.Tensor]:
    video, prev, audio, inputs, text, frame = [], [], [], [], [], []
    for ep, s in batch:
        z = ep.video[s:s + window].float()
        p = ep.video[s - 1:s + window - 1].float() if s > 0 else torch.cat(
            [torch.zeros_like(z[:1]), z[:-1]])
        video.append(z)
        prev.append(p)
        audio.append(ep.audio[s:s + window])
        inputs.append(ep.inputs[s:s + window])
        t = torch.zeros(window, TEXT_DIM)
        for r, txt in zip(ep.prompt_rows, ep.prompt_texts, strict=True):
            if s <= r < s + window:
                t[r - s] = torch.from_numpy(text_table[txt])
        text.append(t)
        frame.append(torch.arange(s, s + window))
    out = {k: torch.stack(v) for k, v in (("video", video), ("prev", prev), ("audio", audio),
                                          ("inputs", inputs), ("text", text), ("frame", frame))}
    out["first"] = torch.tensor([s == 0 for _, s in batch])
    return out


def flow_loss(model: WorldModel, batch: list[tuple[LatentEpisode, int]], window: int,
              text_table: dict[str, np.ndarray], audio_weight: float, device: torch.device
              ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    w = {k: v.to(device) for k, v in window_tensors(batch, window, text_table).items()}
    b, t = w["frame"].shape
    # Context noise augmentation on half the windows.
    ctx_level = torch.ones(b, t, device=device)
    aug = torch.rand(b, device=device) < 0.5
    ctx_level[aug] = 0.9 + 0.1 * torch.rand(int(aug.sum()), t, device=device)
    lv = ctx_level[..., None, None, None]
    clean = lv * w["video"] + (1 - lv) * torch.randn_like(w["video"])
    # The previous-frame input of block i is the (augmented) clean frame i-1.
    prev_first = w["prev"][:, :1]
    prev = torch.cat([prev_first, clean[:, :-1]], dim=1)
    clean_audio = w["audio"]
    # Noisy targets.
    s = torch.rand(b, t, device=device)
    eps_v, eps_a = torch.randn_like(w["video"]), torch.randn_like(w["audio"])
    sv = s[..., None, None, None]
    noisy = sv * w["video"] + (1 - sv) * eps_v
    noisy_audio = s[..., None] * w["audio"] + (1 - s[..., None]) * eps_a
    cat = lambda a, c: torch.cat([a, c], dim=1)  # noqa: E731
    memory, arrival, valid = make_memory(model, batch, window, text_table)
    is_noisy = torch.cat([torch.zeros(b, t, dtype=torch.bool), torch.ones(b, t, dtype=torch.bool)],
                         dim=1).to(device)
    v_pred, a_pred = model(
        cat(clean, noisy), cat(prev, prev), cat(clean_audio, noisy_audio),
        cat(w["inputs"], w["inputs"]), cat(w["text"], w["text"]), cat(ctx_level, s),
        cat(w["frame"], w["frame"]), is_noisy, memory.to(device), arrival.to(device),
        valid.to(device))
    video_loss = ((v_pred[:, t:] - (w["video"] - eps_v)) ** 2).mean()
    audio_loss = ((a_pred[:, t:] - (w["audio"] - eps_a)) ** 2).mean()
    return video_loss + audio_weight * audio_loss, video_loss, audio_loss


def train_generator(cfg: GeneratorTrainConfig) -> Path:
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    device = pick_device(cfg.device)
    episodes, text_table = encode_dataset(cfg.data, cfg.tokenizers, out / "latents.pt")
    video_ae, audio_ae = load_tokenizers(cfg.tokenizers)
    a_cfg = audio_ae.config
    model_cfg = WorldModelConfig(width=cfg.width, depth=cfg.depth, heads=cfg.heads,
                                 context=cfg.window - 1,
                                 latent_channels=video_ae.config.latent_channels,
                                 audio_dim=a_cfg.latent_dim)
    model = WorldModel(model_cfg).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=0.01, betas=(0.9, 0.95))
    ckpt_path = out / "world.pt"
    step, spent = 0, 0.0
    if ckpt_path.exists():
        ckpt = torch.load(ckpt_path, map_location="cpu", weights_only=False)
        model.load_state_dict(ckpt["model"])
        opt.load_state_dict(ckpt["opt"])
        step, spent = ckpt["step"], ckpt["spent"]
    rng = np.random.default_rng(step)
    budget = Budget(cfg.minutes, spent)
    log = LossLog(out / "loss.jsonl")
    bar = tqdm(desc="generator", unit="step", initial=step)
    last_save = last_sample = budget.spent
    # Hold out the last episode for sample rollouts.
    train_eps, sample_ep = episodes[:-1], episodes[-1]
    while not budget.done():
        frac = budget.spent / budget.seconds
        lr = cfg.lr * min(1.0, (step + 1) / 100) * (0.1 + 0.9 * 0.5 * (1 + np.cos(np.pi * frac)))
        for g in opt.param_groups:
            g["lr"] = lr
        batch = sample_windows(train_eps, cfg.batch, cfg.window, rng)
        loss, vl, al = flow_loss(model, batch, cfg.window, text_table, cfg.audio_weight, device)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        step += 1
        bar.update()
        if step % 10 == 0:
            log.add(step, loss=loss.item(), video=vl.item(), audio=al.item(), lr=lr)
            bar.set_postfix(video=f"{vl.item():.3f}", audio=f"{al.item():.3f}")
        if budget.spent - last_save > cfg.checkpoint_every_s or budget.done():
            last_save = budget.spent
            save_checkpoint(ckpt_path, model, {"opt": opt.state_dict(), "step": step,
                                               "spent": budget.spent,
                                               "train": dataclasses.asdict(cfg)})
            line_plot(out / "loss.png", log.series("video", "audio"), "generator flow loss")
        if budget.spent - last_sample > cfg.sample_every_s or budget.done():
            last_sample = budget.spent
            sample_rollout(out / f"rollout_{step:06d}.png", model, video_ae, sample_ep,
                           text_table)
    bar.close()
    return ckpt_path


@torch.inference_mode()
def sample_rollout(path: Path, model: WorldModel, video_ae, ep: LatentEpisode,
                   text_table: dict[str, np.ndarray], start: int = 40, horizon: int = 16) -> None:
    """Open-loop rollout from `context` true frames with the true inputs: truth row vs model."""
    from engine.runtime.rollout import LatentRollout

    model.eval()
    roll = LatentRollout(model, ep.theme, ep.image, seed=0)
    for f in range(start - model.config.context, start):
        roll.observe(ep.video[f].float(), ep.audio[f], ep.inputs[f], f, _text(ep, f, text_table))
    frames = []
    for f in range(start, start + horizon):
        z, _ = roll.generate(ep.inputs[f], f, _text(ep, f, text_table))
        frames.append(z)
    truth = video_ae.decode(ep.video[start:start + horizon].float())
    gen = video_ae.decode(torch.stack(frames))
    image_grid(path, [tensor_to_frames(truth[::2]), tensor_to_frames(gen[::2])])
    model.train()


def _text(ep: LatentEpisode, f: int, table: dict[str, np.ndarray]) -> np.ndarray | None:
    for r, t in zip(ep.prompt_rows, ep.prompt_texts, strict=True):
        if r == f:
            return table[t]
    return None
