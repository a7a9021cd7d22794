"""Procedural billboard textures for spawned objects, the creature and its mood icons.

A texture is (h, w, 5) float32: rgb in 0..255, alpha (0/1) and an emissive flag (glowing parts
keep their colour at night and pulse with lanterns).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

TEX = 32


@dataclass(frozen=True)
class SpriteShape:
    width: float  # world units
    height: float  # world units


OBJECT_SHAPES: dict[str, SpriteShape] = {
    "dragon": SpriteShape(8.0, 6.0),
    "tree": SpriteShape(6.0, 9.0),
    "lantern": SpriteShape(2.0, 4.0),
    "crystal": SpriteShape(2.6, 5.0),
    "mushroom": SpriteShape(4.0, 4.0),
    "statue": SpriteShape(2.4, 5.0),
}
CREATURE_SHAPE = SpriteShape(1.5, 1.5)
ICON_SHAPE = SpriteShape(0.9, 0.9)
GIFT_SHAPE = SpriteShape(0.9, 0.9)


class Canvas:
    def __init__(self, size: int = TEX):
        self.tex = np.zeros((size, size, 5), np.float32)
        v, u = np.mgrid[0:size, 0:size]
        self.u = (u + 0.5) / size  # 0 left .. 1 right
        self.v = (v + 0.5) / size  # 0 top .. 1 bottom

    def paint(self, mask: np.ndarray, rgb, emissive: bool = False) -> None:
        self.tex[mask, :3] = rgb
        self.tex[mask, 3] = 1.0
        self.tex[mask, 4] = float(emissive)

    def ellipse(self, cu, cv, ru, rv) -> np.ndarray:
        return ((self.u - cu) / ru) ** 2 + ((self.v - cv) / rv) ** 2 <= 1.0

    def rect(self, u0, v0, u1, v1) -> np.ndarray:
        return (self.u >= u0) & (self.u <= u1) & (self.v >= v0) & (self.v <= v1)

    def triangle(self, a, b, c) -> np.ndarray:
        def side(p, q):
            return (self.u - q[0]) * (p[1] - q[1]) - (p[0] - q[0]) * (self.v - q[1])

        d1, d2, d3 = side(a, b), side(b, c), side(c, a)
        neg = (d1 < 0) | (d2 < 0) | (d3 < 0)
        pos = (d1 > 0) | (d2 > 0) | (d3 > 0)
        return ~(neg & pos)


def _dragon(wings_up: bool) -> np.ndarray:
    c = Canvas()
    body, belly, wing = (200, 40, 30), (250, 170, 60), (140, 20, 40)
    tip = (0.5, 0.05) if wings_up else (0.45, 0.75)
    c.paint(c.triangle((0.3, 0.45), (0.62, 0.45), tip), wing)
    c.paint(c.triangle((0.05, 0.7), (0.35, 0.55), (0.3, 0.75)), body)  # tail
    c.paint(c.ellipse(0.48, 0.6, 0.26, 0.14), body)
    c.paint(c.ellipse(0.48, 0.66, 0.16, 0.06), belly)
    c.paint(c.rect(0.36, 0.68, 0.42, 0.98) | c.rect(0.56, 0.68, 0.62, 0.98), body)  # legs
    c.paint(c.ellipse(0.8, 0.4, 0.12, 0.09), body)  # head
    c.paint(c.rect(0.68, 0.4, 0.76, 0.55), body)  # neck
    c.paint(c.triangle((0.75, 0.33), (0.8, 0.2), (0.83, 0.33)), belly)  # horn
    c.paint(c.ellipse(0.83, 0.38, 0.03, 0.03), (255, 240, 40), emissive=True)  # eye
    return c.tex


def _tree() -> np.ndarray:
    c = Canvas()
    c.paint(c.rect(0.42, 0.5, 0.58, 1.0), (100, 65, 35))
    c.paint(c.ellipse(0.5, 0.35, 0.45, 0.33), (50, 160, 50))
    c.paint(c.ellipse(0.35, 0.28, 0.15, 0.12), (90, 200, 70))
    for cu, cv in ((0.3, 0.45), (0.62, 0.25), (0.7, 0.5), (0.45, 0.15)):
        c.paint(c.ellipse(cu, cv, 0.045, 0.035), (230, 40, 40))
    return c.tex


def _lantern() -> np.ndarray:
    c = Canvas()
    c.paint(c.rect(0.44, 0.3, 0.56, 1.0), (40, 40, 45))
    c.paint(c.rect(0.2, 0.08, 0.8, 0.38), (60, 50, 40))
    c.paint(c.rect(0.28, 0.13, 0.72, 0.34), (255, 220, 110), emissive=True)
    return c.tex


def _crystal() -> np.ndarray:
    c = Canvas()
    c.paint(c.triangle((0.5, 0.0), (0.1, 0.45), (0.9, 0.45)), (120, 240, 255), emissive=True)
    c.paint(c.triangle((0.1, 0.45), (0.9, 0.45), (0.5, 1.0)), (40, 150, 220), emissive=True)
    c.paint(c.triangle((0.5, 0.0), (0.35, 0.45), (0.5, 1.0)), (220, 255, 255), emissive=True)
    return c.tex


def _mushroom() -> np.ndarray:
    c = Canvas()
    c.paint(c.rect(0.38, 0.4, 0.62, 1.0), (235, 225, 200))
    c.paint(c.ellipse(0.5, 0.42, 0.48, 0.32) & (c.v < 0.45), (210, 30, 40))
    for cu, cv in ((0.3, 0.3), (0.55, 0.2), (0.72, 0.33), (0.45, 0.36)):
        c.paint(c.ellipse(cu, cv, 0.06, 0.045), (255, 255, 255))
    return c.tex


def _statue() -> np.ndarray:
    c = Canvas()
    stone = (160, 160, 170)
    c.paint(c.rect(0.1, 0.85, 0.9, 1.0), (110, 110, 120))
    c.paint(c.rect(0.32, 0.3, 0.68, 0.85), stone)
    c.paint(c.ellipse(0.5, 0.18, 0.14, 0.12), stone)
    c.paint(c.rect(0.15, 0.32, 0.85, 0.42), stone)
    return c.tex


CREATURE_COLOURS = {
    "default": (225, 190, 140),
    "golden": (255, 200, 30),
    "azure": (60, 140, 255),
}


def _creature(fur) -> np.ndarray:
    c = Canvas()
    c.paint(c.triangle((0.18, 0.05), (0.12, 0.45), (0.38, 0.35)), fur)  # ears
    c.paint(c.triangle((0.82, 0.05), (0.88, 0.45), (0.62, 0.35)), fur)
    c.paint(c.ellipse(0.5, 0.58, 0.42, 0.38), fur)
    c.paint(c.ellipse(0.5, 0.7, 0.25, 0.2), tuple(min(255, int(f * 1.2) + 30) for f in fur))
    for cu in (0.36, 0.64):
        c.paint(c.ellipse(cu, 0.48, 0.09, 0.11), (255, 255, 255))
        c.paint(c.ellipse(cu, 0.5, 0.05, 0.07), (20, 20, 30))
    c.paint(c.rect(0.25, 0.9, 0.38, 1.0) | c.rect(0.62, 0.9, 0.75, 1.0), (60, 45, 35))
    return c.tex


def _icon(kind: str) -> np.ndarray:
    c = Canvas(16)
    if kind == "curious":
        c.paint(c.ellipse(0.5, 0.5, 0.48, 0.4), (255, 255, 255))
        for cu in (0.28, 0.5, 0.72):
            c.paint(c.ellipse(cu, 0.5, 0.08, 0.08), (30, 30, 30))
    elif kind == "happy":
        c.paint(c.ellipse(0.32, 0.35, 0.2, 0.2) | c.ellipse(0.68, 0.35, 0.2, 0.2), (240, 30, 80))
        c.paint(c.triangle((0.12, 0.42), (0.88, 0.42), (0.5, 0.92)), (240, 30, 80))
    elif kind == "afraid":
        c.paint(c.ellipse(0.5, 0.65, 0.3, 0.3), (80, 160, 255))
        c.paint(c.triangle((0.5, 0.02), (0.22, 0.6), (0.78, 0.6)), (80, 160, 255))
    elif kind == "startled":
        c.paint(c.rect(0.38, 0.0, 0.62, 0.62), (255, 220, 0))
        c.paint(c.ellipse(0.5, 0.85, 0.13, 0.13), (255, 220, 0))
    elif kind == "leaf":
        c.paint(c.ellipse(0.5, 0.5, 0.45, 0.25), (60, 200, 60))
        c.paint(c.rect(0.05, 0.47, 0.95, 0.53), (30, 110, 30))
    else:
        raise ValueError(kind)
    return c.tex


@dataclass
class SpriteBook:
    objects: dict[str, list[np.ndarray]]  # animation frames per object kind
    creature: dict[str, np.ndarray]  # per companion look
    icons: dict[str, np.ndarray]


def build_sprite_book() -> SpriteBook:
    objects = {
        "dragon": [_dragon(True), _dragon(False)],
        "tree": [_tree()],
        "lantern": [_lantern()],
        "crystal": [_crystal()],
        "mushroom": [_mushroom()],
        "statue": [_statue()],
    }
    creature = {look: _creature(rgb) for look, rgb in CREATURE_COLOURS.items()}
    icons = {k: _icon(k) for k in ("curious", "happy", "afraid", "startled", "leaf")}
    icons["dragon"] = objects["dragon"][0]
    return SpriteBook(objects, creature, icons)
