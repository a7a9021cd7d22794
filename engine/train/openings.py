"""Build the opening keyframes a session starts from (engine.runtime.openings loads them).

Rendering spawn points needs the simulator, which the runtime never imports: this runs once,
when weights are shipped (engine.train.ship), never in a play session.
"""

from __future__ import annotations

import numpy as np
import torch

from engine.model.audio_ae import AudioAE, int16_to_float
from engine.model.video_ae import VideoAE, frames_to_tensor
from engine.runtime.openings import OPENING_SEED_BASE, Openings
from engine.sim import FrameInputs, SimWorld, WorldSpec
from engine.spec import THEME_NAMES


@torch.inference_mode()
def build_openings(
    video_ae: VideoAE, audio_ae: AudioAE, context: int, per_theme: int = 8, resolution: int = 128
) -> Openings:
    """Render `per_theme` spawn points of every theme (idle player) and encode them, with the
    other three quarters of a full turn seen from where each ends."""
    video, audio, around = {}, {}, {}
    for t, theme in enumerate(THEME_NAMES):
        zs, als, views = [], [], []
        for k in range(per_theme):
            world = SimWorld(WorldSpec(OPENING_SEED_BASE + 100 * t + k, theme, resolution))
            steps = [world.step(FrameInputs()) for _ in range(context)]
            zs.append(video_ae.encode(frames_to_tensor(np.stack([s.rgb for s in steps]))))
            als.append(audio_ae.encode(int16_to_float(np.stack([s.audio for s in steps]))))
            views.append(video_ae.encode(frames_to_tensor(world.look_around())))
        video[theme], audio[theme] = torch.stack(zs), torch.stack(als)
        around[theme] = torch.stack(views)
    return Openings(video, audio, around)
