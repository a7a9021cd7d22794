"""The creature that remembers: approaches, asks for a gift, and keeps the relationship.

Modes drive movement; the labelled mood follows from mode and remembered relationship, so a
frame 20 s after a gift still shows whether it was a leaf (happy) or a dragon (afraid).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .terrain import MAP_SIZE, Terrain

NOTICE_RADIUS = 22.0
ASK_RADIUS = 3.5
FLEE_RADIUS = 14.0
SAFE_RADIUS = 18.0
FOLLOW_FRAMES = 240  # after this long at the player's side it wanders off...
COOLDOWN_FRAMES = 120  # ...and ignores the player for a while, so a later encounter happens
STARTLE_FRAMES = 30
ASK_CALL_EVERY = 60


@dataclass
class CreatureState:
    x: float
    y: float
    home_x: float
    home_y: float
    mode: str = "wander"  # wander | approach | ask | follow | greet | flee | startled
    relationship: str = "none"  # none | friend | fear
    look: str = "default"
    timer: int = 0
    cooldown: int = 0
    gift: str | None = None  # shown above it for a moment after a gift
    gift_timer: int = 0
    hop: float = 0.0

    @property
    def mood(self) -> str:
        if self.mode == "startled":
            return "startled"
        if self.mode in ("approach", "ask"):
            return "curious"
        if self.mode in ("follow", "greet"):
            return "happy"
        if self.mode == "flee":
            return "afraid"
        return {"none": "neutral", "friend": "happy", "fear": "afraid"}[self.relationship]


def wrapped_delta(ax: float, ay: float, bx: float, by: float) -> tuple[float, float]:
    """Shortest vector from a to b on the wrapping map."""
    half = MAP_SIZE / 2
    return (bx - ax + half) % MAP_SIZE - half, (by - ay + half) % MAP_SIZE - half


class Creature:
    def __init__(self, state: CreatureState, terrain: Terrain, blocked: np.ndarray):
        self.state = state
        self.terrain = terrain
        self.blocked = blocked

    def distance_to(self, px: float, py: float) -> float:
        dx, dy = wrapped_delta(self.state.x, self.state.y, px, py)
        return float(np.hypot(dx, dy))

    def receive_gift(self, gift: str) -> str:
        s = self.state
        s.gift, s.gift_timer = gift, 40
        if gift == "leaf":
            s.relationship, s.mode = "friend", "follow"
            s.timer = 0
            return "happy"
        s.relationship, s.mode = "fear", "flee"
        return "scared"

    def startle(self) -> str:
        self.state.mode, self.state.timer = "startled", STARTLE_FRAMES
        return "startle"

    def update(self, px: float, py: float, rng: np.random.Generator) -> str | None:
        """Advance one frame; returns the name of a call the creature makes, if any."""
        s = self.state
        call = None
        dx, dy = wrapped_delta(s.x, s.y, px, py)
        dist = float(np.hypot(dx, dy)) + 1e-6
        toward = (dx / dist, dy / dist)
        s.gift_timer = max(0, s.gift_timer - 1)
        s.cooldown = max(0, s.cooldown - 1)
        if s.mode == "startled":
            s.timer -= 1
            self._move(-toward[0], -toward[1], 0.45)
            if s.timer <= 0:
                s.mode = {"friend": "follow", "fear": "flee"}.get(s.relationship, "wander")
        elif s.mode == "wander":
            hx, hy = wrapped_delta(s.x, s.y, s.home_x, s.home_y)
            jitter = rng.normal(0, 0.6, 2)
            speed = 0.25 if np.hypot(hx, hy) > 5 else 0.06  # hurry home, then amble
            self._move(hx * 0.05 + jitter[0], hy * 0.05 + jitter[1], speed)
            if s.cooldown == 0 and dist < NOTICE_RADIUS:
                if s.relationship == "friend":
                    s.mode, call = "greet", "greet"
                elif s.relationship == "fear":
                    if dist < FLEE_RADIUS:
                        s.mode, call = "flee", "scared"
                else:
                    s.mode = "approach"
        elif s.mode == "approach":
            self._move(*toward, 0.16)
            if dist < ASK_RADIUS:
                s.mode, s.timer, call = "ask", 0, "ask"
            elif dist > NOTICE_RADIUS * 1.5:
                s.mode = "wander"
        elif s.mode == "ask":
            s.timer += 1
            if dist > ASK_RADIUS * 1.6:
                self._move(*toward, 0.16)
            if s.timer % ASK_CALL_EVERY == 0:
                call = "ask"
            if dist > NOTICE_RADIUS * 1.5:
                s.mode = "wander"
        elif s.mode in ("follow", "greet"):
            s.timer += 1
            if dist > 3.0:
                self._move(*toward, 0.34 if dist > 6 else 0.22)
            if s.mode == "greet" and dist < ASK_RADIUS:
                s.mode, s.timer = "follow", 0
            if s.mode == "follow" and s.timer > FOLLOW_FRAMES:
                self._wander_off(toward, rng)
        elif s.mode == "flee":
            if dist < SAFE_RADIUS:
                self._move(-toward[0], -toward[1], 0.32)
            else:
                s.home_x, s.home_y = s.x, s.y
                s.mode = "wander"
        s.x, s.y = float(s.x), float(s.y)
        s.hop = float(abs(np.sin(s.timer * 0.5)) * 0.5) if s.mood == "happy" else 0.0
        return call

    def _wander_off(self, toward: tuple[float, float], rng: np.random.Generator) -> None:
        s = self.state
        angle = np.arctan2(-toward[1], -toward[0]) + rng.normal(0, 0.5)
        s.home_x = (s.x + 35 * np.cos(angle)) % MAP_SIZE
        s.home_y = (s.y + 35 * np.sin(angle)) % MAP_SIZE
        s.mode, s.cooldown = "wander", COOLDOWN_FRAMES

    def _move(self, dx: float, dy: float, speed: float) -> None:
        norm = float(np.hypot(dx, dy))
        if norm < 1e-6:
            return
        s = self.state
        for angle in (0.0, 0.7, -0.7, 1.4, -1.4):  # slide around water and trees
            c, sn = np.cos(angle), np.sin(angle)
            mx, my = (dx * c - dy * sn) / norm, (dx * sn + dy * c) / norm
            nx, ny = (s.x + mx * speed) % MAP_SIZE, (s.y + my * speed) % MAP_SIZE
            cx, cy = self.terrain.cell(nx, ny)
            if not self.blocked[cy, cx]:
                s.x, s.y = nx, ny
                return
