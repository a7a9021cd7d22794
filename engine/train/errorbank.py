"""The Error Bank (PixVerse R2): erroneous histories from the model's own rollouts, replayed.

Collect: from true context at a random point of a training episode, the current model rolls
out with the episode's true inputs (the runtime's KV-cached sampler, exactly as in play), and
at several horizons the last `context` generated frames are stored with the row where the true
continuation starts. Each history is scored against the truth (latent error, brightness drift,
sharpness ratio, tile seams), and the bank keeps an equal number from every error quantile, so
mild blur and long-horizon drift are both represented rather than whatever is most common.

Replay: a fixed share of every training batch takes its first `context` positions from the
bank and the true frames after them as targets (`flow_loss(bad_context=...)`), so the model
learns to recognise a bad history and steer back to the truth.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from pathlib import Path

import numpy as np
import torch
from tqdm import tqdm

from engine.eval.metrics import luminance, seam_ratio, sharpness_ratio
from engine.model.video_ae import VideoAE, tensor_to_frames
from engine.model.world import WorldModel
from engine.runtime.rollout import LatentRollout

from .bank import LatentBank


@dataclass
class ErrorBank:
    video: torch.Tensor  # (N, K, C, S, S) float16: K generated frames (the bad history)
    audio: torch.Tensor  # (N, K, A)
    row: torch.Tensor  # (N,) LatentBank row of the first true frame after the history
    horizon: torch.Tensor  # (N,) frames generated before the history's last frame
    latent_mse: torch.Tensor  # (N,) against the true latents of the same frames
    brightness: torch.Tensor  # (N,) |mean luminance(decoded) - mean luminance(truth)|
    sharpness: torch.Tensor  # (N,) Laplacian variance ratio of the history's last frame
    seams: torch.Tensor  # (N,) tile-seam ratio of the history's last frame

    def __len__(self) -> int:
        return len(self.row)

    def save(self, path: str | Path) -> None:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        torch.save({f.name: getattr(self, f.name) for f in fields(self)}, path)

    @classmethod
    def load(cls, path: str | Path) -> ErrorBank:
        """One bank file, or several joined by commas (collected by parallel workers)."""
        parts = [torch.load(p, map_location="cpu", weights_only=True) for p in str(path).split(",")]
        return cls(**{f.name: torch.cat([p[f.name] for p in parts]) for f in fields(cls)})

    def select(self, keep: torch.Tensor) -> ErrorBank:
        return ErrorBank(**{f.name: getattr(self, f.name)[keep] for f in fields(self)})

    def summary(self) -> dict:
        return {
            "histories": len(self),
            "horizons": sorted(set(self.horizon.tolist())),
            "latent_mse_median": float(self.latent_mse.median()),
            "brightness_median": float(self.brightness.median()),
            "sharpness_median": float(self.sharpness.median()),
            "seams_median": float(self.seams.median()),
        }


def stratified(
    errors: torch.Tensor, count: int, buckets: int = 4, generator: torch.Generator | None = None
) -> torch.Tensor:
    """Indices of `count` items, an equal share from each error quantile (representative, not
    dominated by the commonest kind of failure)."""
    order = torch.argsort(errors)
    per = max(1, count // buckets)
    picks = []
    for chunk in torch.tensor_split(order, buckets):
        if len(chunk):
            picks.append(chunk[torch.randperm(len(chunk), generator=generator)[:per]])
    return torch.cat(picks)


@torch.inference_mode()
def collect(
    model: WorldModel,
    video_ae: VideoAE,
    bank: LatentBank,
    frames: np.ndarray,
    rollouts: int,
    horizons: tuple[int, ...] = (5, 16, 48, 96, 160),
    keep: int = 0,
    seed: int = 0,
) -> ErrorBank:
    """Roll the model out `rollouts` times and store a history at each horizon.

    `frames` (N, H, W, 3) uint8 are the true pictures of the LatentBank's rows (for the
    brightness, sharpness and seam scores). `keep` > 0 keeps that many, stratified by error.
    """
    model = model.eval()
    ctx, longest = model.config.context, max(horizons)
    gen = torch.Generator().manual_seed(seed)
    starts = bank.window_starts(longest + ctx + 2)
    starts = starts[bank.local[starts] >= ctx]
    parts: dict[str, list] = {f.name: [] for f in fields(ErrorBank)}
    for i in tqdm(range(rollouts), desc="error bank", mininterval=10):
        r = int(starts[torch.randint(len(starts), (1,), generator=gen)]) + ctx
        e = int(bank.episode[r])
        first = r - int(bank.local[r])
        image = bank.image[e] if bool(bank.has_image[e]) else None
        roll = LatentRollout(model, int(bank.theme[e]), image, seed=seed + i)
        for row in range(first, r - ctx):  # sentences typed earlier are in memory
            if bank.text[row].abs().sum() > 0:
                roll.add_text(bank.text[row])

        def text(row: int) -> torch.Tensor | None:
            return bank.text[row] if bank.text[row].abs().sum() > 0 else None

        for row in range(r - ctx, r):
            typed = text(row)
            if typed is not None:
                roll.add_text(typed)
            roll.observe(
                bank.video[row].float(),
                bank.audio[row],
                bank.inputs[row],
                int(bank.local[row]),
                typed,
            )
        gv, ga = [], []
        for h in range(longest):
            row = r + h
            z, a = roll.generate(bank.inputs[row], int(bank.local[row]), text(row))
            gv.append(z)
            ga.append(a)
            if h + 1 in horizons:
                hist_v, hist_a = torch.stack(gv[-ctx:]), torch.stack(ga[-ctx:])
                rows = torch.arange(row - ctx + 1, row + 1)
                truth = frames[rows.numpy()]
                pics = tensor_to_frames(video_ae.decode(hist_v))
                parts["video"].append(hist_v.half())
                parts["audio"].append(hist_a)
                parts["row"].append(row + 1)
                parts["horizon"].append(h + 1)
                parts["latent_mse"].append(float(((hist_v - bank.video[rows].float()) ** 2).mean()))
                parts["brightness"].append(
                    float(abs(luminance(pics).mean() - luminance(truth).mean()))
                )
                parts["sharpness"].append(sharpness_ratio(pics[-1:], truth[-1:]))
                parts["seams"].append(seam_ratio(pics[-1:]))
    out = ErrorBank(
        torch.stack(parts["video"]),
        torch.stack(parts["audio"]),
        *(
            torch.tensor(parts[k])
            for k in ("row", "horizon", "latent_mse", "brightness", "sharpness", "seams")
        ),
    )
    if keep and keep < len(out):
        out = out.select(stratified(out.latent_mse, keep, generator=gen))
    return out


def replay_batch(
    errors: ErrorBank, bank: LatentBank, n: int, window: int, generator: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """n bank entries as training windows: starts (rows of the history's first frame, on the
    LatentBank's device) and the histories themselves (on the CPU); the windows run
    `window - K` true frames past the history."""
    k = errors.video.shape[1]
    rows = errors.row.to(bank.device)
    fits = bank.local[rows] + (window - k) <= bank.lengths[bank.episode[rows]]
    ok = torch.nonzero(fits).flatten().cpu()
    pick = ok[torch.randint(len(ok), (n,), generator=generator)]
    return rows[pick.to(bank.device)] - k, errors.video[pick].float(), errors.audio[pick].float()


def frames_of_bank(data: str | Path, episodes: int) -> np.ndarray:
    """The true pictures of the first `episodes` episodes, in LatentBank row order."""
    from engine.data import WindowReader

    reader = WindowReader(data, window=1)
    return np.concatenate([reader.episode(e).frames for e in range(episodes)])
