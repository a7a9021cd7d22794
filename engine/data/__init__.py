"""Training data from the simulator: sharded episodes on disk and a memory-mapped reader."""

from .generate import GenerateConfig, generate
from .layout import HELDOUT_SEED_BASE
from .reader import Window, WindowReader

__all__ = ["HELDOUT_SEED_BASE", "GenerateConfig", "Window", "WindowReader", "generate"]
