"""Sound cues: what a session knows of its own sound that its last few sounds do not show.

A footstep sounds once every `STRIDE_FRAMES` frames of walking, and on the first frame of a
walk. The sound head hears only the last 4 sounds, so it cannot count to 8: before the cue,
the model's footsteps fell at chance (balanced accuracy about 0.5 against the simulator's).
The session knows which keys were held, so it keeps the walk's rhythm itself (`StrideClock`,
the simulator's own rule for a walk nothing blocks) and tells the sound head when a step
falls (engine/MODEL.md, v30). Training computes the same cue from the data's keys
(`stride_cues`), so the head learns it with the simulator's collisions as noise.

Rain is the other sound the head loses: each sound it plays is a little less rain than the
one before, and after a few frames nothing it reads says rain (MODEL.md, v9). The session's
particle layer keeps the weather the picture shows as a state that does not wash out
(engine/model/particles.py), so it tells the head that too (`weather_cues`); training
tells it the data's weather. A model reads the first `ConvWorldConfig.sound_cues` of them.
"""

from __future__ import annotations

import numpy as np
import torch

from engine.spec import STRIDE, WALK_SPEED

STRIDE_FRAMES = round(STRIDE / WALK_SPEED)  # 8 frames of walk a footstep
STRIDE_CUES = 2  # a step falls on this frame; one fell on the frame before (a grain lasts ~2)
RAIN, SNOW = 1, 2  # engine.sim.constants.WEATHERS indices
SOUND_CUES = STRIDE_CUES + 2  # then: it rains, it snows (the weather the picture shows)
MOVE_FEATURES = slice(0, 4)  # the W, A, S, D bits of engine.model.inputs.input_features


class StrideClock:
    """The walk's rhythm from the keys alone: `step` is fed one frame's input features and
    says whether a footstep falls on it (the simulator's rule for a walk nothing blocks:
    engine/sim/world.py `_move`)."""

    def __init__(self) -> None:
        # frames of walk since the last step, as the simulator counts it: standing holds a
        # full stride, so a walk's first frame steps and leaves one frame over (its second
        # step falls 7 frames later, the rest every 8)
        self.walked = STRIDE_FRAMES
        self.stepped_before = False

    def step(self, inputs: np.ndarray | torch.Tensor) -> torch.Tensor:
        """One frame's (INPUT_FEATURES,) inputs -> its (STRIDE_CUES,) cue."""
        keys = np.asarray(inputs, np.float32).reshape(-1)[MOVE_FEATURES]
        forward, strafe = keys[0] - keys[2], keys[3] - keys[1]  # W - S, D - A
        now = False
        if forward or strafe:
            self.walked += 1
            if self.walked >= STRIDE_FRAMES:
                self.walked -= STRIDE_FRAMES
                now = True
        else:
            self.walked = STRIDE_FRAMES
        cue = torch.tensor([float(now), float(self.stepped_before)])
        self.stepped_before = now
        return cue

    def advance(self, inputs: np.ndarray) -> None:
        """Keep the rhythm over frames a session did not generate ((n, INPUT_FEATURES), oldest
        first: a primed session's known frames), so its first footstep falls in step."""
        for row in inputs:
            self.step(row)


def stride_cues(inputs: np.ndarray | torch.Tensor) -> torch.Tensor:
    """(N, INPUT_FEATURES) one episode's inputs from its first frame -> (N, STRIDE_CUES)."""
    clock = StrideClock()
    rows = np.asarray(inputs, np.float32)
    if not len(rows):
        return torch.zeros(0, STRIDE_CUES)
    return torch.stack([clock.step(row) for row in rows])


def weather_cues(weather: np.ndarray | torch.Tensor | int) -> torch.Tensor:
    """WEATHERS indices (N,) (or one) -> (N, 2) (or (2,)): it rains, it snows."""
    w = torch.as_tensor(weather)
    return torch.stack([w == RAIN, w == SNOW], dim=-1).float()


def sound_cues(inputs: np.ndarray | torch.Tensor, weather: np.ndarray) -> torch.Tensor:
    """One episode's (N, INPUT_FEATURES) inputs and (N,) weather -> (N, SOUND_CUES)."""
    return torch.cat([stride_cues(inputs), weather_cues(np.asarray(weather, np.int64))], dim=1)
