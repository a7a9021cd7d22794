"""A typed sentence moved onto the sentences the world model was trained on.

The model learnt what a few hundred training sentences do; a player types anything. A
sentence whose embedding comes close enough to some of them (cosine >= `floor`) is replaced
by a similarity-weighted mean of its `neighbours` nearest, so "give me a downpour" reaches the
model as the rain it knows rather than as a direction it never saw. A sentence close to none
("hello there") is left as it is. The table holds training sentences only (never the eval's
held-out wording), so what the eval measures is still how the runtime handles unseen text.
The table lives beside the weights (`SNAP_FILE`); without it nothing is snapped.

Where the table also names each sentence's event (`events`), the event is chosen first, by
its prototype (the unit mean of its training sentences), and the sentence is moved onto its
nearest training sentences of that event only. The text encoder puts "cue the rainfall"
nearest to "stop the rain"; the mean of ten ways of asking for rain is harder to confuse with
the mean of the ways of stopping it (MODEL.md v23: the event a held-out sentence reaches,
0.74 -> 0.82 of all 66 held-out paraphrases). A close rewording of one training sentence
(cosine >= `reworded`) keeps that sentence's event instead: "please stop the rain" is
"stop the rain", whose event's prototype ("clear": stopping rain, snow or fog) is a diffuse
mean nearer to the rain prototype. Handing the model the prototype itself reached the same
events but drew a rainbow-like band after "make it rain": the network knows sentences, not
means.
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
    events: np.ndarray | None = None  # (N,) int: each sentence's event (prototype snap)
    # with events: at or above this cosine to a training sentence, a sentence is a rewording
    # of it ("please stop the rain") and keeps its event whatever the prototypes say
    reworded: float = 0.85

    def __post_init__(self) -> None:
        if self.table.ndim != 2 or self.table.shape[1] != TEXT_DIM or not len(self.table):
            raise ValueError(f"a sentence table is (N, {TEXT_DIM}), got {self.table.shape}")
        if self.events is not None and self.events.shape != (len(self.table),):
            raise ValueError(f"one event per table row: {len(self.table)}, got {self.events.shape}")
        if not -1.0 <= self.floor <= 1.0:
            raise ValueError("the snap floor is a cosine: between -1 and 1")
        if self.neighbours < 1 or self.temperature <= 0:
            raise ValueError("a snap needs at least one neighbour and a temperature > 0")

    def __call__(self, vectors: np.ndarray) -> np.ndarray:
        """(B, TEXT_DIM) unit embeddings -> the same, snapped where a row comes close enough."""
        cosines = vectors @ self.table.T  # (B, N)
        close = cosines.max(axis=1) >= self.floor
        if self.events is not None:  # only the sentences of the nearest event's prototype
            event = (vectors @ self.prototypes().T).argmax(axis=1)
            own = self.events[cosines.argmax(axis=1)]
            event = np.where(cosines.max(axis=1) >= self.reworded, own, event)
            cosines = np.where(self.events[None] == event[:, None], cosines, -np.inf)
        k = min(self.neighbours, len(self.table))
        top = np.argsort(-cosines, axis=1)[:, :k]
        near = np.take_along_axis(cosines, top, axis=1)
        weights = np.exp((near - near[:, :1]) / self.temperature)  # 0 for another event's
        weights /= weights.sum(axis=1, keepdims=True)
        snapped = np.einsum("bk,bkd->bd", weights, self.table[top])
        snapped /= np.linalg.norm(snapped, axis=1, keepdims=True)
        return np.where(close[:, None], snapped, vectors).astype(np.float32)

    def prototypes(self) -> np.ndarray:
        """(E, TEXT_DIM) the unit mean of each event's sentences (rows by event id; an id no
        sentence has gets a zero row, which no sentence is nearest to)."""
        assert self.events is not None
        sums = np.zeros((int(self.events.max()) + 1, self.table.shape[1]), np.float64)
        np.add.at(sums, self.events, self.table)
        norms = np.linalg.norm(sums, axis=1, keepdims=True)
        return (sums / np.maximum(norms, 1e-12)).astype(np.float32)

    def save(self, path: str | Path) -> Path:
        path = Path(path)
        arrays: dict[str, np.ndarray] = {
            "table": self.table.astype(np.float16),
            "settings": np.array(
                [self.floor, self.neighbours, self.temperature, self.reworded], np.float64
            ),
        }
        if self.events is not None:
            arrays["events"] = self.events.astype(np.int64)
        np.savez(path, **arrays)  # type: ignore[arg-type]
        return path

    @classmethod
    def load(cls, path: str | Path) -> SentenceSnap:
        with np.load(path) as saved:
            table = saved["table"].astype(np.float32)
            floor, neighbours, temperature, *rest = saved["settings"].tolist()
            events = saved["events"] if "events" in saved.files else None
        table /= np.linalg.norm(table, axis=1, keepdims=True)  # undo fp16 rounding
        reworded = float(rest[0]) if rest else cls.reworded  # files before v23 hold three
        return cls(table, float(floor), int(neighbours), float(temperature), events, reworded)
