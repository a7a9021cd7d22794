"""Summaries of a generated dataset: size, episodes, label and event distributions."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import numpy as np

from engine.sim.constants import CREATURE_MOODS, FPS, TIMES_OF_DAY, WEATHERS
from engine.sim.themes import THEME_NAMES

from .layout import directory_bytes, finished_shards


def dataset_stats(root: Path) -> dict:
    shards = finished_shards(root)
    frames = episodes = 0
    weather: Counter[str] = Counter()
    time_of_day: Counter[str] = Counter()
    moods: Counter[str] = Counter()
    themes: Counter[str] = Counter()
    events: Counter = Counter()
    resolution = None
    fire = rainbow = steps = 0
    for path in shards:
        meta = json.loads((path / "meta.json").read_text())
        labels = np.load(path / "labels.npy", mmap_mode="r")
        resolution = meta["resolution"]
        episodes += len(meta["episodes"])
        frames += len(labels)
        weather.update(WEATHERS[i] for i in labels["weather"])
        time_of_day.update(TIMES_OF_DAY[i] for i in labels["time_of_day"])
        moods.update(CREATURE_MOODS[i] for i in labels["creature_mood"])
        themes.update(THEME_NAMES[i] for i in labels["theme"])
        events.update(p["event"] or "(none)" for p in meta["prompts"])
        fire += int(labels["fire_present"].sum())
        rainbow += int(labels["rainbow"].sum())
        steps += int(labels["step_onset"].sum())
    size = directory_bytes(root) if root.exists() else 0
    return {
        "root": str(root), "shards": len(shards), "episodes": episodes, "frames": frames,
        "resolution": resolution, "hours": round(frames / FPS / 3600, 3),
        "bytes": size, "gib": round(size / 2**30, 3),
        "bytes_per_frame": round(size / frames) if frames else None,
        "weather": dict(weather), "time_of_day": dict(time_of_day),
        "creature_mood": dict(moods), "theme": dict(themes), "prompt_events": dict(events),
        "fire_frames": fire, "rainbow_frames": rainbow, "step_onsets": steps,
    }
