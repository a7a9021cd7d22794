"""A typed sentence moved onto the sentences the world model was trained on.

The model learnt what a few hundred training sentences do; a player types anything. A
sentence whose embedding comes close enough to some of them (cosine >= `floor`) is replaced
by a similarity-weighted mean of its `neighbours` nearest, so "give me a downpour" reaches the
model as the rain it knows rather than as a direction it never saw. A sentence close to none
("hello there") is left as it is. The table holds training sentences only (never the eval's
held-out wording), so what the eval measures is still how the runtime handles unseen text.
The table lives beside the weights (`SNAP_FILE`); without it nothing is snapped.

Where the table also names each training sentence's event (`events`), `event_of` says which
event a typed sentence asks for: the event whose prototype (the unit mean of its training
sentences) is nearest, or, for a close rewording of one training sentence (cosine >=
`reworded`: "please stop the rain"), that sentence's own. The nearest single sentence names
the wrong event for a third of the eval's held-out wording ("cue the rainfall" is nearest to
"stop the rain"); the prototypes for a fifth (MODEL.md v23). The scene edit
(engine/model/scene_edit.py) acts on that event, and the sentence is snapped onto that
event's training sentences only, so the world network, the particle head and the edit are
told the same thing. (Handing the network the prototype itself drew a rainbow band after
"make it rain": it knows sentences, not means.)
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
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
    events: np.ndarray | None = None  # (N,) str: each training sentence's event
    # at or above this cosine to a training sentence, a sentence is a rewording of it and
    # asks for its event whatever the prototypes say
    reworded: float = 0.85

    def __post_init__(self) -> None:
        if self.table.ndim != 2 or self.table.shape[1] != TEXT_DIM or not len(self.table):
            raise ValueError(f"a sentence table is (N, {TEXT_DIM}), got {self.table.shape}")
        if not -1.0 <= self.floor <= 1.0:
            raise ValueError("the snap floor is a cosine: between -1 and 1")
        if self.neighbours < 1 or self.temperature <= 0:
            raise ValueError("a snap needs at least one neighbour and a temperature > 0")
        if self.events is not None and len(self.events) != len(self.table):
            raise ValueError("a sentence table's events name one event per sentence")

    def __call__(self, vectors: np.ndarray) -> np.ndarray:
        """(B, TEXT_DIM) unit embeddings -> the same, snapped where a row comes close enough
        (where the table names events: onto the training sentences of the event asked for)."""
        return self.read(vectors)[0]

    def event_of(self, vectors: np.ndarray) -> list[str | None]:
        """(B, TEXT_DIM) unit embeddings -> the event each asks for, None for a sentence close
        to no training sentence (below `floor`) or where the table names no events."""
        return self.read(vectors)[1]

    def read(self, vectors: np.ndarray) -> tuple[np.ndarray, list[str | None]]:
        """(B, TEXT_DIM) unit embeddings -> the snapped embeddings and the events asked for."""
        cosines = vectors @ self.table.T  # (B, N)
        events: list[str | None] = [None] * len(vectors)
        if self.events is not None:
            asked = self._asked(vectors, cosines)
            close_to_any = cosines.max(axis=1) >= self.floor
            events = [str(e) if c else None for e, c in zip(asked, close_to_any, strict=True)]
            cosines = np.where(self.events[None] == asked[:, None], cosines, -np.inf)
        k = min(self.neighbours, len(self.table))
        top = np.argsort(-cosines, axis=1)[:, :k]
        near = np.take_along_axis(cosines, top, axis=1)
        weights = np.exp((near - near[:, :1]) / self.temperature)  # 0 for another event's
        weights /= weights.sum(axis=1, keepdims=True)
        snapped = np.einsum("bk,bkd->bd", weights, self.table[top])
        snapped /= np.linalg.norm(snapped, axis=1, keepdims=True)
        close = near[:, 0] >= self.floor  # to the asked event's own sentences
        return np.where(close[:, None], snapped, vectors).astype(np.float32), events

    @cached_property
    def _prototypes(self) -> tuple[np.ndarray, np.ndarray]:
        """(the event names, (E, TEXT_DIM) the unit mean of each one's training sentences)."""
        assert self.events is not None
        names = np.unique(self.events)
        prototypes = np.stack([self.table[self.events == n].mean(axis=0) for n in names])
        return names, prototypes / np.linalg.norm(prototypes, axis=1, keepdims=True)

    def _asked(self, vectors: np.ndarray, cosines: np.ndarray) -> np.ndarray:
        """(B,) the event of each row's nearest prototype, or of its training sentence where
        it is a rewording of one."""
        assert self.events is not None
        names, prototypes = self._prototypes
        nearest = names[(vectors @ prototypes.T).argmax(axis=1)]
        own = self.events[cosines.argmax(axis=1)]
        return np.where(cosines.max(axis=1) >= self.reworded, own, nearest)

    def save(self, path: str | Path) -> Path:
        path = Path(path)
        arrays: dict[str, np.ndarray] = {
            "table": self.table.astype(np.float16),
            "settings": np.array(
                [self.floor, self.neighbours, self.temperature, self.reworded], np.float64
            ),
        }
        if self.events is not None:
            arrays["events"] = np.asarray(self.events, dtype=str)
        np.savez(path, **arrays)  # type: ignore[arg-type]
        return path

    @classmethod
    def load(cls, path: str | Path) -> SentenceSnap:
        with np.load(path) as saved:
            table = saved["table"].astype(np.float32)
            floor, neighbours, temperature, *rest = saved["settings"].tolist()
            events = saved["events"] if "events" in saved.files else None
        table /= np.linalg.norm(table, axis=1, keepdims=True)  # undo fp16 rounding
        reworded = float(rest[0]) if rest else cls.reworded  # tables before stop 41 hold three
        return cls(table, float(floor), int(neighbours), float(temperature), events, reworded)
