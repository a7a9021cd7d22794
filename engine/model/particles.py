"""Particles: the rain streaks and snowflakes no 16x16x8 latent carries (engine/MODEL.md, v24).

A streak is one pixel wide and lands somewhere new every frame, so the video tokenizer keeps
at most a faint tint of it (`engine/contact_sheets/v23_prompt_ceiling.png`). What a player
needs is not where each streak is but that it rains, how densely and in which direction. That
is a frame-level **particle state**: a small full-resolution encoder reads it from a picture
(`read`), k-means codes of it are what the world predicts (`next_code`: from the last frame's
code and the sentence typed now), and a renderer draws it as an alpha overlay from fresh noise
(`composite`): thresholded learnt filters of the noise make streaks or flakes, their density,
length and slant set by the state, their colour too.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

PARTICLES_FILE = "particles.pt"  # beside the other weights; a folder without it draws none
NOISE_CHANNELS = 2
SHARPNESS = 10.0  # a softened threshold: far below it a mark fades out, it never dies


@dataclass
class ParticlesConfig:
    state_dim: int = 4
    codes: int = 8  # k-means particle states the world predicts
    filters: int = 8  # learnt streak / flake shapes
    kernel: int = 9  # their size in pixels: a rain streak is 8 px tall
    width: int = 32  # the encoder's channels
    text_dim: int = 384
    hidden: int = 64  # the code head's
    # per code, the weather (engine.sim WEATHERS index) most training frames on it show; ()
    # unknown (written after training: `engine.train.particles.label_codes`)
    code_weather: tuple[int, ...] = ()


class Particles(nn.Module):
    codebook: torch.Tensor  # (codes, state_dim), set by `set_codebook` after training
    drawn: torch.Tensor  # (codes,) bool: the codes whose overlay draws anything

    def __init__(self, config: ParticlesConfig):
        super().__init__()
        self.config = config
        w, d, f = config.width, config.state_dim, config.filters
        self.encoder = nn.Sequential(
            nn.Conv2d(3, w // 2, 4, stride=2, padding=1),  # full resolution in: 1-px streaks
            nn.SiLU(),
            nn.Conv2d(w // 2, w, 4, stride=2, padding=1),
            nn.SiLU(),
            nn.Conv2d(w, w, 4, stride=2, padding=1),
            nn.SiLU(),
        )
        self.state_out = nn.Linear(2 * w, d)
        self.shapes = nn.Conv2d(NOISE_CHANNELS, f, config.kernel, bias=False)
        styled = nn.Linear(32, 2 * f + 3)  # thresholds, gains, colour
        with torch.no_grad():  # marks start sparse: 2.3 % of pixels pass a threshold of 2
            styled.bias[:f] = 2.0
        self.style = nn.Sequential(nn.Linear(d, 32), nn.SiLU(), styled)
        k, h = config.codes, config.hidden
        self.code_embedding = nn.Embedding(k, 16)
        self.head = nn.Sequential(
            nn.Linear(16 + config.text_dim + 1, h),
            nn.SiLU(),
            nn.Linear(h, h),
            nn.SiLU(),
            nn.Linear(h, k),
        )
        self.register_buffer("codebook", torch.zeros(k, d))
        self.register_buffer("drawn", torch.zeros(k, dtype=torch.bool))

    def read(self, pictures: torch.Tensor) -> torch.Tensor:
        """(B, 3, H, W) in [0, 1] -> (B, state_dim): the particle state each picture shows.
        The encoder sees what a 3x3 median removes (streaks and flakes, little of the place):
        from the picture itself it learnt the weather several times slower."""
        b, c, h, w = pictures.shape
        median = F.unfold(pictures, 3, padding=1).view(b, c, 9, h, w).median(dim=2).values
        h = self.encoder((pictures - median) * 4)
        pooled = torch.cat([h.mean(dim=(2, 3)), h.amax(dim=(2, 3))], dim=1)
        return torch.tanh(self.state_out(pooled))

    def nearest(self, states: torch.Tensor) -> torch.Tensor:
        """(B, state_dim) -> (B,) the nearest code of each state."""
        return torch.cdist(states, self.codebook).argmin(dim=1)

    def overlay(
        self, states: torch.Tensor, noise: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """States (B, state_dim) and noise (B, NOISE_CHANNELS, H, W) -> the overlay's alpha
        (B, 1, H, W) in [0, 1] and its colour (B, 3, 1, 1) in [0, 1]."""
        f = self.config.filters
        style = self.style(states)
        threshold, gain = style[:, :f, None, None], F.softplus(style[:, f : 2 * f, None, None])
        marks = F.softplus(SHARPNESS * (self._filtered(noise) - threshold)) / SHARPNESS * gain
        alpha = marks.sum(dim=1, keepdim=True).clamp(0.0, 1.0)
        return alpha, torch.sigmoid(style[:, 2 * f :, None, None])

    def _filtered(self, noise: torch.Tensor) -> torch.Tensor:
        """The noise through each unit-norm shape filter: unit variance whatever the shape, so
        a threshold counts in standard deviations and sets how sparse the marks are."""
        weight = self.shapes.weight
        weight = weight / weight.flatten(1).norm(dim=1).clamp_min(1e-8)[:, None, None, None]
        return F.conv2d(noise, weight, padding=self.config.kernel // 2)

    def composite(
        self, pictures: torch.Tensor, codes: torch.Tensor, generator: torch.Generator | None = None
    ) -> torch.Tensor:
        """Pictures (B, 3, H, W) with each one's particle code (B,) drawn over them; codes that
        draw nothing cost nothing."""
        if not bool(self.drawn[codes].any()):
            return pictures
        b, _, h, w = pictures.shape
        noise = torch.randn(b, NOISE_CHANNELS, h, w, generator=generator).to(pictures)
        alpha, colour = self.overlay(self.codebook[codes], noise)
        alpha = alpha * self.drawn[codes].view(b, 1, 1, 1)
        return pictures * (1 - alpha) + colour * alpha

    def next_code_logits(
        self, previous: torch.Tensor, text: torch.Tensor, told: torch.Tensor
    ) -> torch.Tensor:
        """The next frame's particle code logits (B, codes) from the last frame's code (B,),
        the sentence typed now (B, text_dim; zeros if none) and whether one was (B,)."""
        x = torch.cat([self.code_embedding(previous), text, told.float()[:, None]], dim=1)
        return self.head(x)

    def next_code(self, previous: int, text: torch.Tensor | None) -> int:
        """The code a session shows next: the head's most likely one."""
        told = torch.tensor([text is not None])
        row = torch.zeros(1, self.config.text_dim) if text is None else text.float().view(1, -1)
        logits = self.next_code_logits(torch.tensor([previous]), row, told)
        return int(logits.argmax(dim=1))

    def weather_of(self, code: int) -> int:
        """The weather a particle code shows (a WEATHERS index; 0, clear, where unknown)."""
        known = self.config.code_weather
        return int(known[code]) if 0 <= code < len(known) else 0

    @property
    def rest_code(self) -> int:
        """The code of a clear sky (a session's first): the first code that draws nothing."""
        quiet = torch.nonzero(~self.drawn)
        return int(quiet[0]) if len(quiet) else 0

    def set_codebook(self, codebook: torch.Tensor, noise_seed: int = 0) -> None:
        """Store the k-means codes and which of them draw anything (mean alpha over a fixed
        noise at least 1e-3)."""
        self.codebook.copy_(codebook)
        gen = torch.Generator().manual_seed(noise_seed)
        noise = torch.randn(len(codebook), NOISE_CHANNELS, 64, 64, generator=gen)
        with torch.no_grad():
            alpha, _ = self.overlay(codebook, noise)
        self.drawn.copy_(alpha.mean(dim=(1, 2, 3)) >= 1e-3)
