"""Metric functions (DESIGN.md "Metrics"), pure numpy, tested on cases with known answers."""

from __future__ import annotations

import numpy as np

from engine.sim.constants import FPS, SAMPLE_RATE, SAMPLES_PER_FRAME


def to_float(frames: np.ndarray) -> np.ndarray:
    """uint8 frames -> float64 in [0, 1]; float input is passed through."""
    frames = np.asarray(frames)
    return frames.astype(np.float64) / 255.0 if frames.dtype == np.uint8 else frames.astype(
        np.float64)


def psnr_from_mse(mse: float) -> float:
    return float("inf") if mse <= 0 else float(10 * np.log10(1.0 / mse))


def pooled_psnr(generated: np.ndarray, truth: np.ndarray) -> float:
    """PSNR of the MSE pooled over every pixel of every pair (not a mean of per-frame PSNRs)."""
    return psnr_from_mse(float(np.mean((to_float(generated) - to_float(truth)) ** 2)))


def _gaussian_window(size: int = 11, sigma: float = 1.5) -> np.ndarray:
    x = np.arange(size) - size // 2
    g = np.exp(-(x ** 2) / (2 * sigma ** 2))
    return g / g.sum()


def _blur(img: np.ndarray, g: np.ndarray) -> np.ndarray:
    """Separable 'valid' Gaussian filter over the last two axes."""
    k = len(g)
    h, w = img.shape[-2:]
    out = sum(g[i] * img[..., i:h - k + 1 + i, :] for i in range(k))
    return sum(g[i] * out[..., :, i:w - k + 1 + i] for i in range(k))


def ssim(a: np.ndarray, b: np.ndarray) -> float:
    """Mean SSIM (Wang et al. 2004, 11x11 Gaussian, sigma 1.5) over frames (N, H, W, 3)."""
    x = to_float(a).transpose(0, 3, 1, 2)
    y = to_float(b).transpose(0, 3, 1, 2)
    g = _gaussian_window()
    c1, c2 = 0.01 ** 2, 0.03 ** 2
    mx, my = _blur(x, g), _blur(y, g)
    sxx = _blur(x * x, g) - mx ** 2
    syy = _blur(y * y, g) - my ** 2
    sxy = _blur(x * y, g) - mx * my
    s = ((2 * mx * my + c1) * (2 * sxy + c2)) / ((mx ** 2 + my ** 2 + c1) * (sxx + syy + c2))
    return float(s.mean())


def laplacian_variance(frames: np.ndarray) -> np.ndarray:
    """Per-frame variance of the 4-neighbour Laplacian of luminance (high-frequency energy)."""
    y = luminance(frames)
    lap = (y[:, :-2, 1:-1] + y[:, 2:, 1:-1] + y[:, 1:-1, :-2] + y[:, 1:-1, 2:]
           - 4 * y[:, 1:-1, 1:-1])
    return lap.reshape(len(y), -1).var(axis=1)


def sharpness_ratio(generated: np.ndarray, truth: np.ndarray) -> float:
    """Mean Laplacian variance of generated frames over that of the true frames (1 = as sharp)."""
    return float(laplacian_variance(generated).mean() / max(laplacian_variance(truth).mean(),
                                                           1e-12))


def luminance(frames: np.ndarray) -> np.ndarray:
    f = to_float(frames)
    return f[..., 0] * 0.299 + f[..., 1] * 0.587 + f[..., 2] * 0.114


def brightness_drift(generated: np.ndarray, truth: np.ndarray) -> float:
    """Mean over frames of |mean luminance(gen) - mean luminance(sim)| (luminance in [0, 1])."""
    return float(np.mean(np.abs(luminance(generated).mean(axis=(1, 2))
                                - luminance(truth).mean(axis=(1, 2)))))


def frechet_distance(a: np.ndarray, b: np.ndarray) -> float:
    """Fréchet distance between Gaussians fitted to feature sets a (N, D) and b (M, D)."""
    mu1, mu2 = a.mean(0), b.mean(0)
    s1 = np.atleast_2d(np.cov(a, rowvar=False))
    s2 = np.atleast_2d(np.cov(b, rowvar=False))
    # sqrt(s1 s2) via the symmetric form sqrt(sqrt(s1) s2 sqrt(s1)): same trace, stays real.
    w, v = np.linalg.eigh(s1)
    r1 = (v * np.sqrt(np.clip(w, 0, None))) @ v.T
    m = r1 @ s2 @ r1
    tr_covmean = np.sqrt(np.clip(np.linalg.eigvalsh((m + m.T) / 2), 0, None)).sum()
    return float(((mu1 - mu2) ** 2).sum() + np.trace(s1) + np.trace(s2) - 2 * tr_covmean)


def onset_samples(audio: np.ndarray, hop: int = 80, threshold: float = 4.0) -> np.ndarray:
    """Sample positions where short-time energy jumps `threshold`x above the previous hop's."""
    x = np.asarray(audio, np.float64)
    n = len(x) // hop
    energy = (x[: n * hop].reshape(n, hop) ** 2).mean(1) + 1e-9
    floor = max(energy.mean() * 0.5, 1e-9)
    jumps = np.nonzero((energy[1:] > threshold * energy[:-1]) & (energy[1:] > floor))[0] + 1
    # keep the first hop of each burst
    keep = [j for i, j in enumerate(jumps) if i == 0 or j - jumps[i - 1] > 2]
    return np.asarray(keep, np.int64) * hop


def av_offsets_ms(audio: np.ndarray, step_frames: np.ndarray, window_ms: float = 150.0
                  ) -> list[float]:
    """Offsets (ms) from each step frame's start to the nearest detected audio onset.

    Positive: the sound comes late. Steps with no onset within `window_ms` are left out.
    """
    onsets = onset_samples(audio)
    offsets: list[float] = []
    if len(onsets) == 0:
        return offsets
    for f in step_frames:
        start = f * SAMPLES_PER_FRAME
        d = onsets - start
        best = d[np.argmin(np.abs(d))]
        if abs(best) * 1000 / SAMPLE_RATE <= window_ms:
            offsets.append(float(best * 1000 / SAMPLE_RATE))
    return offsets


def av_sync_ms(audio: np.ndarray, step_frames: np.ndarray, window_ms: float = 150.0
               ) -> float | None:
    """Median of `av_offsets_ms`; None if no step pairs with an onset."""
    offsets = av_offsets_ms(audio, step_frames, window_ms)
    return float(np.median(offsets)) if offsets else None


def frames_to_seconds(frames: int) -> float:
    return frames / FPS


def balanced_accuracy(pred: np.ndarray, target: np.ndarray) -> list[float | None]:
    """Per-class (columns) mean of true-positive and true-negative rates for multi-label
    predictions; None for a class with no positives (its accuracy would be trivially 1)."""
    pred, target = np.asarray(pred, bool), np.asarray(target, bool)
    out: list[float | None] = []
    for c in range(target.shape[1]):
        pos, neg = target[:, c], ~target[:, c]
        if not pos.any():
            out.append(None)
            continue
        tpr = (pred[pos, c]).mean()
        tnr = (~pred[neg, c]).mean() if neg.any() else tpr
        out.append(float((tpr + tnr) / 2))
    return out
