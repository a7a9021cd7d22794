"""Shared training plumbing: devices, threads, a wall-clock budget, loss logs."""

from __future__ import annotations

import json
import time
from pathlib import Path

import torch


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
