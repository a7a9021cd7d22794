"""Train the video and audio tokenizers on sim frames (resumable, wall-clock budgeted)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from tqdm import tqdm

from engine.data.layout import finished_shards
from engine.eval.metrics import pooled_psnr, sharpness_ratio
from engine.model.audio_ae import (
    AudioAE,
    AudioAEConfig,
    audio_loss,
    int16_to_float,
    texture_loss,
)
from engine.model.checkpoint import load_checkpoint, save_checkpoint
from engine.model.video_ae import (
    PatchDiscriminator,
    VideoAE,
    VideoAEConfig,
    frames_to_tensor,
    tensor_to_frames,
)

from .common import Budget, LossLog, cosine_lr, optimizer_step, pick_device, resume, save_state
from .plots import image_grid, line_plot


@dataclass
class TokenizerTrainConfig:
    data: str = "data/wm_train"
    out: str = "runs/tokenizers"
    minutes: float = 14.0
    batch: int = 16
    crop: int = 64  # fully conv: train on crops, run on 128x128
    lr: float = 1e-3
    adv_weight: float = 0.0  # > 0 trains a patch discriminator for sharper reconstructions
    adv_start: float = 0.5  # fraction of the budget before the adversarial loss switches on
    audio_minutes: float = 5.0
    audio_batch: int = 64
    audio_texture: bool = True  # coherent + texture decoder (engine/model/audio_ae.py)
    warm_start: str | None = "engine/weights"  # audio: start from these weights' tokenizer
    checkpoint_every_s: float = 120.0
    device: str = "auto"


class FramePool:
    """Every frame and audio row of a generated dataset, memory-mapped."""

    def __init__(self, root: str | Path):
        shards = finished_shards(Path(root))
        if not shards:
            raise FileNotFoundError(f"no finished shards under {root}: run python -m engine.data")
        self.frames = [np.load(p / "frames.npy", mmap_mode="r") for p in shards]
        self.audio = [np.load(p / "audio.npy", mmap_mode="r") for p in shards]
        self.sizes = np.array([len(f) for f in self.frames])

    def _rows(self, n: int, rng: np.random.Generator) -> list[tuple[int, int]]:
        shard = rng.choice(len(self.sizes), n, p=self.sizes / self.sizes.sum())
        return [(int(s), int(rng.integers(self.sizes[s]))) for s in shard]

    def frame_batch(self, n: int, rng: np.random.Generator) -> np.ndarray:
        return np.stack([self.frames[s][r] for s, r in self._rows(n, rng)])

    def audio_batch(self, n: int, rng: np.random.Generator) -> np.ndarray:
        return np.stack([self.audio[s][r] for s, r in self._rows(n, rng)])


class DevicePool:
    """All frames (or audio rows) of a FramePool copied once into device memory (a GPU holds a
    whole data set), so a batch is one random gather instead of thousands of page reads."""

    def __init__(self, arrays: list[np.ndarray], device: torch.device):
        self.data = torch.cat([torch.from_numpy(np.ascontiguousarray(a)) for a in arrays])
        self.data = self.data.to(device)

    def batch(self, n: int) -> torch.Tensor:
        return self.data[torch.randint(len(self.data), (n,), device=self.data.device)]


def frame_batches(
    pool: FramePool, cfg: TokenizerTrainConfig, device: torch.device, rng: np.random.Generator
) -> Iterator[torch.Tensor]:
    """Endless (B, 3, crop, crop) float batches on `device`."""
    if device.type != "cuda":
        while True:
            yield frames_to_tensor(
                random_crops(pool.frame_batch(cfg.batch, rng), cfg.crop, rng)
            ).to(device)
    frames = DevicePool(pool.frames, device)
    size = frames.data.shape[1]
    while True:
        x = frames.batch(cfg.batch)
        if cfg.crop < size:  # one offset per batch: the net is translation-equivariant anyway
            y, z = (int(v) for v in rng.integers(0, size - cfg.crop + 1, 2))
            x = x[:, y : y + cfg.crop, z : z + cfg.crop]
        yield frames_to_tensor(x)


def random_crops(frames: np.ndarray, size: int, rng: np.random.Generator) -> np.ndarray:
    h, w = frames.shape[1:3]
    out = np.empty((len(frames), size, size, 3), np.uint8)
    for i, f in enumerate(frames):
        y, x = rng.integers(0, h - size + 1), rng.integers(0, w - size + 1)
        out[i] = f[y : y + size, x : x + size]
    return out


def train_video_ae(cfg: TokenizerTrainConfig) -> Path:
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    device = pick_device(cfg.device)
    pool = FramePool(cfg.data)
    rng = np.random.default_rng(0)
    ckpt_path = out / "video_ae.pt"
    model, disc = VideoAE(VideoAEConfig()).to(device), PatchDiscriminator().to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=0.0)
    dopt = torch.optim.AdamW(disc.parameters(), lr=cfg.lr, betas=(0.5, 0.9))
    step, spent = resume(ckpt_path, model=model, disc=disc, opt=opt, dopt=dopt)
    budget = Budget(cfg.minutes, spent)
    log = LossLog(out / "video_loss.jsonl")
    bar = tqdm(desc="video AE", unit="step", initial=step, mininterval=5)
    last_save = budget.spent
    batches = frame_batches(pool, cfg, device, rng)
    autocast = torch.autocast("cuda", dtype=torch.bfloat16, enabled=device.type == "cuda")
    while not budget.done():
        frac = budget.spent / budget.seconds
        for g in opt.param_groups:
            g["lr"] = cosine_lr(cfg.lr, frac)
        x = next(batches)
        with autocast:
            recon = model(x).float()
        mse = torch.mean((recon - x) ** 2)
        loss = mse + (recon - x).abs().mean()
        adv_on = cfg.adv_weight > 0 and frac >= cfg.adv_start
        if adv_on:
            with autocast:
                loss = loss - cfg.adv_weight * disc(recon).float().mean()
        optimizer_step(opt, loss)
        if adv_on:  # hinge loss for the critic
            with autocast:
                d_loss = (
                    torch.relu(1 - disc(x).float()).mean()
                    + torch.relu(1 + disc(recon.detach()).float()).mean()
                )
            optimizer_step(dopt, d_loss)
        step += 1
        bar.update()
        if step % 20 == 0:
            psnr = -10 * torch.log10(mse).item()
            log.add(step, mse=mse.item(), psnr=psnr)
            bar.set_postfix(psnr=f"{psnr:.2f}", refresh=False)
        if budget.spent - last_save > cfg.checkpoint_every_s or budget.done():
            last_save = budget.spent
            save_state(
                ckpt_path,
                step,
                budget.spent,
                {"config": VideoAEConfig().__dict__},
                model=model,
                disc=disc,
                opt=opt,
                dopt=dopt,
            )
            line_plot(out / "video_loss.png", log.series("mse"), "video AE MSE")
    bar.close()
    # Normalisation statistics for the generator, then the final (fp16) tokenizer file.
    model.eval()
    with torch.inference_mode():
        lat = model.encoder(frames_to_tensor(pool.frame_batch(256, rng)).to(device) * 2 - 1)
        mean = lat.mean(dim=(0, 2, 3)).cpu().tolist()
        std = lat.std(dim=(0, 2, 3)).cpu().tolist()
    config = VideoAEConfig(latent_mean=mean, latent_std=std)
    final = VideoAE(config)
    final.load_state_dict(model.state_dict())
    final_path = out / "video_ae_final.pt"
    save_checkpoint(final_path, final, {"step": step}, half=True)
    final = load_checkpoint(final_path, VideoAE, VideoAEConfig).to(device)
    with torch.inference_mode():
        frames = pool.frame_batch(256, rng)
        recon = np.concatenate(
            [
                tensor_to_frames(final(frames_to_tensor(frames[i : i + 64]).to(device)))
                for i in range(0, len(frames), 64)
            ]
        )
    image_grid(out / "video_recon.png", [frames[:8], recon[:8]])
    quality = {
        "steps": step,
        "psnr": round(pooled_psnr(recon, frames), 3),
        "sharpness": round(sharpness_ratio(recon, frames), 4),
        "adv_weight": cfg.adv_weight,
    }
    (out / "video_quality.json").write_text(json.dumps(quality))
    return final_path


def train_audio_ae(cfg: TokenizerTrainConfig) -> Path:
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    device = pick_device(cfg.device)
    pool = FramePool(cfg.data)
    rng = np.random.default_rng(1)
    ckpt_path = out / "audio_ae.pt"
    model = audio_warm_start(cfg.warm_start, cfg.audio_texture).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr)
    step, spent = resume(ckpt_path, model=model, opt=opt)
    budget = Budget(cfg.audio_minutes, spent)
    log = LossLog(out / "audio_loss.jsonl")
    bar = tqdm(desc="audio AE", unit="step", initial=step, mininterval=5)
    last_save = budget.spent
    on_device = DevicePool(pool.audio, device) if device.type == "cuda" else None
    while not budget.done():
        rows = (
            on_device.batch(cfg.audio_batch)
            if on_device is not None
            else pool.audio_batch(cfg.audio_batch, rng)
        )
        x = int16_to_float(rows).to(device)
        for g in opt.param_groups:
            g["lr"] = cosine_lr(cfg.lr, budget.spent / budget.seconds)
        if cfg.audio_texture:
            parts = texture_loss(model.decode_parts(model.encode(x)), x)
        else:
            parts = {"total": audio_loss(model(x), x)}
        optimizer_step(opt, parts["total"])
        step += 1
        bar.update()
        if step % 20 == 0:
            log.add(step, **{k: v.item() for k, v in parts.items()})
            bar.set_postfix(loss=f"{parts['total'].item():.4f}", refresh=False)
        if budget.spent - last_save > cfg.checkpoint_every_s or budget.done():
            last_save = budget.spent
            save_state(ckpt_path, step, budget.spent, model=model, opt=opt)
            line_plot(out / "audio_loss.png", log.series(*parts), "audio AE")
    bar.close()
    model.eval()
    with torch.inference_mode():
        lat = model.encoder(int16_to_float(pool.audio_batch(512, rng)).to(device).unsqueeze(1))
        scale = float(lat.std())
    final = AudioAE(AudioAEConfig(latent_scale=scale, texture=cfg.audio_texture))
    final.load_state_dict(model.state_dict())
    final_path = out / "audio_ae_final.pt"
    save_checkpoint(final_path, final, {"step": step}, half=True)
    return final_path


def audio_warm_start(weights: str | None, texture: bool) -> AudioAE:
    """A fresh audio tokenizer, or the one in `weights` when there is one. Growing a texture
    decoder from a single-output one: the old output (trained to sound right, not to match the
    waveform) becomes the texture part and the coherent part starts silent."""
    model = AudioAE(AudioAEConfig(texture=texture))
    path = Path(weights) / "audio_ae.pt" if weights else None
    if path is None or not path.exists():
        return model
    old = load_checkpoint(path, AudioAE, AudioAEConfig)
    state = old.state_dict()
    if texture and not old.config.texture:
        last = f"decoder.{len(model.decoder) - 1}"
        for name in ("weight", "bias"):
            w = state[f"{last}.{name}"]
            state[f"{last}.{name}"] = torch.cat([torch.zeros_like(w), w])
    model.load_state_dict(state)  # latent_scale stays 1: encode and decode still match
    return model
