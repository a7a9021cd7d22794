"""The reference world: procedural, deterministic, first-person, with synchronized audio.

world = SimWorld(WorldSpec(seed=1, theme="frost_valley"))
frame = world.step(FrameInputs.hold("W", prompts=("make it rain",)))
frame.rgb, frame.audio, frame.labels
"""

from .constants import FPS, SAMPLE_RATE, SAMPLES_PER_FRAME
from .labels import LABEL_DTYPE, LABEL_FIELDS
from .prompts import EVENT_NAMES, resolve
from .script import EpisodeScript, ScriptError, load_script, load_scripts, parse_script, run_script
from .themes import THEME_NAMES
from .world import AudioInput, FrameInputs, SimFrame, SimWorld, WorldSpec

__all__ = [
    "EVENT_NAMES",
    "FPS",
    "LABEL_DTYPE",
    "LABEL_FIELDS",
    "SAMPLES_PER_FRAME",
    "SAMPLE_RATE",
    "THEME_NAMES",
    "AudioInput",
    "EpisodeScript",
    "FrameInputs",
    "ScriptError",
    "SimFrame",
    "SimWorld",
    "WorldSpec",
    "load_script",
    "load_scripts",
    "parse_script",
    "resolve",
    "run_script",
]
