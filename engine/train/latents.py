"""Encode a generated dataset once into tokenizer latents (the generator trains on these)."""

from __future__ import annotations

import dataclasses
import hashlib
import pickle
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tqdm import tqdm

from engine.data import WindowReader
from engine.model.audio_ae import AudioAE, AudioAEConfig, int16_to_float
from engine.model.checkpoint import atomic_save, load_checkpoint
from engine.model.inputs import input_features_from_labels
from engine.model.text import TextEncoder
from engine.model.video_ae import VideoAE, VideoAEConfig, frames_to_tensor, image_token
from engine.sim.labels import LABEL_DTYPE
from engine.sim.prompts import EVENT_NAMES, training_paraphrases
from engine.sim.themes import THEME_NAMES


@dataclass
class LatentEpisode:
    video: torch.Tensor  # (N, C, 16, 16) float16, normalised
    audio: torch.Tensor  # (N, A) float32
    inputs: torch.Tensor  # (N, 13)
    prompt_rows: list[int]  # frames at which a prompt was typed
    prompt_texts: list[str]
    theme: int
    image: torch.Tensor | None  # (image_dim,) pooled reference latent, or None
    labels: np.ndarray

    def to_plain(self) -> dict[str, Any]:
        """Tensors, lists and numbers only, so `torch.load(weights_only=True)` reads it back
        (the structured label array travels as its raw bytes)."""
        return {
            **dataclasses.asdict(self),
            "labels": torch.from_numpy(np.ascontiguousarray(self.labels).view(np.uint8)),
        }

    @classmethod
    def from_plain(cls, values: dict[str, Any]) -> LatentEpisode:
        return cls(**{**values, "labels": values["labels"].numpy().view(LABEL_DTYPE)})


def tokenizer_fingerprint(folder: str | Path) -> str:
    """Which tokenizers made a latent cache: a hash of their files."""
    folder = Path(folder)
    suffix = "_final.pt" if (folder / "video_ae_final.pt").exists() else ".pt"
    digest = hashlib.sha1()
    for name in ("video_ae", "audio_ae"):
        digest.update((folder / f"{name}{suffix}").read_bytes())
    return digest.hexdigest()


def read_latent_cache(
    cache: Path, fingerprint: str
) -> tuple[list[LatentEpisode], dict[str, np.ndarray]] | None:
    """The cached latents if `cache` holds them for these tokenizers, else None."""
    try:
        saved = torch.load(cache, map_location="cpu", weights_only=True)
    except (FileNotFoundError, pickle.UnpicklingError, RuntimeError):
        return None  # absent, or an older format
    if not isinstance(saved, dict) or saved.get("tokenizers") != fingerprint:
        return None
    return (
        [LatentEpisode.from_plain(e) for e in saved["episodes"]],
        {t: v.numpy() for t, v in saved["text"].items()},
    )


def load_tokenizers(folder: str | Path) -> tuple[VideoAE, AudioAE]:
    """A tokenizer run's `*_final.pt` files, or a shipped weights folder's `*.pt` files."""
    folder = Path(folder)
    suffix = "_final.pt" if (folder / "video_ae_final.pt").exists() else ".pt"
    video = load_checkpoint(folder / f"video_ae{suffix}", VideoAE, VideoAEConfig)
    return video, load_audio_tokenizer(folder)


def load_audio_tokenizer(folder: str | Path) -> AudioAE:
    """The audio tokenizer of a tokenizer run (`audio_ae_final.pt`) or a weights folder."""
    folder = Path(folder)
    final = folder / "audio_ae_final.pt"
    return load_checkpoint(
        final if final.exists() else folder / "audio_ae.pt", AudioAE, AudioAEConfig
    )


def training_text_table() -> dict[str, np.ndarray]:
    """Embeddings of every training paraphrase: all the text data generation can type."""
    texts = sorted({t for event in EVENT_NAMES for t in training_paraphrases(event)})
    return dict(zip(texts, TextEncoder().encode(texts), strict=True))


def training_events(texts: list[str]) -> np.ndarray:
    """(N,) str: the event each training paraphrase asks for."""
    owner = {t: event for event in EVENT_NAMES for t in training_paraphrases(event)}
    return np.array([owner[t] for t in texts])


def save_text_table(path: str | Path) -> Path:
    """Write `training_text_table()` so a machine without the text encoder can train."""
    table = training_text_table()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez(path, texts=np.array(list(table)), vectors=np.stack(list(table.values())))
    return path


def load_text_table(path: str | Path) -> dict[str, np.ndarray]:
    with np.load(path) as saved:
        return dict(zip(saved["texts"].tolist(), saved["vectors"], strict=True))


class TableText(TextEncoder):
    """A TextEncoder stand-in that looks sentences up in a `save_text_table` file, for machines
    without the text encoder (a GPU lease); it knows exactly the training paraphrases."""

    def __init__(self, path: str | Path):
        super().__init__()
        self.table = load_text_table(path)

    def encode(self, texts: list[str]) -> np.ndarray:
        return np.stack([self.table[t] for t in texts])


@torch.inference_mode()
def encode_dataset(
    data: str | Path,
    tokenizers: str | Path,
    cache: Path,
    device: torch.device | str = "cpu",
    text_table: str | Path | None = None,
) -> tuple[list[LatentEpisode], dict[str, np.ndarray]]:
    """Latents of every episode (cached in `cache`), encoded on `device`, kept on the CPU.

    Sentences are embedded with the text encoder, or looked up in a `save_text_table` file.
    """
    fingerprint = tokenizer_fingerprint(tokenizers)
    cached = read_latent_cache(cache, fingerprint)
    if cached is not None:
        return cached
    video_ae, audio_ae = load_tokenizers(tokenizers)
    video_ae, audio_ae = video_ae.to(device), audio_ae.to(device)
    reader = WindowReader(data, window=1)
    episodes = []
    texts: set[str] = set()
    for e in tqdm(range(reader.episodes), desc="encode latents", mininterval=5):
        ep = reader.episode(e)
        z = torch.cat(
            [
                video_ae.encode(frames_to_tensor(ep.frames[i : i + 256]).to(device)).cpu()
                for i in range(0, len(ep.frames), 256)
            ]
        )
        a = audio_ae.encode(int16_to_float(ep.audio).to(device)).cpu()
        rows = [i for i, t in enumerate(ep.prompts) if t]
        texts.update(ep.prompts[i] for i in rows)
        image = image_token(video_ae, ep.reference).cpu() if ep.has_reference else None
        episodes.append(
            LatentEpisode(
                video=z.half(),
                audio=a,
                inputs=torch.from_numpy(input_features_from_labels(ep.labels)),
                prompt_rows=rows,
                prompt_texts=[ep.prompts[i] for i in rows],
                theme=THEME_NAMES.index(ep.theme),
                image=image,
                labels=ep.labels,
            )
        )
    ordered = sorted(texts)
    if text_table is not None:
        known = load_text_table(text_table)
        missing = [t for t in ordered if t not in known]
        if missing:
            raise KeyError(
                f"{len(missing)} sentences are not in {text_table}, e.g. {missing[0]!r}"
                "; rebuild it with python -m engine.train text-table"
            )
        table = {t: known[t] for t in ordered}
    else:
        table = dict(zip(ordered, TextEncoder().encode(ordered), strict=True))
    atomic_save(
        {
            "tokenizers": fingerprint,
            "episodes": [e.to_plain() for e in episodes],
            "text": {t: torch.from_numpy(np.asarray(v)) for t, v in table.items()},
        },
        cache,
    )
    return episodes, table
