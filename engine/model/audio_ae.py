"""Audio tokenizer: one frame of audio (800 samples, 16 kHz) <-> a small latent vector.

A 1-D conv encoder/decoder. Trained with a waveform L1 plus a log-spectrogram loss: rain,
wind and fire are noise, whose waveform no deterministic decoder can match sample by sample,
but whose spectrum it can.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

SAMPLES = 800


@dataclass
class AudioAEConfig:
    latent_dim: int = 32
    width: int = 64
    latent_scale: float = 1.0  # divides latents so the generator sees roughly unit variance


class AudioAE(nn.Module):
    def __init__(self, config: AudioAEConfig):
        super().__init__()
        self.config = config
        w = config.width
        # 800 -> 200 -> 50 -> 25 samples, then a linear bottleneck.
        self.encoder = nn.Sequential(
            nn.Conv1d(1, w, 8, stride=4, padding=2), nn.SiLU(),
            nn.Conv1d(w, w, 8, stride=4, padding=2), nn.SiLU(),
            nn.Conv1d(w, w, 4, stride=2, padding=1), nn.SiLU(),
            nn.Flatten(), nn.Linear(w * 25, config.latent_dim),
        )
        self.decoder_in = nn.Linear(config.latent_dim, w * 25)
        self.decoder = nn.Sequential(
            nn.SiLU(),
            nn.ConvTranspose1d(w, w, 4, stride=2, padding=1), nn.SiLU(),
            nn.ConvTranspose1d(w, w, 8, stride=4, padding=2), nn.SiLU(),
            nn.ConvTranspose1d(w, w, 8, stride=4, padding=2), nn.SiLU(),
            nn.Conv1d(w, 1, 7, padding=3),
        )

    def encode(self, audio: torch.Tensor) -> torch.Tensor:
        """(B, 800) float in [-1, 1] -> (B, latent_dim)."""
        return self.encoder(audio.unsqueeze(1)) / self.config.latent_scale

    def decode(self, latents: torch.Tensor) -> torch.Tensor:
        h = self.decoder_in(latents * self.config.latent_scale)
        return self.decoder(h.view(len(latents), self.config.width, 25)).squeeze(1)

    def forward(self, audio: torch.Tensor) -> torch.Tensor:
        return self.decode(self.encode(audio))


def log_spectrogram(audio: torch.Tensor, n_fft: int = 128) -> torch.Tensor:
    window = torch.hann_window(n_fft, device=audio.device)
    spec = torch.stft(audio, n_fft, hop_length=n_fft // 4, window=window, return_complex=True)
    return torch.log(spec.abs() + 1e-4)


def audio_loss(pred: torch.Tensor, target: torch.Tensor, spec_weight: float = 1.0
               ) -> torch.Tensor:
    wave = (pred - target).abs().mean()
    spec = sum((log_spectrogram(pred, n) - log_spectrogram(target, n)).abs().mean()
               for n in (64, 256))
    return wave + spec_weight * spec


def int16_to_float(audio) -> torch.Tensor:
    return torch.as_tensor(audio).float() / 32768.0


def float_to_int16(audio: torch.Tensor):
    return (audio.clamp(-1, 1) * 32767).round().to(torch.int16).cpu().numpy()
