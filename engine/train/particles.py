"""Train the particle layer (engine/model/particles.py) on a generated data set.

    python -m engine.train particles --data data/v7 --out runs/particles --minutes 30 \
        --text-table runs/text_table.npz --threads 1

Three parts, one command, resumable (`out/state.pt`):
1. the encoder and the renderer, on the data's frames: the simulator says which pixels its
   rain or snow overlay covered (`engine/sim/render.py: overlay_alpha`, from the world's seed
   and the frame), and the drawn alpha must match that alpha's *statistics* per 64x64 region
   (coverage, its square, its autocorrelation along the streak lengths and slants), never its
   positions, which nothing can predict; the colour must match the overlay's colour as the
   truth shows it over a median-filtered background;
2. k-means of the encoder's states into the codes the world predicts;
3. the code head: the next frame's code from the last one and the sentence typed now,
   teacher-forced over every frame, the frames a sentence was typed at weighted up.
The result is `out/particles.pt` (fp16) and `out/report.json`: for each weather, the share of
its frames whose code draws, and the head's accuracy on held-out episodes.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from tqdm import tqdm

from engine.data import WindowReader
from engine.model.checkpoint import atomic_save, load_checkpoint, load_payload, save_checkpoint
from engine.model.latent_codes import fit_codebook
from engine.model.particles import NOISE_CHANNELS, PARTICLES_FILE, Particles, ParticlesConfig
from engine.model.video_ae import frames_to_tensor
from engine.sim.constants import WEATHERS
from engine.sim.render import overlay_alpha, weather_overlays

from .common import Budget, LossLog, cosine_lr, optimizer_step, resume, save_state
from .latents import load_text_table
from .plots import line_plot

# (dy, dx) lags of the alpha autocorrelation: along a rain streak (8 px, slant 0.25), across it,
# and a flake's 2 px
LAGS = ((1, 0), (2, 0), (4, 0), (7, 0), (0, 1), (0, 2), (4, 1), (7, 2), (1, 1), (2, -1))
REGION = 64  # 4 regions a frame: smaller ones leave too few streaks to count
TOLD_WEIGHT = 20.0  # a frame a sentence was typed at: the transitions the head must learn


@dataclass
class ParticlesTrainConfig:
    data: str = "data/v7"
    out: str = "runs/particles"
    text_table: str = "runs/text_table.npz"
    minutes: float = 30.0  # all three parts; the coder takes `coder_share` of it
    coder_share: float = 0.8
    batch: int = 24
    lr: float = 2e-3
    codes: int = 8
    seed: int = 0
    checkpoint_every: int = 100


@dataclass
class ParticleData:
    frames: np.ndarray  # (N, H, W, 3) uint8, every episode's rows in order
    weather: np.ndarray  # (N,) WEATHERS index
    frame_index: np.ndarray  # (N,) the simulator's frame index (which overlay frame)
    seed: np.ndarray  # (N,) the world's seed (which overlay)
    episode: np.ndarray  # (N,)
    texts: list[str]  # (N,) the sentence typed at the row, "" none


def load_particle_data(root: str | Path) -> ParticleData:
    reader = WindowReader(root, window=1)
    parts: dict[str, list] = {k: [] for k in ("frames", "weather", "index", "seed", "ep")}
    texts: list[str] = []
    for e in range(reader.episodes):
        w = reader.episode(e)
        n = len(w.frames)
        parts["frames"].append(w.frames)
        parts["weather"].append(w.labels["weather"].astype(np.int64))
        parts["index"].append(np.arange(n))
        parts["seed"].append(np.full(n, w.seed))
        parts["ep"].append(np.full(n, e))
        texts += list(w.prompts)
    cat = {k: np.concatenate(v) for k, v in parts.items()}
    return ParticleData(cat["frames"], cat["weather"], cat["index"], cat["seed"], cat["ep"], texts)


class OverlayTruth:
    """The simulator's overlay alpha of data rows (overlays built once per world seed)."""

    def __init__(self, data: ParticleData, size: int):
        self.data, self.size = data, size
        self.overlays: dict[int, dict] = {}

    def __call__(self, rows: np.ndarray) -> torch.Tensor:
        out = []
        for r in rows:
            seed = int(self.data.seed[r])
            if seed not in self.overlays:
                self.overlays[seed] = weather_overlays(self.size, seed)
            weather = WEATHERS[int(self.data.weather[r])]
            out.append(
                overlay_alpha(
                    self.overlays[seed], weather, int(self.data.frame_index[r]), self.size
                )
            )
        return torch.from_numpy(np.stack(out))[:, None]


def alpha_statistics(alpha: torch.Tensor) -> torch.Tensor:
    """(B, 1, H, W) alpha -> (B, S, R) per 64x64 region: mean, mean square and the
    autocorrelation at each of `LAGS`: how dense, how strong, how long and which way."""
    stats = [alpha, alpha * alpha]
    for dy, dx in LAGS:
        stats.append(alpha * torch.roll(alpha, shifts=(dy, dx), dims=(2, 3)))
    pooled = F.avg_pool2d(torch.cat(stats, dim=1), REGION)
    return pooled.flatten(2)


def statistics_loss(drawn: torch.Tensor, truth: torch.Tensor) -> torch.Tensor:
    """L1 between the square roots of the two alphas' statistics (the roots even out
    the scale of a 2 % coverage and its products)."""
    return (
        (
            alpha_statistics(drawn).clamp_min(0).add(1e-6).sqrt()
            - alpha_statistics(truth).add(1e-6).sqrt()
        )
        .abs()
        .mean()
    )


def overlay_colour(
    pictures: torch.Tensor, alpha: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """The overlay's colour as the truth shows it: (B, 3) over the covered pixels, solved from
    picture = background (1 - a) + colour a with a 3x3 median as the background; and (B,) bool,
    whether the frame has an overlay at all."""
    b, c, h, w = pictures.shape
    patches = F.unfold(pictures, 3, padding=1).view(b, c, 9, h, w)
    background = patches.median(dim=2).values
    a = alpha.clamp_min(1e-3)
    colour = ((pictures - background * (1 - a)) / a).clamp(0, 1)
    covered = (alpha > 0).float()
    count = covered.sum(dim=(1, 2, 3))
    mean = (colour * covered).sum(dim=(2, 3)) / count.clamp_min(1)[:, None]
    return mean, count > 0


def train_particles(cfg: ParticlesTrainConfig) -> Path:
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(cfg.seed)
    data = load_particle_data(cfg.data)
    model = Particles(ParticlesConfig(codes=cfg.codes))
    # training only: the state must also say the truth's overlay statistics outright, so the
    # encoder learns to see rain before the renderer can draw it
    readout = torch.nn.Linear(model.config.state_dim, len(LAGS) + 2)
    coder = [p for n, p in model.named_parameters() if not n.startswith(("head", "code_"))]
    opt = torch.optim.AdamW([*coder, *readout.parameters()], lr=cfg.lr, weight_decay=0.0)
    state = out / "state.pt"
    step, spent = resume(state, model=model, readout=readout, opt=opt)
    budget = Budget(cfg.minutes * cfg.coder_share, spent)
    truth_alpha = OverlayTruth(data, data.frames.shape[1])
    overlaid = np.isin(data.weather, [WEATHERS.index("rain"), WEATHERS.index("snow")])
    rng = np.random.default_rng(cfg.seed * 7919 + step)
    log = LossLog(out / "loss.jsonl")

    def checkpoint(step: int) -> None:
        train = {"train": dataclasses.asdict(cfg)}
        save_state(state, step, budget.spent, train, model=model, readout=readout, opt=opt)
        line_plot(out / "loss.png", log.series("shape", "colour", "seen"), "particle coder")

    bar = tqdm(desc="particles: coder", unit="step", initial=step, mininterval=10)
    while not budget.done():
        for g in opt.param_groups:
            g["lr"] = cosine_lr(cfg.lr, min(budget.spent / budget.seconds, 1.0), step, warmup=30)
        rows = balanced_rows(overlaid, rng, cfg.batch)
        pictures = frames_to_tensor(data.frames[rows])
        alpha = truth_alpha(rows)
        states = model.read(pictures)
        noise = torch.randn(cfg.batch, NOISE_CHANNELS, *pictures.shape[-2:])
        drawn, colour = model.overlay(states, noise)
        shape_loss = statistics_loss(drawn, alpha)
        want, has = overlay_colour(pictures, alpha)
        colour_loss = (
            (colour.flatten(1) - want).abs().mean(dim=1) * has
        ).sum() / has.sum().clamp_min(1)
        seen = alpha_statistics(alpha).mean(dim=2).add(1e-6).sqrt()
        seen_loss = (readout(states) - seen).abs().mean()
        loss = shape_loss + 0.1 * colour_loss + seen_loss
        optimizer_step(opt, loss)
        step += 1
        bar.update()
        log.add(step, shape=shape_loss.item(), colour=colour_loss.item(), seen=seen_loss.item())
        bar.set_postfix(
            shape=f"{shape_loss.item():.4f}", colour=f"{colour_loss.item():.3f}", refresh=False
        )
        if step % cfg.checkpoint_every == 0:
            checkpoint(step)
    bar.close()
    checkpoint(step)
    states = read_states(model, data.frames)
    model.set_codebook(fit_codebook(states[::3], cfg.codes, seed=cfg.seed))
    codes = model.nearest(states).numpy()
    model.config = dataclasses.replace(
        model.config, code_weather=label_codes(codes, data.weather, cfg.codes)
    )
    report = {"coder_steps": step, "codes": code_report(model, codes, data)}
    report["head"] = train_head(model, codes, data, load_text_table(cfg.text_table), cfg)
    path = out / "particles.pt"
    save_checkpoint(
        path, model.float().eval(), {"step": step, "train": dataclasses.asdict(cfg)}, half=True
    )
    (out / "report.json").write_text(json.dumps(report, indent=1))
    print(json.dumps(report))
    return path


def label_codes(codes: np.ndarray, weather: np.ndarray, n: int) -> tuple[int, ...]:
    """Per code of `n`, the weather (WEATHERS index) most frames on it show: what the sound
    is told a code means (engine/model/sound_cues.py); 0, clear, where no frame lands."""
    out = []
    for code in range(n):
        mine = weather[codes == code]
        out.append(int(np.bincount(mine, minlength=len(WEATHERS)).argmax()) if len(mine) else 0)
    return tuple(out)


def label_particle_codes(weights: Path, data: str) -> dict:
    """Write `label_codes` into a trained weights folder's particles.pt from the frames of
    `data` (a layer trained before the labels were kept); returns its code report."""
    path = Path(weights) / PARTICLES_FILE
    ckpt = load_payload(path)
    model = load_checkpoint(None, Particles, ParticlesConfig, ckpt)
    frames = load_particle_data(data)
    codes = model.nearest(read_states(model, frames.frames)).numpy()
    labels = label_codes(codes, frames.weather, model.config.codes)
    ckpt["config"]["code_weather"] = list(labels)
    atomic_save(ckpt, path)
    return {"path": str(path), "code_weather": [WEATHERS[w] for w in labels]} | {
        "codes": code_report(model, codes, frames)
    }


def balanced_rows(overlaid: np.ndarray, rng: np.random.Generator, batch: int) -> np.ndarray:
    """Half the batch from frames with an overlay, half from frames without: with a quarter
    of the data overlaid, drawing nothing anywhere would otherwise win before the encoder
    learns to tell rain from a clear sky."""
    half = batch // 2
    return np.concatenate(
        [
            rng.choice(np.nonzero(overlaid)[0], half),
            rng.choice(np.nonzero(~overlaid)[0], batch - half),
        ]
    )


@torch.no_grad()
def read_states(model: Particles, frames: np.ndarray, batch: int = 256) -> torch.Tensor:
    return torch.cat(
        [model.read(frames_to_tensor(frames[i : i + batch])) for i in range(0, len(frames), batch)]
    )


def code_report(model: Particles, codes: np.ndarray, data: ParticleData) -> dict:
    """For each weather, how its frames spread over the codes and the share whose code draws."""
    drawn = model.drawn.numpy()
    out = {}
    for k, name in enumerate(WEATHERS):
        mine = codes[data.weather == k]
        if len(mine):
            out[name] = {
                "frames": int(len(mine)),
                "drawn_share": round(float(drawn[mine].mean()), 4),
                "by_code": np.bincount(mine, minlength=len(drawn)).tolist(),
            }
    out["drawn_codes"] = drawn.tolist()
    return out


def train_head(
    model: Particles,
    codes: np.ndarray,
    data: ParticleData,
    table: dict[str, np.ndarray],
    cfg: ParticlesTrainConfig,
    steps: int = 3000,
    batch: int = 512,
) -> dict:
    """Teacher-forced: row t's code from row t-1's and the sentence typed at t. Episodes
    whose index is a multiple of 5 are held out for the accuracy figures."""
    gen = torch.Generator().manual_seed(cfg.seed)
    first = np.r_[True, data.episode[1:] != data.episode[:-1]]
    rows = np.nonzero(~first)[0]
    dim = model.config.text_dim
    text = np.zeros((len(data.texts), dim), np.float32)
    told = np.zeros(len(data.texts), bool)
    for i, t in enumerate(data.texts):
        if t:
            told[i] = True
            if t in table:
                text[i] = table[t]
    text_t, told_t, codes_t = (
        torch.from_numpy(text),
        torch.from_numpy(told),
        torch.from_numpy(codes),
    )
    held = data.episode[rows] % 5 == 0
    train_rows, test_rows = torch.from_numpy(rows[~held]), torch.from_numpy(rows[held])
    weights = 1.0 + (TOLD_WEIGHT - 1.0) * told_t[train_rows].float()
    params = [p for n, p in model.named_parameters() if n.startswith(("head", "code_"))]
    opt = torch.optim.AdamW(params, lr=3e-3, weight_decay=1e-4)
    for step in tqdm(range(steps), desc="particles: code head", mininterval=10):
        pick = train_rows[torch.multinomial(weights, batch, replacement=True, generator=gen)]
        logits = model.next_code_logits(codes_t[pick - 1], text_t[pick], told_t[pick])
        loss = F.cross_entropy(logits, codes_t[pick])
        for g in opt.param_groups:
            g["lr"] = cosine_lr(3e-3, step / steps)
        optimizer_step(opt, loss)
    with torch.no_grad():
        logits = model.next_code_logits(
            codes_t[test_rows - 1], text_t[test_rows], told_t[test_rows]
        )
    hit = (logits.argmax(dim=1) == codes_t[test_rows]).numpy()
    at_sentence = told_t[test_rows].numpy()
    changed = (codes_t[test_rows] != codes_t[test_rows - 1]).numpy()
    return {
        "steps": steps,
        "heldout_accuracy": round(float(hit.mean()), 4),
        "heldout_accuracy_at_sentences": round(float(hit[at_sentence].mean()), 4),
        "heldout_accuracy_where_the_code_changes": round(float(hit[changed].mean()), 4)
        if changed.any()
        else None,
        "heldout_rows": int(len(hit)),
    }
