"""Shared training plumbing: devices, a wall-clock budget, resumable state, loss logs, lr."""

from __future__ import annotations

import dataclasses
import json
import math
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from engine.model.checkpoint import atomic_save, load_payload, save_checkpoint


def pick_device(name: str = "auto") -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


class LossLog:
    """Append-only JSONL of {step, name: value}; survives resumes."""

    def __init__(self, path: Path):
        self.path = path
        self.rows: list[dict] = []
        if path.exists():
            self.rows = [json.loads(line) for line in path.read_text().splitlines() if line]

    def add(self, step: int, **values: float) -> None:
        row = {"step": step, **{k: float(v) for k, v in values.items()}}
        self.rows.append(row)
        with self.path.open("a") as f:
            f.write(json.dumps(row) + "\n")

    def series(self, *names: str) -> dict[str, list[tuple[float, float]]]:
        return {n: [(r["step"], r[n]) for r in self.rows if n in r] for n in names}


class Budget:
    """Wall-clock budget that carries over resumes (`spent` is stored in checkpoints)."""

    def __init__(self, minutes: float, spent: float = 0.0):
        self.seconds = minutes * 60
        self.start = time.monotonic() - spent

    @property
    def spent(self) -> float:
        return time.monotonic() - self.start

    def done(self) -> bool:
        return self.spent >= self.seconds


def resume(path: Path, **parts: Any) -> tuple[int, float]:
    """Load model/optimizer states saved under these names; (step, seconds spent), or (0, 0)."""
    if not path.exists():
        return 0, 0.0
    ckpt = load_payload(path)
    for name, part in parts.items():
        part.load_state_dict(ckpt[name])
    return ckpt["step"], ckpt["spent"]


def save_state(
    path: Path, step: int, spent: float, extra: dict | None = None, **parts: Any
) -> None:
    """The counterpart of `resume`: named state dicts plus step and time spent, atomically."""
    atomic_save(
        {
            **{name: part.state_dict() for name, part in parts.items()},
            "step": step,
            "spent": spent,
            **(extra or {}),
        },
        path,
    )


def cached(path: Path, build: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """What `build` makes, saved at `path` the first time and read back from it after (a
    resumed run does not simulate and encode its data again)."""
    if path.exists():
        return load_payload(path)
    made = build()
    torch.save(made, path)
    return made


class Throughput:
    """Steps and target frames per second of a training loop, plus peak GPU memory: printed as
    one JSON line ({"throughput": ...}) so a GPU lease's log says how busy the device was."""

    def __init__(self, device: torch.device, frames_per_step: int):
        self.device, self.frames_per_step = device, frames_per_step
        self.steps, self.start = 0, time.monotonic()
        if device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(device)

    def tick(self) -> None:
        self.steps += 1

    def report(self) -> dict[str, float]:
        seconds = max(time.monotonic() - self.start, 1e-9)
        figures = {
            "steps": self.steps,
            "seconds": round(seconds, 1),
            "steps_per_s": round(self.steps / seconds, 3),
            "frames_per_s": round(self.steps * self.frames_per_step / seconds, 1),
        }
        if self.device.type == "cuda":
            figures["peak_gpu_gib"] = round(torch.cuda.max_memory_allocated(self.device) / 2**30, 2)
        print(json.dumps({"throughput": figures}), flush=True)
        return figures


def cosine_lr(base: float, frac: float, step: int = 0, warmup: int = 0) -> float:
    """Linear warm-up over `warmup` steps, then cosine decay to 10% over the budget fraction."""
    ramp = min(1.0, (step + 1) / warmup) if warmup else 1.0
    return base * ramp * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * frac)))


def optimizer_step(
    opt: torch.optim.Optimizer, loss: torch.Tensor, clip: Iterable[torch.nn.Parameter] | None = None
) -> None:
    """One update from `loss`; with `clip`, those parameters' gradient norm is capped at 1."""
    opt.zero_grad(set_to_none=True)
    loss.backward()
    if clip is not None:
        torch.nn.utils.clip_grad_norm_(clip, 1.0)
    opt.step()


@dataclass
class HeadTrainConfig:
    """What every small head trained by `fit_rows` is configured by (the scene edit's and the
    depth head's runs); a stage's config subclasses it with its own defaults and fields."""

    out: str = "runs/head"
    weights: str = "engine/weights"  # the tokenizer and code model the head is trained for
    init: str | None = None  # the head's weights to warm-start from (the shipped ones, say)
    episodes: int = 60
    frames: int = 300
    minutes: float = 10.0
    batch: int = 64
    lr: float = 2e-3
    seed: int = 0
    checkpoint_every: int = 200


@dataclass
class RowFit:
    """How `fit_rows` trains a head: batches of `batch` rows drawn from the training rows,
    AdamW at `lr` (cosine, 50 warm-up steps) for `minutes`, resumable from `out/state.pt`,
    the loss logged as `name` and plotted to `out/loss.png`."""

    out: Path
    name: str
    title: str
    minutes: float
    lr: float
    batch: int
    seed: int
    checkpoint_every: int
    train: dict  # the run's config, stored with every checkpoint

    @classmethod
    def of(cls, cfg: HeadTrainConfig, name: str, title: str) -> RowFit:
        """From a head's training config."""
        return cls(
            out=Path(cfg.out),
            name=name,
            title=title,
            minutes=cfg.minutes,
            lr=cfg.lr,
            batch=cfg.batch,
            seed=cfg.seed,
            checkpoint_every=cfg.checkpoint_every,
            train=dataclasses.asdict(cfg),
        )


def save_head(
    out: Path, name: str, model: torch.nn.Module, cfg: HeadTrainConfig, step: int, report: dict
) -> Path:
    """A trained head's end of run: `out/name` (fp16, with its step and config) and its
    report, written to `out/report.json` and printed as one JSON line."""
    path = out / name
    save_checkpoint(path, model.eval(), {"step": step, "train": dataclasses.asdict(cfg)}, half=True)
    (out / "report.json").write_text(json.dumps(report, indent=1))
    print(json.dumps(report))
    return path


def fit_rows(
    model: torch.nn.Module,
    rows: torch.Tensor,
    loss_of: Callable[[torch.Tensor], torch.Tensor],
    fit: RowFit,
) -> int:
    """Train `model` on `loss_of(batch rows)` until the budget is spent; the steps taken."""
    from tqdm import tqdm

    from .plots import line_plot

    opt = torch.optim.AdamW(model.parameters(), lr=fit.lr, weight_decay=0.0)
    state = fit.out / "state.pt"
    step, spent = resume(state, model=model, opt=opt)
    budget = Budget(fit.minutes, spent)
    gen = torch.Generator().manual_seed(fit.seed * 7919 + step)
    log = LossLog(fit.out / "loss.jsonl")

    def checkpoint(step: int) -> None:
        save_state(state, step, budget.spent, {"train": fit.train}, model=model, opt=opt)
        line_plot(fit.out / "loss.png", log.series(fit.name), fit.title)

    bar = tqdm(desc=fit.title, unit="step", initial=step, mininterval=10)
    while not budget.done():
        for g in opt.param_groups:
            g["lr"] = cosine_lr(fit.lr, min(budget.spent / budget.seconds, 1.0), step, warmup=50)
        loss = loss_of(rows[torch.randint(len(rows), (fit.batch,), generator=gen)])
        optimizer_step(opt, loss)
        step += 1
        bar.update()
        log.add(step, **{fit.name: loss.item()})
        bar.set_postfix({fit.name: f"{loss.item():.4f}"}, refresh=False)
        if step % fit.checkpoint_every == 0:
            checkpoint(step)
    bar.close()
    checkpoint(step)
    return step
