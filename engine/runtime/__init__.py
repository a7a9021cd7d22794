"""Real-time sessions over the trained world model (what the web side calls).

from engine.runtime import World, Action, Prompt
session = World.load().start({"seed": 1, "theme": "frost_valley"})
session.push(Action(keys=("W",)))
chunk = session.next_chunk()   # chunk.video (n,128,128,3) uint8, chunk.audio int16 16 kHz
"""

from .events import Action, AudioIn, Event, EventError, Image, Prompt, parse_event
from .session import Chunk, Session, World

__all__ = [
    "Action",
    "AudioIn",
    "Chunk",
    "Event",
    "EventError",
    "Image",
    "Prompt",
    "Session",
    "World",
    "parse_event",
]
