"""Grass fire as a sparse cellular automaton: only burning cells are touched each tick."""

from __future__ import annotations

import numpy as np

from .terrain import MAP_MASK, MAP_SIZE

ASH_RGB = np.array([48, 44, 42], np.float32)
FLAME_RGB = np.array([[255, 190, 70], [250, 120, 30], [220, 60, 20], [150, 30, 15]], np.float32)
SPREAD_PROBABILITY = 0.1
_NEIGHBOURS = ((1, 0), (-1, 0), (0, 1), (0, -1))


class FireField:
    def __init__(self, fuel: np.ndarray):
        self.fuel = fuel.ravel().copy()  # (N*N,) bool: unburnt grass
        self.life = np.zeros(MAP_SIZE * MAP_SIZE, np.int16)
        self.active = np.zeros(0, np.int64)  # flat indices of burning cells

    @property
    def burning(self) -> bool:
        return self.active.size > 0

    def ignite(self, cells: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Set the grass among `cells` alight; returns the cells that caught fire."""
        cells = np.unique(cells)
        cells = cells[self.fuel[cells]]
        self.fuel[cells] = False
        self.life[cells] = rng.integers(10, 18, cells.size)
        self.active = np.union1d(self.active, cells)
        return cells

    def tick(self, rng: np.random.Generator, wet: bool) -> tuple[np.ndarray, np.ndarray]:
        """Advance one fire step; returns (newly burning cells, cells burnt out to ash)."""
        if not self.burning:
            empty = np.zeros(0, np.int64)
            return empty, empty
        active = self.active
        self.life[active] -= 3 if wet else 1
        ignited = np.zeros(0, np.int64)
        if not wet:
            ys, xs = active >> 8, active & MAP_MASK
            near = np.concatenate(
                [(((ys + dy) & MAP_MASK) << 8) | ((xs + dx) & MAP_MASK) for dx, dy in _NEIGHBOURS]
            )
            near = near[self.fuel[near]]
            near = near[rng.random(near.size) < SPREAD_PROBABILITY]
            ignited = self.ignite(near, rng)
        done = self.active[self.life[self.active] <= 0]
        self.active = self.active[self.life[self.active] > 0]
        return ignited, done

    def light_map(self, grid: int, shift: int) -> np.ndarray:
        """Coarse (grid*grid,) glow from burning cells, blurred so light spills around fire."""
        ys, xs = self.active >> 8, self.active & MAP_MASK
        counts = np.bincount(((ys >> shift) * grid + (xs >> shift)), minlength=grid * grid)
        glow: np.ndarray = counts.reshape(grid, grid).astype(np.float32)
        for _ in range(2):
            glow = (glow + np.roll(glow, 1, 0) + np.roll(glow, -1, 0)) / 3
            glow = (glow + np.roll(glow, 1, 1) + np.roll(glow, -1, 1)) / 3
        return np.minimum(glow / 3.0, 1.0).ravel()
