"""Writing one shard: episodes streamed straight into memory-mapped .npy files in a temp
folder, which is renamed into place only when complete (so a crash never leaves a half shard
that looks finished)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np

from engine.sim.constants import SAMPLES_PER_FRAME
from engine.sim.labels import LABEL_DTYPE
from engine.sim.prompts import resolve
from engine.sim.reference import REFERENCE_SIZE
from engine.sim.script import EpisodeScript

from .agent import DEFAULT_IMAGE_RATE, DEFAULT_PROMPT_RATE
from .episode import PlayedFrame, play_episode
from .layout import TMP_SUFFIX, shard_name


def write_shard(root: Path, index: int, seeds: list[int], frames: int, resolution: int,
                themes: tuple[str, ...] | None = None,
                prompt_rate: float = DEFAULT_PROMPT_RATE,
                image_rate: float = DEFAULT_IMAGE_RATE) -> Path:
    final = root / shard_name(index)
    tmp = root / (shard_name(index) + TMP_SUFFIX)
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)
    rows = len(seeds) * frames
    open_memmap = np.lib.format.open_memmap
    video = open_memmap(tmp / "frames.npy", "w+", np.uint8, (rows, resolution, resolution, 3))
    audio = open_memmap(tmp / "audio.npy", "w+", np.int16, (rows, SAMPLES_PER_FRAME))
    labels = open_memmap(tmp / "labels.npy", "w+", LABEL_DTYPE, (rows,))
    episodes, prompts, references, reference_rows = [], [], [], []
    row = 0
    for seed in seeds:
        first = row
        for item in play_episode(seed, frames, resolution, themes, prompt_rate, image_rate):
            if isinstance(item, EpisodeScript):
                episodes.append({"seed": seed, "theme": item.theme, "row": first,
                                 "frames": frames, "script": item.to_json()})
                continue
            assert isinstance(item, PlayedFrame)
            frame = item.frame
            video[row], audio[row], labels[row] = frame.rgb, frame.audio, frame.labels
            for text in item.prompts:
                resolved = resolve(text)
                prompts.append({"row": row, "text": text, "event": resolved.event,
                                "heldout": resolved.heldout})
            if item.reference is not None:
                references.append(item.reference)
                reference_rows.append({"row": row})
            row += 1
    refs = (np.stack(references) if references
            else np.zeros((0, REFERENCE_SIZE, REFERENCE_SIZE, 3), np.uint8))
    np.save(tmp / "references.npy", refs)
    for array in (video, audio, labels):
        array.flush()
    del video, audio, labels
    meta = {"episodes": episodes, "prompts": prompts, "references": reference_rows,
            "resolution": resolution, "frames_per_episode": frames}
    (tmp / "meta.json").write_text(json.dumps(meta))
    if final.exists():
        shutil.rmtree(final)
    tmp.rename(final)
    return final
