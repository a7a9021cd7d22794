"""Train the causal world transformer with flow matching on tokenizer latents.

Teacher forcing with every frame a target: a window of T frames runs as T clean blocks plus
T noisy blocks in one pass (see engine/model/world.py). Context frames are sometimes slightly
noised and, with the GPU preset, sometimes the model's own predictions (`own_context`), which
makes rollouts on the model's own, imperfect frames more robust. On CUDA the passes run in
bfloat16 autocast; all latents live on the device (`LatentBank`).
"""

from __future__ import annotations

import copy
import dataclasses
from pathlib import Path

import numpy as np
import torch
from tqdm import tqdm

from engine.model.checkpoint import save_checkpoint
from engine.model.sampler import EulerSampler
from engine.model.video_ae import tensor_to_frames
from engine.model.world import Blocks, Memory, WorldModel

from .bank import LatentBank
from .common import Budget, LossLog, cosine_lr, optimizer_step, pick_device, resume
from .generator_config import GeneratorTrainConfig
from .latents import LatentEpisode, encode_dataset, load_tokenizers
from .plots import image_grid, line_plot


def make_memory(model: WorldModel, w: dict[str, torch.Tensor]) -> Memory:
    """Memory tokens of each window (theme, reference image, last sentences), their arrival
    frames and validity, laid out as the runtime lays them out."""
    b = w["theme"].shape[0]
    memory = model.embed_memory(w["theme"], w["mem_text"], w["image"])
    zeros = torch.zeros(b, 2, dtype=torch.long, device=memory.device)
    arrival = torch.cat([zeros, w["mem_arrival"]], dim=1)
    valid = torch.cat(
        [
            torch.ones(b, 1, dtype=torch.bool, device=memory.device),
            w["has_image"][:, None],
            w["mem_valid"],
        ],
        dim=1,
    )
    return Memory(memory, arrival, valid)


def paired_blocks(
    w: dict[str, torch.Tensor],
    context: torch.Tensor,
    target: torch.Tensor,
    prev: torch.Tensor,
    context_audio: torch.Tensor,
    target_audio: torch.Tensor,
    context_level: torch.Tensor,
    target_level: torch.Tensor,
) -> Blocks:
    """A window as T clean context blocks followed by T noisy target blocks (teacher forcing
    with every frame a target, one pass)."""
    b, t = w["frame"].shape
    dev = w["video"].device
    return Blocks(
        video=_pair(context, target),
        prev=_pair(prev, prev),
        audio=_pair(context_audio, target_audio),
        inputs=_pair(w["inputs"], w["inputs"]),
        text=_pair(w["text"], w["text"]),
        level=_pair(context_level, target_level),
        frame=_pair(w["frame"], w["frame"]),
        noisy=_pair(
            torch.zeros(b, t, dtype=torch.bool, device=dev),
            torch.ones(b, t, dtype=torch.bool, device=dev),
        ),
    )


def _pair(a: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    return torch.cat([a, c], dim=1)


@torch.no_grad()
def own_context(
    model: WorldModel, w: dict[str, torch.Tensor], memory: Memory, rounds: int, steps: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """The model's own teacher-forced predictions of every frame in the window, `rounds` times
    over: round r conditions on round r - 1's predictions, so errors compound as in a rollout.

    Training on these as context, with the true frames as targets, teaches the generator to pull
    a drifting rollout back instead of amplifying its own mistakes (error recycling / rollout
    training), at the cost of rounds * steps extra forward passes without gradients.
    """
    b, t = w["frame"].shape
    dev = w["video"].device
    sampler = EulerSampler(steps)
    ones = torch.ones(b, t, device=dev)
    ctx_v, ctx_a = w["video"], w["audio"]
    for _ in range(rounds):
        prev = torch.cat([w["prev"][:, :1], ctx_v[:, :-1]], dim=1)
        x, a = torch.randn_like(ctx_v), torch.randn_like(ctx_a)
        for s in sampler.levels():
            level = torch.full((b, t), s, device=dev)
            v_pred, a_pred = model(paired_blocks(w, ctx_v, x, prev, ctx_a, a, ones, level), memory)
            x = sampler.step(x, v_pred[:, t:].float())
            a = sampler.step(a, a_pred[:, t:].float())
        ctx_v, ctx_a = x, a
    return ctx_v, ctx_a


def full_context_mask(frame: torch.Tensor, context: int) -> torch.Tensor:
    """(B, T) True where a window position sees as many clean frames as it would at run time:
    min(position, context) frames of the window before it against min(frame index, context)
    frames the episode has. Mid-episode that is only positions >= context (the first position
    of a window sees nothing), so training on the others teaches a mask inference never uses."""
    pos = torch.arange(frame.shape[1], device=frame.device)[None]
    return pos.clamp(max=context) == frame.clamp(max=context)


def flow_loss(
    model: WorldModel,
    w: dict[str, torch.Tensor],
    audio_weight: float,
    own_share: float = 0.0,
    own_rounds: int = 2,
    own_steps: int = 2,
    ctx_noise: float = 0.1,
    full_context_only: bool = False,
    bad_context: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Flow-matching loss over every frame of a batch of windows (teacher forcing).

    Context frames are, per window, either the truth, the truth noised to a level in
    [1 - ctx_noise, 1] (the level tells the model so; GameNGen / DIAMOND augmentation), or with
    probability `own_share` the model's own predictions (`own_context`). `bad_context`
    (video (B, K, ...), audio (B, K, A), rows (B,) bool) puts stored erroneous histories (the
    Error Bank, engine/train/errorbank.py) in the first K positions of the chosen windows;
    those windows are scored only after them. Targets are always the true frames.
    `full_context_only` scores only positions that see a run-time-sized context.
    """
    b, t = w["frame"].shape
    dev = w["video"].device
    memory = make_memory(model, w)
    clean, clean_audio = w["video"], w["audio"]
    own = torch.rand(b, device=dev) < own_share
    weight = torch.ones(b, t, device=dev)
    if full_context_only:
        weight = full_context_mask(w["frame"], model.config.context).float()
    if bad_context is not None:
        own = own & ~bad_context[2]
    if own.any():
        sub = {k: v[own] for k, v in w.items()}
        own_v, own_a = own_context(model, sub, memory.select(own), own_rounds, own_steps)
        clean, clean_audio = clean.clone(), clean_audio.clone()
        clean[own], clean_audio[own] = own_v.to(clean.dtype), own_a.to(clean_audio.dtype)
    if bad_context is not None and bad_context[2].any():
        bad_v, bad_a, rows = bad_context
        k = bad_v.shape[1]
        clean, clean_audio = clean.clone(), clean_audio.clone()
        clean[rows, :k] = bad_v[rows].to(clean.dtype)
        clean_audio[rows, :k] = bad_a[rows].to(clean_audio.dtype)
        weight[rows] = (torch.arange(t, device=dev) >= k).float()
    ctx_level = torch.ones(b, t, device=dev)
    aug = (torch.rand(b, device=dev) < 0.5) & ~own
    ctx_level[aug] = 1 - ctx_noise * torch.rand(int(aug.sum()), t, device=dev)
    lv = ctx_level[..., None, None, None]
    clean = lv * clean + (1 - lv) * torch.randn_like(clean)
    # The previous-frame input of block i is the context frame i - 1.
    prev = torch.cat([w["prev"][:, :1], clean[:, :-1]], dim=1)
    s = torch.rand(b, t, device=dev)
    eps_v, eps_a = torch.randn_like(w["video"]), torch.randn_like(w["audio"])
    sv = s[..., None, None, None]
    noisy = sv * w["video"] + (1 - sv) * eps_v
    noisy_audio = s[..., None] * w["audio"] + (1 - s[..., None]) * eps_a
    v_pred, a_pred = model(
        paired_blocks(w, clean, noisy, prev, clean_audio, noisy_audio, ctx_level, s), memory
    )
    norm = weight.sum().clamp(min=1)
    video_err = ((v_pred[:, t:].float() - (w["video"] - eps_v)) ** 2).mean(dim=(2, 3, 4))
    audio_err = ((a_pred[:, t:].float() - (w["audio"] - eps_a)) ** 2).mean(dim=2)
    video_loss = (video_err * weight).sum() / norm
    audio_loss = (audio_err * weight).sum() / norm
    return video_loss + audio_weight * audio_loss, video_loss, audio_loss


def train_generator(cfg: GeneratorTrainConfig) -> Path:
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    device = pick_device(cfg.device)
    episodes, text_table = encode_dataset(
        cfg.data, cfg.tokenizers, out / "latents.pt", device=device, text_table=cfg.text_table
    )
    video_ae, audio_ae = load_tokenizers(cfg.tokenizers)
    a_cfg = audio_ae.config
    model_cfg = dataclasses.replace(
        cfg.model, latent_channels=video_ae.config.latent_channels, audio_dim=a_cfg.latent_dim
    )
    model = WorldModel(model_cfg).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=0.01, betas=(0.9, 0.95))
    ckpt_path = out / "world.pt"
    step, spent = resume(ckpt_path, model=model, opt=opt)
    gen = torch.Generator().manual_seed(step)
    budget = Budget(cfg.minutes, spent)
    log = LossLog(out / "loss.jsonl")
    bar = tqdm(desc="generator", unit="step", initial=step, mininterval=5)
    last_save = last_sample = budget.spent
    # Hold out the last episode for sample rollouts.
    bank = LatentBank.build(episodes[:-1], text_table, device, model_cfg.image_dim)
    sample_ep = episodes[-1]
    autocast = torch.autocast("cuda", dtype=torch.bfloat16, enabled=device.type == "cuda")
    while not budget.done():
        frac = budget.spent / budget.seconds
        lr = cosine_lr(cfg.lr, frac, step, warmup=100)
        for g in opt.param_groups:
            g["lr"] = lr
        w = bank.windows(bank.sample(cfg.batch, cfg.window, gen, cfg.first_frame_share), cfg.window)
        with autocast:
            own_share = cfg.own_share if frac >= cfg.own_start else 0.0
            loss, vl, al = flow_loss(
                model, w, cfg.audio_weight, own_share, cfg.own_rounds, cfg.own_steps
            )
        optimizer_step(opt, loss, clip=model.parameters())
        step += 1
        bar.update()
        if step % 10 == 0:
            log.add(step, loss=loss.item(), video=vl.item(), audio=al.item(), lr=lr)
            bar.set_postfix(video=f"{vl.item():.3f}", audio=f"{al.item():.3f}", refresh=False)
        if budget.spent - last_save > cfg.checkpoint_every_s or budget.done():
            last_save = budget.spent
            save_checkpoint(
                ckpt_path,
                model,
                {
                    "opt": opt.state_dict(),
                    "step": step,
                    "spent": budget.spent,
                    "train": dataclasses.asdict(cfg),
                },
            )
            line_plot(out / "loss.png", log.series("video", "audio"), "generator flow loss")
        if budget.spent - last_sample > cfg.sample_every_s or budget.done():
            last_sample = budget.spent
            sample_rollout(out / f"rollout_{step:06d}.png", model, video_ae, sample_ep, text_table)
    bar.close()
    return ckpt_path


@torch.inference_mode()
def sample_rollout(
    path: Path,
    model: WorldModel,
    video_ae,
    ep: LatentEpisode,
    text_table: dict[str, np.ndarray],
    start: int = 40,
    horizon: int = 16,
) -> None:
    """Open-loop rollout from `context` true frames with the true inputs: truth row vs model."""
    from engine.runtime.rollout import LatentRollout

    model = copy.deepcopy(model).float().cpu().eval()  # the rollout runs on the CPU
    roll = LatentRollout(model, ep.theme, ep.image, seed=0)
    for f in range(start - model.config.context, start):
        roll.observe(ep.video[f].float(), ep.audio[f], ep.inputs[f], f, _text(ep, f, text_table))
    frames = []
    for f in range(start, start + horizon):
        z, _ = roll.generate(ep.inputs[f], f, _text(ep, f, text_table))
        frames.append(z)
    truth = video_ae.decode(ep.video[start : start + horizon].float())
    gen = video_ae.decode(torch.stack(frames))
    image_grid(path, [tensor_to_frames(truth[::2]), tensor_to_frames(gen[::2])])


def _text(ep: LatentEpisode, f: int, table: dict[str, np.ndarray]) -> np.ndarray | None:
    for r, t in zip(ep.prompt_rows, ep.prompt_texts, strict=True):
        if r == f:
            return table[t]
    return None
