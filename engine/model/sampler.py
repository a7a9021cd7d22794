"""The flow-matching sampler, one object for training (rollout context) and inference.

A frame is drawn from noise at level s = 0 to data at s = 1 (x_s = s * x + (1 - s) * noise,
the model predicts the velocity x - noise) in `steps` equal Euler steps, diffusers-style:

    sampler = EulerSampler(steps)
    for level in sampler.levels():
        x = sampler.step(x, model_velocity(x, level))
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class EulerSampler:
    steps: int

    def levels(self) -> list[float]:
        """The flow level of the input at each step: 0, 1/steps, ..., (steps - 1) / steps."""
        return [k / self.steps for k in range(self.steps)]

    def step(self, x: torch.Tensor, velocity: torch.Tensor) -> torch.Tensor:
        return x + velocity / self.steps
