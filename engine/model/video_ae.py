"""Video tokenizer: a conv autoencoder, 128x128x3 frames <-> a 16x16xC continuous latent.

Downsample 8 with a small channel count: DESIGN.md's calibration found spatial latent
resolution matters more than channels. Fully convolutional, so it trains on crops.
Latents are normalised with per-channel statistics measured after training (`latent_mean`,
`latent_std`), so the generator sees roughly unit-variance tokens.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch
from torch import nn


@dataclass
class VideoAEConfig:
    latent_channels: int = 8
    stem: int = 16  # full-resolution width: kept small, full-res convs dominate CPU cost
    widths: tuple[int, ...] = (32, 64, 96)  # one stride-2 stage each: 3 stages = downsample 8
    res_from: int = 1  # residual blocks only from this stage on (low resolution is cheap)
    latent_mean: list[float] = field(default_factory=lambda: [0.0] * 8)
    latent_std: list[float] = field(default_factory=lambda: [1.0] * 8)

    @property
    def downsample(self) -> int:
        return 2 ** len(self.widths)


class ResBlock(nn.Module):
    def __init__(self, width: int):
        super().__init__()
        self.conv1 = nn.Conv2d(width, width, 3, padding=1)
        self.conv2 = nn.Conv2d(width, width, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.conv2(torch.nn.functional.silu(self.conv1(torch.nn.functional.silu(x))))


class VideoAE(nn.Module):
    mean: torch.Tensor  # latent normalisation buffers (registered in __init__)
    std: torch.Tensor

    def __init__(self, config: VideoAEConfig):
        super().__init__()
        self.config = config
        w = config.widths
        enc: list[nn.Module] = [nn.Conv2d(3, config.stem, 3, padding=1)]
        prev = config.stem
        for i, width in enumerate(w):
            enc += [nn.Conv2d(prev, width, 4, stride=2, padding=1), nn.SiLU()]
            enc += [ResBlock(width)] if i >= config.res_from else []
            prev = width
        enc += [nn.Conv2d(prev, config.latent_channels, 1)]
        self.encoder = nn.Sequential(*enc)
        dec: list[nn.Module] = [
            nn.Conv2d(config.latent_channels, w[-1], 3, padding=1),
            ResBlock(w[-1]),
        ]
        prev = w[-1]
        outs = [*reversed(w[:-1]), config.stem]
        for i, width in enumerate(outs):
            dec += [
                nn.Upsample(scale_factor=2, mode="nearest"),
                nn.Conv2d(prev, width, 3, padding=1),
                nn.SiLU(),
            ]
            dec += [ResBlock(width)] if len(w) - 2 - i >= config.res_from else []
            prev = width
        dec += [nn.Conv2d(prev, 3, 3, padding=1)]
        self.decoder = nn.Sequential(*dec)
        c = config.latent_channels
        self.register_buffer(
            "mean", torch.tensor(config.latent_mean).view(1, c, 1, 1), persistent=False
        )
        self.register_buffer(
            "std", torch.tensor(config.latent_std).view(1, c, 1, 1), persistent=False
        )

    def encode(self, images: torch.Tensor) -> torch.Tensor:
        """(B, 3, H, W) in [0, 1] -> normalised latent (B, C, H/8, W/8)."""
        return (self.encoder(images * 2 - 1) - self.mean) / self.std

    def decode(self, latents: torch.Tensor) -> torch.Tensor:
        """Normalised latent -> (B, 3, H, W) in [0, 1] (unclamped during training)."""
        return (self.decoder(latents * self.std + self.mean) + 1) / 2

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.decode(self.encode(images))


class PatchDiscriminator(nn.Module):
    """A small PatchGAN critic: the offline route to sharper reconstructions (no LPIPS here)."""

    def __init__(self, width: int = 32):
        super().__init__()
        self.net = nn.Sequential(
            nn.Conv2d(3, width, 4, 2, 1),
            nn.LeakyReLU(0.2),
            nn.Conv2d(width, width * 2, 4, 2, 1),
            nn.LeakyReLU(0.2),
            nn.Conv2d(width * 2, width * 2, 3, 1, 1),
            nn.LeakyReLU(0.2),
            nn.Conv2d(width * 2, 1, 3, 1, 1),
        )

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.net(images * 2 - 1)


def frames_to_tensor(frames) -> torch.Tensor:
    """(B, H, W, 3) uint8 numpy/tensor -> (B, 3, H, W) float in [0, 1]."""
    x = torch.as_tensor(frames)
    return x.permute(0, 3, 1, 2).float().div_(255.0)


def tensor_to_frames(images: torch.Tensor) -> np.ndarray:
    """(B, 3, H, W) float -> (B, H, W, 3) uint8 numpy."""
    x = images.clamp(0, 1).mul(255).round_().to(torch.uint8)
    return x.permute(0, 2, 3, 1).contiguous().cpu().numpy()


def image_token(video_ae: VideoAE, image) -> torch.Tensor:
    """A reference picture (H, W, 3) uint8 -> (C * 16,) latent pooled to 4x4 (any size works)."""
    x = frames_to_tensor(image[None]).to(video_ae.mean.device)
    x = torch.nn.functional.interpolate(x, size=(64, 64), mode="bilinear", align_corners=False)
    z = video_ae.encode(x)  # (1, C, 8, 8)
    return torch.nn.functional.adaptive_avg_pool2d(z, 4).flatten()
