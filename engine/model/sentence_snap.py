"""A typed sentence moved onto the sentences the world model was trained on.

The model learnt what a few hundred training sentences do; a player types anything. A
sentence whose embedding comes close enough to some of them (cosine >= `floor`) is replaced
by a similarity-weighted mean of its `neighbours` nearest, so "give me a downpour" reaches the
model as the rain it knows rather than as a direction it never saw. A sentence close to none
("hello there") is left as it is. The table holds training sentences only (never the eval's
held-out wording), so what the eval measures is still how the runtime handles unseen text.
The table lives beside the weights (`SNAP_FILE`); without it nothing is snapped.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .text import TEXT_DIM

SNAP_FILE = "sentences.npz"


@dataclass(frozen=True)
class SentenceSnap:
    table: np.ndarray  # (N, TEXT_DIM) unit embeddings of the training sentences
    floor: float = 0.45  # below this cosine to every one of them, a sentence is left alone
    neighbours: int = 3
    temperature: float = 0.05  # softmax temperature over the neighbours' cosines

    def __post_init__(self) -> None:
        if self.table.ndim != 2 or self.table.shape[1] != TEXT_DIM or not len(self.table):
            raise ValueError(f"a sentence table is (N, {TEXT_DIM}), got {self.table.shape}")
        if not -1.0 <= self.floor <= 1.0:
            raise ValueError("the snap floor is a cosine: between -1 and 1")
        if self.neighbours < 1 or self.temperature <= 0:
            raise ValueError("a snap needs at least one neighbour and a temperature > 0")

    def __call__(self, vectors: np.ndarray) -> np.ndarray:
        """(B, TEXT_DIM) unit embeddings -> the same, snapped where a row comes close enough."""
        cosines = vectors @ self.table.T  # (B, N)
        k = min(self.neighbours, len(self.table))
        top = np.argsort(-cosines, axis=1)[:, :k]
        near = np.take_along_axis(cosines, top, axis=1)
        weights = np.exp((near - near[:, :1]) / self.temperature)
        weights /= weights.sum(axis=1, keepdims=True)
        snapped = np.einsum("bk,bkd->bd", weights, self.table[top])
        snapped /= np.linalg.norm(snapped, axis=1, keepdims=True)
        close = near[:, 0] >= self.floor
        return np.where(close[:, None], snapped, vectors).astype(np.float32)

    def save(self, path: str | Path) -> Path:
        path = Path(path)
        np.savez(
            path,
            table=self.table.astype(np.float16),
            settings=np.array([self.floor, self.neighbours, self.temperature], np.float64),
        )
        return path

    @classmethod
    def load(cls, path: str | Path) -> SentenceSnap:
        with np.load(path) as saved:
            table = saved["table"].astype(np.float32)
            floor, neighbours, temperature = saved["settings"].tolist()
        table /= np.linalg.norm(table, axis=1, keepdims=True)  # undo fp16 rounding
        return cls(table, float(floor), int(neighbours), float(temperature))
