"""Neural world model: tokenizers (video, audio) and the causal world transformer."""

from .audio_ae import AudioAE, AudioAEConfig
from .checkpoint import load_checkpoint, save_checkpoint
from .video_ae import VideoAE, VideoAEConfig
from .world import WorldModel, WorldModelConfig

__all__ = [
    "AudioAE",
    "AudioAEConfig",
    "VideoAE",
    "VideoAEConfig",
    "WorldModel",
    "WorldModelConfig",
    "load_checkpoint",
    "save_checkpoint",
]
