"""A codebook over the video tokenizer's latent cells: every 16x16 latent position (one
C-vector, an 8x8-pixel patch) becomes one of K learnt code vectors.

Why: a regressor that is unsure predicts the average of what may come, and its own averages
fed back as history make it surer of nothing: the haze of MODEL.md's v3-v6 experiments. A
model that picks a code per cell (a classifier, IRIS / Genie / MineWorld style) commits to
some real patch even when unsure, and its history is always made of real patches.
"""

from __future__ import annotations

import math

import torch


def nearest_codes(latent: torch.Tensor, codebook: torch.Tensor) -> torch.Tensor:
    """(B, C, S, S) latents -> (B, S, S) index of the nearest code (K, C) of every cell."""
    b, c, h, w = latent.shape
    cells = latent.permute(0, 2, 3, 1).reshape(-1, c).float()
    distance = torch.cdist(cells, codebook.float())
    return distance.argmin(dim=1).view(b, h, w)


def code_latents(indices: torch.Tensor, codebook: torch.Tensor) -> torch.Tensor:
    """(B, S, S) code indices -> (B, C, S, S) latents made of the code vectors."""
    return codebook[indices].permute(0, 3, 1, 2).contiguous()


def snap_to_codes(
    latent: torch.Tensor, codebook: torch.Tensor, residual: torch.Tensor | None = None
) -> torch.Tensor:
    """(B, C, S, S) latents with every cell replaced by its nearest code's vector; with a
    `residual` codebook (R, C) plus the residual code nearest what the first code left."""
    return code_latents_of(*code_indices(latent, codebook, residual), codebook, residual)


def code_indices(
    latent: torch.Tensor, codebook: torch.Tensor, residual: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """(B, C, S, S) latents -> each cell's nearest code (B, S, S) and, with a `residual`
    codebook, the residual code nearest what that code left (RQ-VAE's second stage)."""
    first = nearest_codes(latent, codebook)
    if residual is None:
        return first, None
    return first, nearest_codes(latent - code_latents(first, codebook), residual)


def code_latents_of(
    first: torch.Tensor,
    rest: torch.Tensor | None,
    codebook: torch.Tensor,
    residual: torch.Tensor | None = None,
) -> torch.Tensor:
    """`code_indices`' inverse: the latents (B, C, S, S) the codes (and residual codes) make."""
    latent = code_latents(first, codebook)
    if rest is None or residual is None:
        return latent
    return latent + code_latents(rest, residual)


def fit_codebook(
    cells: torch.Tensor, codes: int, iterations: int = 25, seed: int = 0
) -> torch.Tensor:
    """K-means over latent cells (N, C): (codes, C) centres, seeded by k-means++ on a
    sample. A centre that loses all its cells restarts at the cell worst served."""
    gen = torch.Generator().manual_seed(seed)
    cells = cells.float()
    if len(cells) < codes:
        raise ValueError(f"{len(cells)} cells cannot make {codes} codes")
    centres = _kmeans_plus_plus(
        cells[torch.randperm(len(cells), generator=gen)[:20_000]], codes, gen
    )
    for _ in range(iterations):
        distance = torch.cdist(cells, centres)
        nearest = distance.argmin(dim=1)
        counts = torch.bincount(nearest, minlength=codes).float()
        sums = torch.zeros_like(centres).index_add_(0, nearest, cells)
        empty = counts == 0
        centres = torch.where(empty[:, None], centres, sums / counts.clamp(min=1)[:, None])
        if empty.any():
            worst = distance.gather(1, nearest[:, None]).squeeze(1).topk(int(empty.sum())).indices
            centres[empty] = cells[worst]
    return centres


def _kmeans_plus_plus(cells: torch.Tensor, codes: int, gen: torch.Generator) -> torch.Tensor:
    first = torch.randint(len(cells), (1,), generator=gen)
    centres = [cells[first]]
    closest = (cells - centres[0]).pow(2).sum(dim=1)
    for _ in range(codes - 1):
        pick = torch.multinomial(closest + 1e-12, 1, generator=gen)
        centres.append(cells[pick])
        closest = torch.minimum(closest, (cells - cells[pick]).pow(2).sum(dim=1))
    return torch.cat(centres)


def quantization_error(
    latents: torch.Tensor, codebook: torch.Tensor, residual: torch.Tensor | None = None
) -> float:
    """Mean squared error per latent element of replacing every cell by its nearest code
    (and residual code)."""
    return float((snap_to_codes(latents, codebook, residual) - latents.float()).pow(2).mean())


class CodeDraws:
    """The random numbers behind a session's code draws, correlated across cells and frames.

    A code is drawn per cell as the argmax of logits / T plus Gumbel noise. Independent noise
    per cell is the softmax's draw, but where a whole region is equally unsure (a band of
    grass spread over 50 codes) it paints a grain of different codes, cell by cell, and a new
    grain every frame. Here the noise is a Gaussian field, blurred over `blur` cells (standard
    deviation; 0 = none) and carried from frame to frame with correlation `memory` (0 = fresh
    every frame), pushed through the normal CDF and the Gumbel inverse CDF. Every cell's noise
    is still exactly Gumbel, so every cell's code is still drawn from its own softmax; only
    neighbours and successive frames now share their luck: equally unsure neighbours pick the
    same code, and a cell whose logits do not change keeps its code.
    """

    def __init__(self, gen: torch.Generator, blur: float = 0.0, memory: float = 0.0):
        if blur < 0 or not 0 <= memory < 1:
            raise ValueError(f"blur must be >= 0 and memory in [0, 1), not {blur}, {memory}")
        self.gen, self.blur, self.memory = gen, blur, memory
        self.field: torch.Tensor | None = None
        self.offset = [0.0, 0.0]  # camera moves (cells, x and y) not yet applied to the field

    @property
    def correlated(self) -> bool:
        return self.blur > 0 or self.memory > 0

    def move(self, dx: float, dy: float) -> None:
        """Carry the noise along with a picture that the camera slid by (dx, dy) cells, so a
        patch that moved keeps its luck (whole cells only: the rest waits for the next move;
        the cells the move uncovers get fresh noise, so every cell's noise stays Gumbel)."""
        self.offset = [self.offset[0] + dx, self.offset[1] + dy]
        steps = [int(round(o)) for o in self.offset]
        if self.field is None or not any(steps):
            return
        self.offset = [o - n for o, n in zip(self.offset, steps, strict=True)]
        field = self.field
        for n, axis in zip(steps, (-1, -2), strict=True):
            if n == 0:
                continue
            size = field.shape[axis]
            n = max(-size, min(size, n))
            field = torch.roll(field, n, dims=axis)
            uncovered = slice(0, n) if n > 0 else slice(size + n, size)
            index = [slice(None)] * field.dim()
            index[axis] = uncovered
            fresh = torch.randn(field[tuple(index)].shape, generator=self.gen)
            field[tuple(index)] = fresh
        self.field = field

    def gumbel(self, shape: torch.Size, device: torch.device | str = "cpu") -> torch.Tensor:
        """Standard Gumbel noise of `shape` (B, K, S, S), correlated as configured."""
        fresh = torch.randn(shape, generator=self.gen)
        if self.blur > 0:
            fresh = _unit_blur(fresh, self.blur)
        if self.field is not None and self.field.shape == fresh.shape and self.memory > 0:
            fresh = self.memory * self.field + (1 - self.memory**2) ** 0.5 * fresh
        self.field = fresh
        u = 0.5 * (1 + torch.erf(fresh / 2**0.5))  # the normal CDF reaches 1.0 in float32
        return gumbel_from_uniform(u.clamp(max=1 - 1e-7)).to(device)


def gumbel_from_uniform(u: torch.Tensor) -> torch.Tensor:
    """Standard Gumbel noise from uniform numbers in [0, 1) (the inverse CDF)."""
    return -torch.log(-torch.log(u.clamp(min=1e-10)))


def random_numbers(
    shape: torch.Size, device: torch.device, gen: torch.Generator | None, normal: bool = False
) -> torch.Tensor:
    """Uniform (or standard normal) numbers on `device`, from `gen` where it lives there; a
    CPU generator for GPU tensors falls back to the device's own stream (training there)."""
    draw = torch.randn if normal else torch.rand
    if gen is not None and gen.device == device:
        return draw(shape, generator=gen, device=device)
    return draw(shape, device=device)


def _unit_blur(field: torch.Tensor, sigma: float) -> torch.Tensor:
    """A separable Gaussian blur over the last two axes (wrapping around the borders, so every
    cell sums the same weights) rescaled to keep unit variance."""
    radius = min(max(1, math.ceil(2.5 * sigma)), (min(field.shape[-2:]) - 1) // 2)
    taps = torch.arange(-radius, radius + 1, dtype=field.dtype)
    kernel = torch.exp(-0.5 * (taps / sigma) ** 2)
    kernel = kernel / kernel.pow(2).sum().sqrt()  # unit gain in variance along one axis
    out = field
    for axis in (-1, -2):
        out = sum(w * torch.roll(out, int(t), dims=axis) for t, w in zip(taps, kernel, strict=True))
    return out
