"""How much of the simulator's audio any per-frame latent can carry, and how well a tokenizer does.

    python -m engine.train audio-study --data data/v2 --heldout data/heldout [--weights DIR]

The simulator's sound (engine/sim/audio.py) is a sum of 3-s loops and one-shot grains, all made
per world from its seed: a drone of two sines (few numbers per frame), low-passed noise beds
(ambient bed < 400 Hz, wind < 700 Hz, fire roar < 250 Hz), bright rain hiss (> 2.5 kHz) with
drops, fire crackle (random noise bursts) and noise-based footstep grains. On a held-out world
every noise sample is new, so a code of D numbers per 800-sample frame can at best carry about
D/2 frequency bins of it. The bounds below say what that leaves: the SNR of keeping the best
D-dimensional linear code (PCA fitted on training frames) and of keeping everything below the
frequency D numbers can describe (D / 2 rfft bins, a brick-wall low-pass).
"""

from __future__ import annotations

import numpy as np
import torch

from engine.model.audio_ae import AudioAE, int16_to_float, log_spectrogram
from engine.sim.constants import SAMPLE_RATE, SAMPLES_PER_FRAME

from .tokenizers import FramePool


def all_audio(root: str, limit: int | None = None) -> np.ndarray:
    """Every audio row of a data set as float (N, 800), in order."""
    rows = np.concatenate([np.asarray(a) for a in FramePool(root).audio])
    return int16_to_float(rows[:limit]).numpy()


def snr_db(recon: np.ndarray, truth: np.ndarray) -> float:
    """The eval's audio_ae_snr_db: truth power over error power, pooled over all samples."""
    return float(10 * np.log10(np.mean(truth**2) / max(np.mean((recon - truth) ** 2), 1e-12)))


def log_spectral_distance(recon: np.ndarray, truth: np.ndarray, n_fft: int = 256) -> float:
    """RMS over bins of the log-power difference in dB, averaged over STFT frames (what the
    ear compares; phase-blind). Silent bins are floored at -80 dB of full scale."""

    def power_db(x: np.ndarray) -> torch.Tensor:
        spec = log_spectrogram(torch.as_tensor(x.reshape(-1), dtype=torch.float32), n_fft)
        return 20 / np.log(10) * spec.clamp(min=np.log(1e-4))

    diff = power_db(recon) - power_db(truth)
    return float(diff.pow(2).mean(dim=0).sqrt().mean())


def pca_bound(train: np.ndarray, test: np.ndarray, dims: int) -> float:
    """SNR of the best `dims`-dimensional linear code fitted on training frames."""
    mean = train.mean(0)
    _, _, vt = np.linalg.svd(train - mean, full_matrices=False)
    basis = vt[:dims]
    recon = (test - mean) @ basis.T @ basis + mean
    return snr_db(recon, test)


def lowpass_bound(test: np.ndarray, dims: int) -> float:
    """SNR of keeping the lowest dims / 2 rfft bins of every frame (dims real numbers)."""
    spec = np.fft.rfft(test, axis=1)
    spec[:, dims // 2 :] = 0
    return snr_db(np.fft.irfft(spec, SAMPLES_PER_FRAME, axis=1), test)


def band_energy(test: np.ndarray, edges_hz: tuple[float, ...]) -> dict[str, float]:
    """Share of the held-out audio's energy in each frequency band."""
    power = np.abs(np.fft.rfft(test, axis=1)) ** 2
    freqs = np.fft.rfftfreq(SAMPLES_PER_FRAME, 1 / SAMPLE_RATE)
    total = power.sum()
    bounds = (0.0, *edges_hz, SAMPLE_RATE / 2 + 1)
    return {
        f"{int(lo)}-{int(hi)} Hz": round(
            float(power[:, (freqs >= lo) & (freqs < hi)].sum() / total), 3
        )
        for lo, hi in zip(bounds[:-1], bounds[1:], strict=True)
    }


def tokenizer_figures(model: AudioAE, test: np.ndarray) -> dict[str, float]:
    """SNR, log-spectral distance and the best-gain SNR (phase match) of what a tokenizer
    plays (all parts summed: what the eval's audio_ae_snr_db scores), and for a texture
    decoder the same of its coherent part alone."""
    with torch.inference_mode():
        parts = torch.cat(
            [
                model.decode_parts(model.encode(torch.as_tensor(test[i : i + 512])))
                for i in range(0, len(test), 512)
            ]
        ).numpy()
    out = _figures(parts.sum(axis=1), test)
    if parts.shape[1] > 1:
        out.update({f"coherent_{k}": v for k, v in _figures(parts[:, 0], test).items()})
    return out


def _figures(recon: np.ndarray, test: np.ndarray) -> dict[str, float]:
    gain = float((recon * test).sum() / max((recon**2).sum(), 1e-12))
    return {
        "snr_db": round(snr_db(recon, test), 2),
        "lsd_db": round(log_spectral_distance(recon, test), 2),
        "best_gain": round(gain, 3),
        "best_gain_snr_db": round(snr_db(gain * recon, test), 2),
        "rms_ratio": round(float(np.sqrt(np.mean(recon**2) / np.mean(test**2))), 3),
    }


def study(train_root: str, heldout_root: str, models: dict[str, AudioAE]) -> dict:
    train = all_audio(train_root, limit=6000)
    test = all_audio(heldout_root)
    silence = np.zeros_like(test)
    out: dict = {
        "heldout_frames": len(test),
        "band_energy": band_energy(test, (250.0, 400.0, 700.0, 2500.0)),
        "silence": {"snr_db": 0.0, "lsd_db": round(log_spectral_distance(silence, test), 2)},
    }
    for dims in (32, 64, 128):
        out[f"bound_pca_{dims}_snr_db"] = round(pca_bound(train, test, dims), 2)
        out[f"bound_lowpass_{dims}_snr_db"] = round(lowpass_bound(test, dims), 2)
    for name, model in models.items():
        out[name] = tokenizer_figures(model.eval(), test)
    return out
