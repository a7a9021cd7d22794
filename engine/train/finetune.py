"""Fine-tunes warm-started from shipped weights, budgeted in steps so candidates compare fairly.

    python -m engine.train finetune --weights engine/weights --out runs/ft_bank --steps 300 \
        --error-bank runs/errorbank.pt
    python -m engine.train decoder --weights engine/weights --out runs/decoder --steps 600

`finetune` trains the world transformer (tokenizers frozen) with rollout context, stronger
context noise, run-time-sized context masks and optionally Error Bank replay. `decoder` is the
GameNGen decoder fine-tune: encoder and generator frozen, the video decoder learns to turn the
generator's own (soft, drifted) latents into the true frames, with L1 and a patch critic; the
generator is whichever `weights/world.pt` holds (the transformer or the conv model; a code
model's true latents are its codes, so the decoder also learns to draw the codebook).
Both resume from `out/state.pt` and finish by writing `out/weights/`, a complete weights folder
(`World.load(out/weights)`, `--weights` for bench, eval and measure).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from tqdm import tqdm

from engine.model.checkpoint import load_checkpoint
from engine.model.conv_world import ConvWorldModel, sample_frame
from engine.model.video_ae import PatchDiscriminator, VideoAE, VideoAEConfig, frames_to_tensor
from engine.model.world import WorldModel, WorldModelConfig
from engine.model.world_loader import Generator, load_world_model

from .bank import LatentBank
from .common import (
    Budget,
    LossLog,
    Throughput,
    cosine_lr,
    optimizer_step,
    pick_device,
    resume,
    save_state,
)
from .conv_generator import conv_windows, frame_conditioning, quantize_bank
from .errorbank import ErrorBank, frames_of_bank, replay_batch
from .generator import flow_loss, make_memory, own_context
from .latents import encode_dataset, tokenizer_fingerprint
from .plots import line_plot
from .weights_folder import write_weights


@dataclass
class FinetuneConfig:
    data: str = "data/v2"
    weights: str = "engine/weights"  # the warm start (and the tokenizers, kept frozen)
    out: str = "runs/finetune"
    steps: int = 300
    minutes: float | None = None  # optional wall-clock cap (a GPU lease); steps stay the budget
    batch: int = 8
    window: int = 10  # > context, so scored positions see a run-time-sized context
    lr: float = 3e-4
    audio_weight: float = 0.5
    own_share: float = 0.5
    own_rounds: int = 2
    own_steps: int = 2
    ctx_noise: float = 0.3
    full_context_only: bool = True
    text_table: str | None = None  # sentence embeddings (machines without the text encoder)
    error_bank: str | None = None  # an ErrorBank file; None trains without one (the ablation)
    bank_share: float = 0.25  # fixed share of every batch replayed from the Error Bank
    first_frame_share: float = 0.1
    refine_width: int = 0  # > 0 adds the zero-initialised latent refiner (engine/model/world.py)
    audio_only: bool = False  # train only the audio projections (after a new audio tokenizer)
    seed: int = 0
    checkpoint_every: int = 25
    device: str = "auto"


@dataclass
class DecoderTuneConfig:
    data: str = "data/v2"
    weights: str = "engine/weights"
    out: str = "runs/decoder"
    steps: int = 600
    minutes: float | None = None
    batch: int = 4  # windows per step; every frame of a window is decoded
    window: int = 4
    rounds: tuple[int, ...] = (0, 1, 2, 3)  # 0: the true latent (keep reconstructions sharp)
    lr: float = 2e-4
    adv_weight: float = 0.05
    text_table: str | None = None
    seed: int = 0
    checkpoint_every: int = 25
    device: str = "auto"


def latent_bank(cfg, device: torch.device) -> tuple[LatentBank, np.ndarray]:
    """The data set's latents under the warm start's tokenizers, and the true frames by row.
    Cached next to the run folder, one file per data set and tokenizer pair, so runs that
    share both share the encoding and a new tokenizer never reads another's latents."""
    cache = Path(cfg.out).parent / (
        f"{Path(cfg.data).name}_latents_{tokenizer_fingerprint(cfg.weights)[:10]}.pt"
    )
    episodes, table = encode_dataset(
        cfg.data, cfg.weights, cache, device=device, text_table=cfg.text_table
    )
    image_dim = load_world_model(Path(cfg.weights) / "world.pt").config.image_dim
    bank = LatentBank.build(episodes, table, device, image_dim)
    return bank, frames_of_bank(cfg.data, len(episodes))


def warm_start_world(path: Path, refine_width: int = 0) -> WorldModel:
    """The generator in `path`, with a zero-initialised latent refiner added when asked for
    and not there yet: it starts out computing exactly what the stored weights compute."""
    model = load_checkpoint(path, WorldModel, WorldModelConfig)
    if refine_width and not model.config.refine_width:
        grown = WorldModel(dataclasses.replace(model.config, refine_width=refine_width))
        missing, unexpected = grown.load_state_dict(model.state_dict(), strict=False)
        if unexpected or not all(k.startswith("refine.") for k in missing):
            raise ValueError(f"cannot add a refiner to {path}: {missing} {unexpected}")
        model = grown
    return model.eval()


def trained_parameters(model: WorldModel, audio_only: bool) -> list[torch.nn.Parameter]:
    """Everything, or (audio_only) just the projections into and out of the audio latent: a new
    audio tokenizer changes what those latents mean, not what the world does."""
    if not audio_only:
        return list(model.parameters())
    model.requires_grad_(False)
    parts = [model.audio_in, model.audio_out]
    for part in parts:
        part.requires_grad_(True)
    return [p for part in parts for p in part.parameters()]


def progress(cfg, step: int, budget: Budget | None) -> float:
    """Fraction of the budget used: steps, or the wall-clock cap if that comes first."""
    frac = step / cfg.steps
    return max(frac, budget.spent / budget.seconds) if budget is not None else frac


def train_finetune(cfg: FinetuneConfig) -> Path:
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    device = pick_device(cfg.device)
    torch.manual_seed(cfg.seed)
    bank, _ = latent_bank(cfg, device)
    model = warm_start_world(Path(cfg.weights) / "world.pt", cfg.refine_width)
    model = model.to(device).train()
    params = trained_parameters(model, cfg.audio_only)
    opt = torch.optim.AdamW(params, lr=cfg.lr, weight_decay=0.01, betas=(0.9, 0.95))
    state = out / "state.pt"
    step, spent = resume(state, model=model, opt=opt)
    budget = Budget(cfg.minutes, spent) if cfg.minutes else None
    errors = ErrorBank.load(cfg.error_bank) if cfg.error_bank else None
    gen = torch.Generator().manual_seed(cfg.seed * 100_003 + step)  # resumes continue the stream
    log = LossLog(out / "loss.jsonl")
    autocast = torch.autocast("cuda", dtype=torch.bfloat16, enabled=device.type == "cuda")
    bar = tqdm(total=cfg.steps, initial=step, desc="finetune", unit="step", mininterval=10)
    speed = Throughput(device, frames_per_step=cfg.batch * cfg.window)
    while progress(cfg, step, budget) < 1:
        for g in opt.param_groups:
            g["lr"] = cosine_lr(cfg.lr, progress(cfg, step, budget), step, warmup=20)
        starts = bank.sample(cfg.batch, cfg.window, gen, cfg.first_frame_share)
        bad = None
        if errors is not None:
            n_bad = int(round(cfg.bank_share * cfg.batch))
            bad_starts, bad_v, bad_a = replay_batch(errors, bank, n_bad, cfg.window, gen)
            starts = torch.cat([starts[: cfg.batch - n_bad], bad_starts.to(starts.device)])
            rows = torch.arange(cfg.batch, device=device) >= cfg.batch - n_bad
            pad_v = torch.zeros(cfg.batch - n_bad, *bad_v.shape[1:])
            pad_a = torch.zeros(cfg.batch - n_bad, *bad_a.shape[1:])
            bad = (torch.cat([pad_v, bad_v]).to(device), torch.cat([pad_a, bad_a]).to(device), rows)
        w = bank.windows(starts, cfg.window)
        with autocast:
            loss, vl, al = flow_loss(
                model,
                w,
                cfg.audio_weight,
                cfg.own_share,
                cfg.own_rounds,
                cfg.own_steps,
                cfg.ctx_noise,
                cfg.full_context_only,
                bad,
            )
        optimizer_step(opt, loss, clip=params)
        step += 1
        speed.tick()
        bar.update()
        log.add(step, loss=loss.item(), video=vl.item(), audio=al.item())
        bar.set_postfix(video=f"{vl.item():.3f}", audio=f"{al.item():.3f}", refresh=False)
        if step % cfg.checkpoint_every == 0 or progress(cfg, step, budget) >= 1:
            save_state(
                state,
                step,
                budget.spent if budget else 0.0,
                {"train": dataclasses.asdict(cfg)},
                model=model,
                opt=opt,
            )
            line_plot(out / "loss.png", log.series("video", "audio"), "fine-tune flow loss")
            write_weights(cfg, out, world=model, step=step)
    bar.close()
    speed.report()
    return write_weights(cfg, out, world=model, step=step)


def decoder_latents(
    model: Generator, bank: LatentBank, starts: torch.Tensor, window: int, rounds: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """The generator's latents for `window` frames after each start, flattened, and the data
    rows they stand for: the truth (rounds 0), or the transformer's prediction from the true
    context (1) or from its own predictions, compounded (2, 3). The conv model predicts its
    frames in a chain from `context` true frames before them (any rounds > 0), as it plays."""
    steps = torch.arange(window, device=starts.device)
    if isinstance(model, ConvWorldModel):
        k = model.config.context
        w = conv_windows(bank, starts, k + window)
        rows = starts[:, None] + k + steps
        if rounds == 0:
            return w["video"][:, k:].flatten(0, 1), rows.flatten()
        ctx, audio = w["video"][:, :k], w["audio"][:, k - 1]
        valid = torch.ones(len(starts), k, dtype=torch.bool, device=starts.device)
        zeros = torch.zeros(len(starts), device=starts.device)
        out = []
        for t in range(k, k + window):
            cond = frame_conditioning(w, t, zeros)
            z, audio = sample_frame(model, ctx, valid, audio, cond, torch.randn_like(ctx[:, 0]))
            out.append(z)
            ctx = torch.cat([ctx[:, 1:], z[:, None]], dim=1)
        return torch.stack(out, dim=1).flatten(0, 1), rows.flatten()
    w = bank.windows(starts, window)
    rows = starts[:, None] + steps
    if rounds == 0:
        return w["video"].flatten(0, 1), rows.flatten()
    video, _ = own_context(model, w, make_memory(model, w), rounds, model.config.sampler_steps)
    return video.flatten(0, 1), rows.flatten()


def train_decoder(cfg: DecoderTuneConfig) -> Path:
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    device = pick_device(cfg.device)
    torch.manual_seed(cfg.seed)
    bank, frames = latent_bank(cfg, device)
    world = load_world_model(Path(cfg.weights) / "world.pt").to(device).eval()
    world.requires_grad_(False)
    history = world.config.context if isinstance(world, ConvWorldModel) else 0
    if isinstance(world, ConvWorldModel) and world.config.codes:
        quantize_bank(world, bank)  # a code model's pictures are codes: the decoder learns them
    ae = load_checkpoint(Path(cfg.weights) / "video_ae.pt", VideoAE, VideoAEConfig).to(device)
    ae.encoder.requires_grad_(False)
    disc = PatchDiscriminator().to(device)
    opt = torch.optim.AdamW(ae.decoder.parameters(), lr=cfg.lr, weight_decay=0.0)
    dopt = torch.optim.AdamW(disc.parameters(), lr=cfg.lr, betas=(0.5, 0.9))
    state = out / "state.pt"
    step, spent = resume(state, decoder=ae.decoder, disc=disc, opt=opt, dopt=dopt)
    budget = Budget(cfg.minutes, spent) if cfg.minutes else None
    gen = torch.Generator().manual_seed(cfg.seed * 100_003 + step)
    log = LossLog(out / "loss.jsonl")
    bar = tqdm(total=cfg.steps, initial=step, desc="decoder", unit="step", mininterval=10)
    while progress(cfg, step, budget) < 1:
        for g in opt.param_groups:
            g["lr"] = cosine_lr(cfg.lr, progress(cfg, step, budget), step, warmup=20)
        starts = bank.sample(cfg.batch, history + cfg.window, gen, 0.0)
        rounds = cfg.rounds[int(torch.randint(len(cfg.rounds), (1,), generator=gen))]
        with torch.no_grad():
            z, rows = decoder_latents(world, bank, starts, cfg.window, rounds)
        z = z.float()
        truth = frames_to_tensor(frames[rows.cpu().numpy()]).to(device)
        pic = ae.decode(z)
        l1 = (pic - truth).abs().mean()
        adv = -disc(pic).mean()
        loss = l1 + cfg.adv_weight * adv
        optimizer_step(opt, loss)
        d_loss = (
            torch.relu(1 - disc(truth)).mean() + torch.relu(1 + disc(pic.detach())).mean()
        )  # hinge critic
        optimizer_step(dopt, d_loss)
        step += 1
        bar.update()
        log.add(step, l1=l1.item(), adv=adv.item(), critic=d_loss.item(), rounds=rounds)
        bar.set_postfix(l1=f"{l1.item():.4f}", critic=f"{d_loss.item():.3f}", refresh=False)
        if step % cfg.checkpoint_every == 0 or progress(cfg, step, budget) >= 1:
            save_state(
                state,
                step,
                budget.spent if budget else 0.0,
                {"train": dataclasses.asdict(cfg)},
                decoder=ae.decoder,
                disc=disc,
                opt=opt,
                dopt=dopt,
            )
            line_plot(out / "loss.png", log.series("l1", "critic"), "decoder fine-tune")
            write_weights(cfg, out, video_ae=ae, step=step)
    bar.close()
    return write_weights(cfg, out, video_ae=ae, step=step)
