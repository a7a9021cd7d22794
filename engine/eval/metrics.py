"""Metric functions (DESIGN.md "Metrics"), pure numpy, tested on cases with known answers."""

from __future__ import annotations

import numpy as np

from engine.sim.constants import SAMPLE_RATE, SAMPLES_PER_FRAME


def to_float(frames: np.ndarray) -> np.ndarray:
    """uint8 frames -> float64 in [0, 1]; float input is passed through."""
    frames = np.asarray(frames)
    return (
        frames.astype(np.float64) / 255.0 if frames.dtype == np.uint8 else frames.astype(np.float64)
    )


def psnr_from_mse(mse: float) -> float:
    return float("inf") if mse <= 0 else float(10 * np.log10(1.0 / mse))


def pooled_psnr(generated: np.ndarray, truth: np.ndarray) -> float:
    """PSNR of the MSE pooled over every pixel of every pair (not a mean of per-frame PSNRs)."""
    return psnr_from_mse(float(np.mean((to_float(generated) - to_float(truth)) ** 2)))


def _gaussian_window(size: int = 11, sigma: float = 1.5) -> np.ndarray:
    x = np.arange(size) - size // 2
    g = np.exp(-(x**2) / (2 * sigma**2))
    return g / g.sum()


def _blur(img: np.ndarray, g: np.ndarray) -> np.ndarray:
    """Separable 'valid' Gaussian filter over the last two axes."""
    k = len(g)
    h, w = img.shape[-2:]
    out = sum(g[i] * img[..., i : h - k + 1 + i, :] for i in range(k))
    return sum(g[i] * out[..., :, i : w - k + 1 + i] for i in range(k))


def ssim(a: np.ndarray, b: np.ndarray) -> float:
    """Mean SSIM (Wang et al. 2004, 11x11 Gaussian, sigma 1.5) over frames (N, H, W, 3)."""
    x = to_float(a).transpose(0, 3, 1, 2)
    y = to_float(b).transpose(0, 3, 1, 2)
    g = _gaussian_window()
    c1, c2 = 0.01**2, 0.03**2
    mx, my = _blur(x, g), _blur(y, g)
    sxx = _blur(x * x, g) - mx**2
    syy = _blur(y * y, g) - my**2
    sxy = _blur(x * y, g) - mx * my
    s = ((2 * mx * my + c1) * (2 * sxy + c2)) / ((mx**2 + my**2 + c1) * (sxx + syy + c2))
    return float(s.mean())


def laplacian_variance(frames: np.ndarray) -> np.ndarray:
    """Per-frame variance of the 4-neighbour Laplacian of luminance (high-frequency energy)."""
    y = luminance(frames)
    lap = y[:, :-2, 1:-1] + y[:, 2:, 1:-1] + y[:, 1:-1, :-2] + y[:, 1:-1, 2:] - 4 * y[:, 1:-1, 1:-1]
    return lap.reshape(len(y), -1).var(axis=1)


def sharpness_ratio(generated: np.ndarray, truth: np.ndarray) -> float:
    """Mean Laplacian variance of generated frames over that of the true frames (1 = as sharp)."""
    return float(
        laplacian_variance(generated).mean() / max(laplacian_variance(truth).mean(), 1e-12)
    )


def luminance(frames: np.ndarray) -> np.ndarray:
    f = to_float(frames)
    return f[..., 0] * 0.299 + f[..., 1] * 0.587 + f[..., 2] * 0.114


def brightness_drift(generated: np.ndarray, truth: np.ndarray) -> float:
    """Mean over frames of |mean luminance(gen) - mean luminance(sim)| (luminance in [0, 1])."""
    return float(
        np.mean(np.abs(luminance(generated).mean(axis=(1, 2)) - luminance(truth).mean(axis=(1, 2))))
    )


def colour_spread_ratio(generated: np.ndarray, truth: np.ndarray) -> float:
    """Mean per-frame spread of pixel values (standard deviation over the picture, per colour
    channel) of a rollout over the simulator's: about 1 when the picture holds as many colours
    as the world, toward 0 when it dissolves into one colour field."""

    def spread(frames: np.ndarray) -> float:
        return float(to_float(frames).std(axis=(1, 2)).mean())

    return spread(generated) / max(spread(truth), 1e-8)


def flicker_ratio(generated: np.ndarray, truth: np.ndarray) -> float:
    """Mean absolute frame-to-frame pixel change of a rollout over the simulator's, same
    inputs: about 1 when the picture moves as the world does, far above 1 when it boils
    (noise redrawn every frame), below 1 when it freezes."""

    def change(frames: np.ndarray) -> float:
        f = to_float(frames)
        return float(np.abs(f[1:] - f[:-1]).mean())

    return change(generated) / max(change(truth), 1e-8)


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


def onset_envelope(audio: np.ndarray, hop: int = 80) -> np.ndarray:
    """Positive jumps of log short-time energy per hop (a spectral-flux-like onset strength)."""
    x = np.asarray(audio, np.float64)
    n = len(x) // hop
    energy = np.log((x[: n * hop].reshape(n, hop) ** 2).mean(1) + 1e-8)
    return np.maximum(np.diff(energy, prepend=energy[:1]), 0.0)


def step_impulses(step_frames: np.ndarray, frames: int, hop: int = 80) -> np.ndarray:
    """An impulse train at the hops where each footstep's sound should start."""
    out = np.zeros(frames * SAMPLES_PER_FRAME // hop)
    idx = (np.asarray(step_frames, np.int64) * SAMPLES_PER_FRAME) // hop
    out[idx[idx < len(out)]] = 1.0
    return out


def _lagged_correlation(envelope: np.ndarray, impulses: np.ndarray, lags: np.ndarray) -> np.ndarray:
    env = (envelope - envelope.mean()) / (envelope.std() + 1e-12)
    return np.array(
        [
            np.sum(
                env[max(0, lag) : len(env) + min(0, lag)]
                * impulses[max(0, -lag) : len(impulses) - max(0, lag)]
            )
            for lag in lags
        ]
    ) / max(impulses.sum(), 1.0)


def av_sync(
    tracks: list[tuple[np.ndarray, np.ndarray]],
    max_lag_ms: float = 200.0,
    hop: int = 80,
    shuffles: int = 50,
    seed: int = 0,
) -> dict:
    """Lag (ms) that maximises the cross-correlation of the audio's onset envelope with the true
    footstep onsets, pooled over (audio, step_frames) tracks; positive = the sound comes late.

    Control: the same peak with each track's step frames replaced by as many random frames
    (`shuffles` times). `z` is how many control standard deviations the real peak stands
    above the control's mean; `synced` needs z >= 3 and |lag| <= 50 ms."""
    hop_ms = hop * 1000 / SAMPLE_RATE
    max_lag = int(max_lag_ms / hop_ms)
    lags = np.arange(-max_lag, max_lag + 1)
    rng = np.random.default_rng(seed)
    total = np.zeros(len(lags))
    envs = []
    for audio, steps in tracks:
        frames = len(audio) // SAMPLES_PER_FRAME
        env = onset_envelope(audio, hop)
        envs.append((env, frames, len(steps)))
        total += _lagged_correlation(env, step_impulses(steps, frames, hop), lags)
    if not any(n for *_, n in envs):
        return {
            "lag_ms": None,
            "peak": None,
            "control_peak": None,
            "z": None,
            "synced": False,
            "steps": 0,
        }
    control = []
    for _ in range(shuffles):
        c = np.zeros(len(lags))
        for env, frames, n in envs:
            fake = rng.choice(frames, size=min(n, frames), replace=False)
            c += _lagged_correlation(env, step_impulses(fake, frames, hop), lags)
        control.append(c.max())
    best = int(np.argmax(total))
    z = (total[best] - np.mean(control)) / (np.std(control) + 1e-12)
    lag_ms = float(lags[best] * hop_ms)
    return {
        "lag_ms": lag_ms,
        "peak": float(total[best] / len(tracks)),
        "control_peak": float(np.mean(control) / len(tracks)),
        "z": float(z),
        "synced": bool(z >= 3 and abs(lag_ms) <= 50),
        "steps": int(sum(n for *_, n in envs)),
    }


def seam_ratio(frames: np.ndarray, tile: int = 32) -> float:
    """Mean luminance gradient magnitude across every `tile`-th pixel border over that across
    all other borders (1 = no seams; a latent-tile mosaic shows its grid, > 2)."""
    y = luminance(frames)
    gx = np.abs(np.diff(y, axis=2))  # border between column j and j + 1
    gy = np.abs(np.diff(y, axis=1))
    on_x = (np.arange(gx.shape[2]) + 1) % tile == 0
    on_y = (np.arange(gy.shape[1]) + 1) % tile == 0
    seam = np.concatenate([gx[:, :, on_x].ravel(), gy[:, on_y, :].ravel()]).mean()
    rest = np.concatenate([gx[:, :, ~on_x].ravel(), gy[:, ~on_y, :].ravel()]).mean()
    return float(seam / max(rest, 1e-12))


def bootstrap_ci(
    values: np.ndarray, statistic=np.mean, n: int = 1000, seed: int = 0
) -> list[float] | None:
    """95 % percentile interval of `statistic` over cases resampled with replacement."""
    values = np.asarray(values)
    if len(values) == 0:
        return None
    rng = np.random.default_rng(seed)
    stats = [statistic(values[rng.integers(0, len(values), len(values))]) for _ in range(n)]
    lo, hi = np.nanpercentile(np.asarray(stats, np.float64), [2.5, 97.5])
    return [float(lo), float(hi)]


def balanced_accuracy_multiclass(pred: np.ndarray, target: np.ndarray) -> float | None:
    """Mean over the classes present in `target` of the recall of that class."""
    pred, target = np.asarray(pred), np.asarray(target)
    classes = np.unique(target)
    if len(classes) == 0:
        return None
    return float(np.mean([(pred[target == c] == c).mean() for c in classes]))


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


def balanced_accuracy_masked(pred: np.ndarray, target: np.ndarray) -> list[float | None]:
    """`balanced_accuracy` per column, leaving out rows whose target is -1 (ambiguous)."""
    pred, target = np.asarray(pred, bool), np.asarray(target)
    out: list[float | None] = []
    for c in range(target.shape[1]):
        keep = target[:, c] >= 0
        out.append(balanced_accuracy(pred[keep, c : c + 1], target[keep, c : c + 1] > 0)[0])
    return out


def _mse(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.mean((to_float(a) - to_float(b)) ** 2))


def loop_closure_case(
    generated: np.ndarray, truth: np.ndarray, start_view: np.ndarray, halfway: int
) -> dict:
    """One full turn in place: generated and true frames of the turn (the last one faces where
    the turn began), the view before the turn, and the index of the half-turn frame."""
    return {
        "mse_closed": _mse(generated[-1], truth[-1]),
        "mse_sim_closed": _mse(truth[-1], start_view),  # what changed in the world itself
        "mse_halfway": _mse(generated[halfway], truth[halfway]),
        "mse_halfway_frozen": _mse(start_view, truth[halfway]),
        "turned": _mse(generated[halfway], truth[halfway]) < _mse(generated[halfway], start_view),
    }


def loop_closure_summary(cases: list[dict]) -> dict:
    """`loop_closure_psnr` (DESIGN.md: the view after the full turn against the simulator's),
    the simulator's own change over the turn as its ceiling, and the half-turn check that tells
    a model that turned and came back from one that never moved (which closes the loop
    trivially): `loop_closure_turned` is the fraction of turns whose half-turn frame is nearer
    the simulator's view behind the player than the view it started from."""
    mean = {k: float(np.mean([c[k] for c in cases])) for k in cases[0]}
    return {
        "loop_closure_psnr": psnr_from_mse(mean["mse_closed"]),
        "loop_closure_psnr_sim": psnr_from_mse(mean["mse_sim_closed"]),
        "loop_closure_halfway_psnr": psnr_from_mse(mean["mse_halfway"]),
        "loop_closure_halfway_psnr_frozen": psnr_from_mse(mean["mse_halfway_frozen"]),
        "loop_closure_turned": mean["turned"],
        "loop_closure_cases": len(cases),
        "loop_closure_passed": bool(
            mean["turned"] >= 0.9 and mean["mse_closed"] <= mean["mse_halfway_frozen"]
        ),
    }


def band_mean(frames: np.ndarray, rows: tuple[float, float]) -> np.ndarray:
    """Mean colour (3,) of the rows [lo * H, hi * H) of frames (N, H, W, 3), in their units."""
    height = frames.shape[1]
    lo, hi = int(rows[0] * height), max(int(rows[1] * height), int(rows[0] * height) + 1)
    return np.asarray(frames[:, lo:hi], np.float64).reshape(-1, 3).mean(axis=0)


def move_fraction(moved: np.ndarray, base: np.ndarray, target: np.ndarray) -> float:
    """How much of the distance from `base` to `target` `moved` closed: 1 - |moved - target| /
    |base - target| (1 = all the way, 0 = as far as before, negative = farther); nan when base
    already is the target. A distance, not a projection on the line to the target: a big
    change toward some other colour (a saturated red where the picture asked for olive) must
    not count as following the picture."""
    base, target = np.asarray(base, np.float64), np.asarray(target, np.float64)
    before = float(np.linalg.norm(target - base))
    after = float(np.linalg.norm(target - np.asarray(moved, np.float64)))
    return 1.0 - after / before if before > 1e-9 else float("nan")


def reference_recolour_summary(model: list[dict[str, float]], sim: list[dict[str, float]]) -> dict:
    """Medians over cases x bands of the per-case, per-band move fractions of the model and of
    the simulator under the same inputs, their ratio (model / simulator, None unless the
    simulator moved), per-band medians and intervals bootstrapped over cases (at least one)."""
    bands = list(model[0])
    gen = np.array([[case[b] for b in bands] for case in model], np.float64)
    ref = np.array([[case[b] for b in bands] for case in sim], np.float64)

    def median(values: np.ndarray) -> float:
        present = values[np.isfinite(values)]
        return float(np.median(present)) if present.size else float("nan")

    def ratio(rows: np.ndarray) -> float:
        s = median(ref[rows])
        return median(gen[rows]) / s if s > 0 else float("nan")

    rows = np.arange(len(gen))
    r = ratio(rows)
    return {
        "reference_recolour": median(gen),
        "reference_recolour_ci": bootstrap_ci(rows, lambda i: median(gen[i])),
        "reference_recolour_sim": median(ref),
        "reference_recolour_sim_ci": bootstrap_ci(rows, lambda i: median(ref[i])),
        "reference_recolour_ratio": r if np.isfinite(r) else None,
        "reference_recolour_ratio_ci": bootstrap_ci(rows, ratio) if np.isfinite(r) else None,
        "reference_recolour_by_band": {b: median(gen[:, j]) for j, b in enumerate(bands)},
        "reference_recolour_sim_by_band": {b: median(ref[:, j]) for j, b in enumerate(bands)},
        "reference_recolour_cases": len(gen),
    }
