"""Random training windows from generated shards, read through memory maps.

    reader = WindowReader("data/sim", window=16)
    window = reader.sample(rng)            # one Window (never crosses an episode boundary)
    batch = reader.batch(32, rng)          # dict of stacked arrays, ready for torch.from_numpy

Only the rows a window touches are paged in, so a dataset larger than memory trains fine.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from engine.sim.reference import REFERENCE_SIZE

from .layout import finished_shards


@dataclass
class Window:
    frames: np.ndarray  # (T, H, W, 3) uint8
    audio: np.ndarray  # (T, 800) int16
    keys: np.ndarray  # (T,) uint16 held-key bitmask
    camera: np.ndarray  # (T, 2) float32 yaw/pitch deltas (radians)
    audio_features: np.ndarray  # (T, 2) float32 loudness, onset
    events: np.ndarray  # (T,) int16 prompt event id fired at that frame, -1 none
    prompts: list[str]  # (T,) prompt text typed at that frame, "" none
    labels: np.ndarray  # (T,) LABEL_DTYPE
    reference: np.ndarray  # (64, 64, 3) uint8 reference image in effect at the last frame
    has_reference: bool
    episode: int  # global episode index
    start: int  # first frame's index within the episode
    seed: int
    theme: str


@dataclass
class _Shard:
    frames: np.ndarray
    audio: np.ndarray
    labels: np.ndarray
    references: np.ndarray
    reference_rows: np.ndarray  # (K,) row each reference takes effect
    prompt_text: dict[int, str]
    episodes: list[dict]


class WindowReader:
    def __init__(self, root: str | Path, window: int = 16, stride: int = 1):
        self.root = Path(root)
        self.window = window
        self.shards: list[_Shard] = []
        starts = []  # (shard, episode-in-shard, first row, start within episode)
        self.episode_index: list[tuple[int, int]] = []
        for shard_id, path in enumerate(finished_shards(self.root)):
            meta = json.loads((path / "meta.json").read_text())
            shard = _Shard(
                frames=np.load(path / "frames.npy", mmap_mode="r"),
                audio=np.load(path / "audio.npy", mmap_mode="r"),
                labels=np.load(path / "labels.npy", mmap_mode="r"),
                references=np.load(path / "references.npy", mmap_mode="r"),
                reference_rows=np.array([r["row"] for r in meta["references"]], np.int64),
                prompt_text={p["row"]: p["text"] for p in meta["prompts"]},
                episodes=meta["episodes"],
            )
            self.shards.append(shard)
            for ep_id, ep in enumerate(meta["episodes"]):
                self.episode_index.append((shard_id, ep_id))
                for s in range(0, ep["frames"] - window + 1, stride):
                    starts.append((shard_id, ep_id, ep["row"] + s, s))
        if not starts:
            raise FileNotFoundError(f"no finished shards with {window}-frame windows in {root}")
        self.starts = np.asarray(starts, np.int64)
        self._episode_number = {key: i for i, key in enumerate(self.episode_index)}

    def __len__(self) -> int:
        return len(self.starts)

    @property
    def episodes(self) -> int:
        return len(self.episode_index)

    def window_at(self, index: int) -> Window:
        shard_id, ep_id, row, start = (int(v) for v in self.starts[index])
        return self._read(shard_id, ep_id, row, start, self.window)

    def sample(self, rng: np.random.Generator) -> Window:
        return self.window_at(int(rng.integers(len(self.starts))))

    def batch(self, size: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
        """`size` random windows stacked; rows sorted per shard for sequential page-ins."""
        picks = np.sort(rng.choice(len(self.starts), size, replace=size > len(self.starts)))
        windows = [self.window_at(int(i)) for i in picks]
        order = rng.permutation(size)
        windows = [windows[i] for i in order]
        out = {name: np.stack([getattr(w, name) for w in windows])
               for name in ("frames", "audio", "keys", "camera", "audio_features", "events",
                            "labels", "reference")}
        out["has_reference"] = np.array([w.has_reference for w in windows])
        out["episode"] = np.array([w.episode for w in windows])
        out["start"] = np.array([w.start for w in windows])
        out["prompts"] = np.array([w.prompts for w in windows], dtype=object)
        return out

    def episode(self, index: int) -> Window:
        """A whole episode as one window."""
        shard_id, ep_id = self.episode_index[index]
        ep = self.shards[shard_id].episodes[ep_id]
        return self._read(shard_id, ep_id, ep["row"], 0, ep["frames"])

    def _read(self, shard_id: int, ep_id: int, row: int, start: int, length: int) -> Window:
        shard = self.shards[shard_id]
        ep = shard.episodes[ep_id]
        rows = slice(row, row + length)
        labels = np.array(shard.labels[rows])
        texts = [shard.prompt_text.get(r, "") for r in range(row, row + length)]
        events = labels["event"].astype(np.int16)  # -1 also for text that named no event
        in_effect = np.nonzero((shard.reference_rows <= row + length - 1)
                               & (shard.reference_rows >= ep["row"]))[0]
        if in_effect.size:
            reference, has_reference = np.array(shard.references[in_effect[-1]]), True
        else:
            reference = np.zeros((REFERENCE_SIZE, REFERENCE_SIZE, 3), np.uint8)
            has_reference = False
        return Window(
            frames=np.array(shard.frames[rows]),
            audio=np.array(shard.audio[rows]),
            keys=labels["keys"].copy(),
            camera=np.stack([labels["yaw_delta"], labels["pitch_delta"]], 1),
            audio_features=np.stack([labels["audio_loudness"],
                                     labels["audio_onset"].astype(np.float32)], 1),
            events=events,
            prompts=texts,
            labels=labels,
            reference=reference,
            has_reference=has_reference,
            episode=self._episode_number[(shard_id, ep_id)],
            start=start,
            seed=ep["seed"],
            theme=ep["theme"],
        )
