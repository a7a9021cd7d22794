"""Loads the world model once per worker process and opens runtime sessions from world specs."""

import threading
from typing import Any

from django.conf import settings

from engine.runtime.session import World
from engine.sim.constants import FPS, SAMPLES_PER_FRAME
from sessions.images import decode_png

_lock = threading.Lock()
_world: World | None = None


def load_world() -> World:
    """The process's World (weights + text encoder), loaded on first use (seconds, not ms)."""
    global _world
    with _lock:
        if _world is None:
            _world = World.load(
                settings.ENGINE_WEIGHTS_DIR, threads=settings.ENGINE_THREADS, preload_text=True
            )
        return _world


def open_engine_session(spec: dict[str, Any]):
    """A runtime session for a world spec; the world's opening prompt is its first input."""
    world = load_world()
    session = world.start({
        "seed": int(spec["seed"]),
        "theme": spec["theme"],
        "reference_image": decode_png(spec["reference_png"]) if spec.get("reference_png") else None,
    })
    if spec.get("initial_prompt"):
        session.push({"kind": "prompt", "text": spec["initial_prompt"]})
    return session


def engine_info() -> dict[str, Any]:
    world = load_world()
    return {
        "fps": FPS,
        "samples_per_frame": SAMPLES_PER_FRAME,
        "resolution": (world.resolution, world.resolution),
    }
