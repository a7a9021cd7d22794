"""Loss curves and image grids as PNG files, with Pillow only (matplotlib is not installed)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw

COLOURS = [(31, 119, 180), (255, 127, 14), (44, 160, 44), (214, 39, 40), (148, 103, 189)]


def all_positive(series: dict[str, list[tuple[float, float]]]) -> bool:
    """Whether every y can go on a log axis."""
    return all(y > 0 for s in series.values() for _, y in s)


def line_plot(
    path: str | Path,
    series: dict[str, list[tuple[float, float]]],
    title: str = "",
    log_y: bool = True,
    size: tuple[int, int] = (640, 400),
    smooth: float = 0.9,
) -> None:
    """Plot named (x, y) series on one axis (log y by default, EMA-smoothed) and save a PNG.
    A series that goes to zero or below (a negative log-likelihood) makes the axis linear:
    a log axis would silently drop those points."""
    series = {name: _ema(s, smooth) for name, s in series.items()}
    log_y = log_y and all_positive(series)
    w, h = size
    img = Image.new("RGB", size, "white")
    draw = ImageDraw.Draw(img)
    pts = [(x, y) for s in series.values() for x, y in s if y > 0 or not log_y]
    if not pts:
        img.save(path)
        return
    fy = (lambda v: math.log10(max(v, 1e-12))) if log_y else (lambda v: v)
    xs = [p[0] for p in pts]
    ys = [fy(p[1]) for p in pts]
    x0, x1 = min(xs), max(xs) if max(xs) > min(xs) else min(xs) + 1
    y0, y1 = min(ys), max(ys) if max(ys) > min(ys) else min(ys) + 1
    left, right, top, bottom = 60, w - 10, 30, h - 30
    draw.rectangle([left, top, right, bottom], outline="black")
    draw.text((left, 8), title, fill="black")
    for frac in (0, 0.5, 1):
        v = y0 + frac * (y1 - y0)
        label = f"{10**v:.3g}" if log_y else f"{v:.3g}"
        yy = bottom - frac * (bottom - top)
        draw.text((4, yy - 6), label, fill="black")
    draw.text((left, bottom + 8), f"{x0:.0f}", fill="black")
    draw.text((right - 40, bottom + 8), f"{x1:.0f}", fill="black")
    for i, (name, s) in enumerate(series.items()):
        colour = COLOURS[i % len(COLOURS)]
        line = [
            (
                left + (x - x0) / (x1 - x0) * (right - left),
                bottom - (fy(y) - y0) / (y1 - y0) * (bottom - top),
            )
            for x, y in s
            if y > 0 or not log_y
        ]
        if len(line) > 1:
            draw.line(line, fill=colour, width=2)
        draw.text((right - 150, top + 6 + 14 * i), name, fill=colour)
    img.save(path)


def image_grid(path: str | Path, rows: list[np.ndarray], scale: int = 1) -> None:
    """Save rows of (N, H, W, 3) uint8 frames as one PNG (rows stacked vertically)."""
    rows = [np.concatenate(list(r), axis=1) for r in rows]
    width = max(r.shape[1] for r in rows)
    rows = [np.pad(r, ((0, 0), (0, width - r.shape[1]), (0, 0))) for r in rows]
    img = Image.fromarray(np.concatenate(rows, axis=0))
    if scale != 1:
        img = img.resize((img.width * scale, img.height * scale), Image.Resampling.NEAREST)
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    img.save(path)


def _ema(points: list[tuple[float, float]], alpha: float) -> list[tuple[float, float]]:
    out, avg = [], None
    for x, y in points:
        avg = y if avg is None else alpha * avg + (1 - alpha) * y
        out.append((x, avg))
    return out
