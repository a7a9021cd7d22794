"""Procedural terrain: a wrapping heightmap with materials, trees and a base colour map."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import numpy as np

from .themes import Theme

MAP_SIZE = 256  # cells per side; the world wraps (power of two so indices wrap with a mask)
MAP_MASK = MAP_SIZE - 1

WATER, SHORE, GROUND, ROCK, TREE = 0, 1, 2, 3, 4
TREE_HEIGHT = 8.0
TREE_RADIUS = 3.2


@dataclass
class Terrain:
    ground_height: np.ndarray  # (N, N) float32 world units, without trees
    height: np.ndarray  # (N, N) float32, with tree canopies
    material: np.ndarray  # (N, N) uint8: WATER, SHORE, GROUND, ROCK, TREE
    blocked: np.ndarray  # (N, N) bool: water and tree trunks
    water_height: float
    tree_cells: np.ndarray  # (K, 2) int: tree centres (x, y)
    shade: np.ndarray  # (N, N) float32 slope lighting and per-cell variation

    def cell(self, x: float, y: float) -> tuple[int, int]:
        return int(np.floor(x)) & MAP_MASK, int(np.floor(y)) & MAP_MASK

    def height_at(self, x: float, y: float) -> float:
        cx, cy = self.cell(x, y)
        return float(self.ground_height[cy, cx])

    def is_blocked(self, x: float, y: float) -> bool:
        cx, cy = self.cell(x, y)
        return bool(self.blocked[cy, cx])


def periodic_noise(rng: np.random.Generator, size: int, slope: float) -> np.ndarray:
    """Tileable 1/f^slope noise in [0, 1] (filtered white noise, so it wraps seamlessly)."""
    white = rng.standard_normal((size, size))
    freqs = np.fft.fftfreq(size)
    radius = np.sqrt(freqs[:, None] ** 2 + freqs[None, :] ** 2)
    radius[0, 0] = np.inf
    field = np.fft.ifft2(np.fft.fft2(white) / radius**slope).real
    field -= field.min()
    return (field / field.max()).astype(np.float32)


@cache
def _cone_kernel() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    r = int(np.ceil(TREE_RADIUS))
    dy, dx = np.mgrid[-r : r + 1, -r : r + 1]
    dist = np.sqrt(dx**2 + dy**2)
    keep = dist < TREE_RADIUS
    profile = TREE_HEIGHT * (1.0 - dist[keep] / TREE_RADIUS) ** 0.8 + 1.5
    return dx[keep], dy[keep], profile.astype(np.float32)


def stamp_tree(height: np.ndarray, ground: np.ndarray, x: int, y: int) -> np.ndarray:
    """Raise a conifer canopy at (x, y); returns the flat indices it covers."""
    dx, dy, profile = _cone_kernel()
    xs, ys = (x + dx) & MAP_MASK, (y + dy) & MAP_MASK
    base = ground[y, x]
    height[ys, xs] = np.maximum(height[ys, xs], base + profile)
    return ys * MAP_SIZE + xs


def generate_terrain(theme: Theme, rng: np.random.Generator) -> Terrain:
    n = MAP_SIZE
    relief = periodic_noise(rng, n, theme.roughness)
    if theme.terraces:
        steps = np.floor(relief * theme.terraces) / theme.terraces
        relief = 0.75 * steps + 0.25 * relief
    water_level = theme.water_level
    ground = relief * theme.height_scale
    water_height = water_level * theme.height_scale
    ground = np.maximum(ground, water_height).astype(np.float32)

    slope = np.hypot(
        np.roll(ground, -1, 1) - np.roll(ground, 1, 1),
        np.roll(ground, -1, 0) - np.roll(ground, 1, 0),
    )
    material = np.full((n, n), GROUND, np.uint8)
    material[(relief > theme.rock_level) | (slope > 3.2)] = ROCK
    material[(relief >= water_level) & (relief < water_level + 0.025)] = SHORE
    material[relief < water_level] = WATER

    height = ground.copy()
    candidates = (material == GROUND) & (rng.random((n, n)) < theme.tree_density)
    near_water = np.zeros((n, n), bool)
    for dy in range(-3, 4):
        for dx in range(-3, 4):
            near_water |= np.roll(material == WATER, (dy, dx), (0, 1))
    candidates &= ~near_water
    ys, xs = np.nonzero(candidates)
    blocked = material == WATER
    for x, y in zip(xs.tolist(), ys.tolist(), strict=True):
        covered = stamp_tree(height, ground, x, y)
        material.ravel()[covered] = TREE
    blocked |= material == TREE  # the whole canopy: standing inside one hides the view

    light = (
        np.roll(height, 1, 1)
        - np.roll(height, -1, 1)
        + 0.6 * (np.roll(height, 1, 0) - np.roll(height, -1, 0))
    )
    shade = np.clip(1.0 + 0.09 * light, 0.55, 1.35) * (0.92 + 0.16 * rng.random((n, n)))
    return Terrain(
        ground,
        height.astype(np.float32),
        material,
        blocked,
        float(water_height),
        np.stack([xs, ys], 1),
        shade.astype(np.float32),
    )


def albedo_map(terrain: Terrain, theme: Theme) -> np.ndarray:
    """Base (unlit) colour of every cell, (N, N, 3) float32 in 0..255."""
    palette = np.zeros((5, 3), np.float32)
    palette[WATER] = theme.water
    palette[SHORE] = theme.shore
    palette[GROUND] = theme.ground
    palette[ROCK] = theme.rock
    palette[TREE] = theme.foliage
    colour = palette[terrain.material] * terrain.shade[..., None]
    tree = terrain.material == TREE
    # Canopies darken towards their base so each tree reads as a cone.
    rise = np.clip((terrain.height - terrain.ground_height) / (TREE_HEIGHT + 1.5), 0, 1)
    colour[tree] *= (0.45 + 0.75 * rise[tree])[:, None]
    water = terrain.material == WATER
    colour[water] = np.asarray(theme.water, np.float32) * (0.9 + 0.2 * terrain.shade[water, None])
    return np.clip(colour, 0, 255)


def emissive_map(terrain: Terrain, theme: Theme) -> np.ndarray:
    """Self-lit colour that survives night (the neon grid), (N, N, 3) float32."""
    emissive = np.zeros((MAP_SIZE, MAP_SIZE, 3), np.float32)
    if theme.glow > 0:
        idx = np.arange(MAP_SIZE)
        lines = (idx % 16 == 0)[:, None] | (idx % 16 == 0)[None, :]
        lines &= terrain.material != WATER
        emissive[lines] = np.asarray(theme.trunk, np.float32) * theme.glow
        tree = terrain.material == TREE
        emissive[tree] = np.asarray(theme.foliage, np.float32) * theme.glow * 0.5
    return emissive
