"""Audio tokenizer: one frame of audio (800 samples, 16 kHz) <-> a small latent vector.

A 1-D conv encoder/decoder. Rain, wind and fire are noise made fresh for every world: no
32-number code per 800 samples carries their waveform, only their spectrum. With
`texture=True` the decoder therefore writes two signals that are summed for the player:
a *coherent* part trained on the waveform (the best guess, sample by sample: drones, calls,
the predictable part of every sound) and a *texture* part trained only so that the sum has the
true spectrum (the hiss and crackle the waveform loss would otherwise silence).
Without it (older weights) one output is trained on waveform L1 plus log-spectrogram.
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
    texture: bool = False  # decoder writes coherent + texture parts (see the module docstring)


class AudioAE(nn.Module):
    def __init__(self, config: AudioAEConfig):
        super().__init__()
        self.config = config
        w = config.width
        # 800 -> 200 -> 50 -> 25 samples, then a linear bottleneck.
        self.encoder = nn.Sequential(
            nn.Conv1d(1, w, 8, stride=4, padding=2),
            nn.SiLU(),
            nn.Conv1d(w, w, 8, stride=4, padding=2),
            nn.SiLU(),
            nn.Conv1d(w, w, 4, stride=2, padding=1),
            nn.SiLU(),
            nn.Flatten(),
            nn.Linear(w * 25, config.latent_dim),
        )
        self.decoder_in = nn.Linear(config.latent_dim, w * 25)
        self.decoder = nn.Sequential(
            nn.SiLU(),
            nn.ConvTranspose1d(w, w, 4, stride=2, padding=1),
            nn.SiLU(),
            nn.ConvTranspose1d(w, w, 8, stride=4, padding=2),
            nn.SiLU(),
            nn.ConvTranspose1d(w, w, 8, stride=4, padding=2),
            nn.SiLU(),
            nn.Conv1d(w, 2 if config.texture else 1, 7, padding=3),
        )

    def encode(self, audio: torch.Tensor) -> torch.Tensor:
        """(B, 800) float in [-1, 1] -> (B, latent_dim)."""
        return self.encoder(audio.unsqueeze(1)) / self.config.latent_scale

    def decode_parts(self, latents: torch.Tensor) -> torch.Tensor:
        """(B, latent_dim) -> (B, parts, 800): [coherent] or [coherent, texture]."""
        h = self.decoder_in(latents * self.config.latent_scale)
        return self.decoder(h.view(len(latents), self.config.width, 25))

    def decode(self, latents: torch.Tensor) -> torch.Tensor:
        """What the player hears: (B, 800), the parts summed."""
        return self.decode_parts(latents).sum(dim=1)

    def forward(self, audio: torch.Tensor) -> torch.Tensor:
        return self.decode(self.encode(audio))


def log_spectrogram(audio: torch.Tensor, n_fft: int = 128) -> torch.Tensor:
    return torch.log(stft(audio, n_fft).abs() + 1e-4)


def audio_loss(pred: torch.Tensor, target: torch.Tensor, spec_weight: float = 1.0) -> torch.Tensor:
    wave = (pred - target).abs().mean()
    spec = sum(
        (log_spectrogram(pred, n) - log_spectrogram(target, n)).abs().mean() for n in (64, 256)
    )
    return wave + spec_weight * spec


def texture_loss(
    parts: torch.Tensor,
    target: torch.Tensor,
    wave_weight: float = 1.0,
    complex_weight: float = 1.0,
    spec_weight: float = 0.5,
) -> dict[str, torch.Tensor]:
    """Losses of a texture decoder's (B, 2, 800) output: the coherent part by waveform (MSE
    relative to the signal's power, i.e. 1 / SNR, plus a complex-STFT L1 that weighs every
    frequency as the spectrum does), and the sum, with the coherent part held fixed, by
    log-spectrogram L1 only. Keys: total, wave, complex, spec."""
    coherent, texture = parts[:, 0], parts[:, 1]
    wave = ((coherent - target) ** 2).mean() / (target**2).mean().clamp(min=1e-8)
    comp = torch.stack([(stft(coherent, n) - stft(target, n)).abs().mean() for n in (64, 256)])
    heard = coherent.detach() + texture
    spec = torch.stack(
        [(log_spectrogram(heard, n) - log_spectrogram(target, n)).abs().mean() for n in (64, 256)]
    )
    comp, spec = comp.sum(), spec.sum()
    total = wave_weight * wave + complex_weight * comp + spec_weight * spec
    return {"total": total, "wave": wave, "complex": comp, "spec": spec}


def stft(audio: torch.Tensor, n_fft: int) -> torch.Tensor:
    window = torch.hann_window(n_fft, device=audio.device)
    return torch.stft(audio, n_fft, hop_length=n_fft // 4, window=window, return_complex=True)


def int16_to_float(audio) -> torch.Tensor:
    return torch.as_tensor(audio).float() / 32768.0


def float_to_int16(audio: torch.Tensor):
    return (audio.clamp(-1, 1) * 32767).round().to(torch.int16).cpu().numpy()
