"""An adversarial critic for the conv world model's predicted latents (training only).

A regressor trained on squared error predicts the average of the futures it cannot tell
apart, and its rollouts fade into a haze (engine/MODEL.md, v3 experiments). The critic is
the counterweight Seaweed-APT2 / AAPT use for one-step generators: it is shown the previous
true latent with either the true next latent or the model's prediction (each chain step of an
unrolled window) and the frame's inputs, and learns which is which; the generator is pushed
toward predictions it cannot tell from the truth, i.e. to commit to one sharp future.

Loss: relativistic pairing (RpGAN: each real scored against its own fake) with R1 and R2
gradient penalties on both sides (R3GAN's recipe, which keeps a small GAN from collapsing
without tricks).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from engine.model.world import INPUT_FEATURES


class LatentCritic(nn.Module):
    """Patch logits for (previous latent, candidate next latent, inputs): 16x16 -> 4x4 cells,
    each cell's logit from a ~14x14-cell neighbourhood; the score is their mean."""

    def __init__(self, channels: int = 8, width: int = 64):
        super().__init__()
        self.stem = nn.Conv2d(2 * channels, width, 3, padding=1)
        self.inputs = nn.Linear(INPUT_FEATURES, width)
        self.body = nn.Sequential(
            nn.LeakyReLU(0.2),
            nn.Conv2d(width, width, 3, padding=1),
            nn.LeakyReLU(0.2),
            nn.Conv2d(width, 2 * width, 4, stride=2, padding=1),
            nn.LeakyReLU(0.2),
            nn.Conv2d(2 * width, 2 * width, 4, stride=2, padding=1),
            nn.LeakyReLU(0.2),
            nn.Conv2d(2 * width, 1, 3, padding=1),
        )

    def forward(
        self, previous: torch.Tensor, candidate: torch.Tensor, inputs: torch.Tensor
    ) -> torch.Tensor:
        """(B, C, S, S) x 2 and (B, INPUT_FEATURES) -> (B,) scores."""
        h = self.stem(torch.cat([previous, candidate], dim=1))
        h = h + self.inputs(inputs)[:, :, None, None]
        return self.body(h).mean(dim=(1, 2, 3))


def generator_adversarial_loss(
    critic: LatentCritic,
    previous: torch.Tensor,
    real: torch.Tensor,
    fake: torch.Tensor,
    inputs: torch.Tensor,
) -> torch.Tensor:
    """The generator's side: each fake should score above its own real."""
    return F.softplus(critic(previous, real, inputs) - critic(previous, fake, inputs)).mean()


def critic_loss(
    critic: LatentCritic,
    previous: torch.Tensor,
    real: torch.Tensor,
    fake: torch.Tensor,
    inputs: torch.Tensor,
    gamma: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(loss, the relativistic part alone) of the critic's side, plus gamma/2 times the R1
    (real) and R2 (fake) penalties: the squared norm of the score's gradient at each."""
    real = real.detach().requires_grad_(True)
    fake = fake.detach().requires_grad_(True)
    real_score = critic(previous, real, inputs)
    fake_score = critic(previous, fake, inputs)
    relativistic = F.softplus(fake_score - real_score).mean()
    grad_real, grad_fake = torch.autograd.grad(
        [real_score.sum(), fake_score.sum()], [real, fake], create_graph=True
    )
    penalty = sum(g.pow(2).sum(dim=(1, 2, 3)).mean() for g in (grad_real, grad_fake))
    return relativistic + gamma / 2 * penalty, relativistic
