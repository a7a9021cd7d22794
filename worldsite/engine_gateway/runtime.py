"""The process's world model, loaded once, and runtime sessions opened from EngineSpecs.

Importing this module loads torch and the model code; import it where a session is played or
rendered (engine workers, Celery jobs), not in views.
"""

import threading
from typing import Any

from django.conf import settings

from engine.runtime import Session, World
from worldsite.engine_gateway.constants import FPS, SAMPLES_PER_FRAME
from worldsite.engine_gateway.pictures import decode_png
from worldsite.engine_gateway.world_spec import EngineSpec

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


def open_engine_session(spec: EngineSpec | dict[str, Any]) -> Session:
    """A runtime session for a world spec; the world's opening prompt is its first input."""
    world = load_world()
    picture = spec.get("reference_png")
    session = world.start(
        {
            "seed": int(spec["seed"]),
            "theme": spec["theme"],
            "reference_image": decode_png(picture) if picture else None,
        }
    )
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
