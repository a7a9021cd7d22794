"""SimWorld: the stepping API (reset/step) over terrain, weather, fire, objects and creature."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np

from . import constants as C
from .audio import AudioGains, AudioMixer, build_audio_bank, wind_gain
from .constants import (
    BOB_HEIGHT,
    EYE_HEIGHT,
    PITCH_LIMIT,
    PITCH_RATE,
    STRIDE,
    TURN_RATE,
    WALK_SPEED,
)
from .creature import Creature, CreatureState, wrapped_delta
from .fire import ASH_RGB, FLAME_RGB, FireField
from .labels import LABEL_DTYPE
from .prompts import EVENT_IDS, resolve
from .reference import ReferenceSpec, load_reference_image, palette_from_image
from .render import LIGHT_GRID, LIGHT_SHIFT, Billboard, Camera, Lighting, Renderer, SceneMaps
from .sky import atmosphere, build_panorama
from .sprites import CREATURE_SHAPE, GIFT_SHAPE, ICON_SHAPE, OBJECT_SHAPES, build_sprite_book
from .terrain import (
    GROUND,
    MAP_MASK,
    MAP_SIZE,
    ROCK,
    SHORE,
    WATER,
    albedo_map,
    emissive_map,
    generate_terrain,
)
from .themes import THEME_IDS, Theme, apply_palette, get_theme

FIRE_TICK_FRAMES = 3
FIRE_CAST_DISTANCE = 7.0
FIRE_CAST_RADIUS = 3.0
SPAWN_DISTANCE = 12.0
MAX_OBJECTS = 24
CLAP_LOUDNESS = 0.6
CLAP_RADIUS = 30.0
CREATURE_KEY, ICON_KEY, GIFT_KEY = 1000, 1001, 1002
_LIGHT_STRENGTH = {"day": 0.2, "dusk": 0.6, "night": 1.0}


@dataclass(frozen=True)
class WorldSpec:
    seed: int = 0
    theme: str = "ember_forest"
    resolution: int = C.DEFAULT_RESOLUTION
    reference_image: ReferenceSpec | None = None  # PNG path or inline {sky, foliage, ground}

    def __post_init__(self) -> None:
        get_theme(self.theme)
        if self.resolution not in C.SUPPORTED_RESOLUTIONS:
            raise ValueError(f"resolution must be one of {C.SUPPORTED_RESOLUTIONS}")


@dataclass(frozen=True)
class AudioInput:
    """Audio-input features for one frame (e.g. from the microphone)."""

    loudness: float  # 0..1
    onset: bool = False  # a transient (clap, beat) starts this frame


@dataclass
class FrameInputs:
    """Everything the player does during one frame."""

    keys: int = 0  # held keys bitmask (constants.KEY_BITS)
    yaw: float = 0.0  # continuous camera deltas (radians), mouse/gamepad
    pitch: float = 0.0
    prompts: tuple[str, ...] = ()
    audio: AudioInput | None = None
    image: ReferenceSpec | np.ndarray | None = None

    @classmethod
    def hold(cls, *keys: str, **kwargs: Any) -> FrameInputs:
        mask = 0
        for key in keys:
            mask |= C.KEY_BITS[key]
        return cls(keys=mask, **kwargs)


@dataclass
class SimFrame:
    rgb: np.ndarray  # (H, W, 3) uint8
    audio: np.ndarray  # (800,) int16: [i/20 s, (i+1)/20 s)
    labels: np.void  # one LABEL_DTYPE record
    events: tuple[str, ...] = field(default=())  # prompt events fired this frame


@dataclass(frozen=True)
class SpawnedObject:
    kind: str
    x: float
    y: float
    base: float


class SimWorld:
    """A deterministic procedural world: same spec + same inputs -> identical frames and audio."""

    def __init__(self, spec: WorldSpec):
        self.spec = spec
        self.sprites = build_sprite_book()
        self.renderer = Renderer(spec.resolution, spec.seed)
        self.reset()

    # -- setup -----------------------------------------------------------------------------
    def reset(self) -> None:
        spec = self.spec
        terrain_seq, dyn_seq, audio_seq = np.random.SeedSequence(spec.seed).spawn(3)
        self.rng = np.random.default_rng(dyn_seq)
        self.base_theme = get_theme(spec.theme)
        self.theme_id = THEME_IDS[spec.theme]
        self.terrain = generate_terrain(self.base_theme, np.random.default_rng(terrain_seq))
        t = self.terrain
        self.material = t.material.ravel()
        self.blocked = t.blocked.copy()
        self.ground_flat = t.ground_height.ravel()
        self.height = t.height.ravel().copy()
        self.water = (self.material == WATER).astype(np.float32)
        self.fire = FireField(t.material == GROUND)
        self.ash = np.zeros(MAP_SIZE * MAP_SIZE, bool)
        self.fire_light = np.zeros(LIGHT_GRID * LIGHT_GRID, np.float32)
        self.lantern_light = np.zeros(LIGHT_GRID * LIGHT_GRID, np.float32)
        self.fire_near = 0.0
        self.weather, self.time_of_day, self.rainbow = "clear", "day", False
        self.objects: list[SpawnedObject] = []
        self.frame_index = 0
        self.last_drawn: set[int] = set()
        self.loudness, self.onset = 0.0, False
        self.reference_image: np.ndarray | None = None
        self.theme = self.base_theme
        if spec.reference_image is not None:
            self._set_reference(spec.reference_image)
        self._recolour()
        self.x, self.y = self._find_start()
        self.yaw = self._open_direction()
        self.pitch = 0.0
        self.walk = STRIDE  # distance since the last footstep; full stride = step on next move
        self.eye_ground = t.height_at(self.x, self.y)
        cx, cy = self._clear_point(self.x + 16 * np.cos(self.yaw), self.y + 16 * np.sin(self.yaw))
        self.creature = Creature(CreatureState(cx, cy, cx, cy), t, self.blocked)
        self.mixer = AudioMixer(build_audio_bank(self.base_theme, np.random.default_rng(audio_seq)))

    def _find_start(self) -> tuple[float, float]:
        for _ in range(2000):
            x, y = self.rng.uniform(0, MAP_SIZE, 2)
            cx, cy = int(x), int(y)
            window = self.blocked.take(range(cy - 4, cy + 5), 0, mode="wrap").take(
                range(cx - 4, cx + 5), 1, mode="wrap"
            )
            if not window.any() and self.material[cy * MAP_SIZE + cx] == GROUND:
                return cx + 0.5, cy + 0.5
        raise RuntimeError("no free start cell")  # pragma: no cover - every theme has grass

    def _open_direction(self) -> float:
        """A random heading with the longest unobstructed walk ahead (so episodes start open)."""
        offset = float(self.rng.uniform(0, 2 * np.pi))
        best, best_run = offset, -1
        for k in range(16):
            angle = offset + k * np.pi / 8
            run = 0
            while run < 40:
                px = (self.x + (run + 1) * np.cos(angle)) % MAP_SIZE
                py = (self.y + (run + 1) * np.sin(angle)) % MAP_SIZE
                if self.blocked[int(py), int(px)]:
                    break
                run += 1
            if run > best_run:
                best, best_run = angle, run
        return best

    def _clear_point(self, x: float, y: float) -> tuple[float, float]:
        """Nearest unblocked cell to (x, y), searching outward on a spiral of radii."""
        for radius in np.arange(0, 12, 0.5):
            for angle in np.linspace(0, 2 * np.pi, 12, endpoint=False):
                px = (x + radius * np.cos(angle)) % MAP_SIZE
                py = (y + radius * np.sin(angle)) % MAP_SIZE
                if not self.blocked[int(py), int(px)]:
                    return float(px), float(py)
        return x % MAP_SIZE, y % MAP_SIZE

    def _set_reference(self, spec: ReferenceSpec | np.ndarray) -> None:
        image = spec if isinstance(spec, np.ndarray) else load_reference_image(spec)
        self.reference_image = np.ascontiguousarray(image, np.uint8)
        self.theme = apply_palette(self.base_theme, palette_from_image(self.reference_image))

    def apply_reference(self, spec: ReferenceSpec | np.ndarray) -> None:
        """The world recoloured at once by a reference picture (what a pushed image does)."""
        self._set_reference(spec)
        self._recolour()

    def _recolour(self) -> None:
        """Rebuild albedo/emissive/lit maps (palette, weather or time of day changed)."""
        theme: Theme = self.theme
        self.albedo = albedo_map(self.terrain, theme).reshape(-1, 3)
        self.albedo[self.ash] = ASH_RGB
        self.emissive = emissive_map(self.terrain, theme).reshape(-1, 3)
        if self.fire.burning:
            self.emissive[self.fire.active] = FLAME_RGB[0]
        self._relight()

    def _relight(self) -> None:
        self.atmo = atmosphere(self.theme, self.weather, self.time_of_day)
        self.ambient = np.asarray(self.atmo.ambient, np.float32)
        self.lit = self.albedo * self.ambient + self.emissive
        key = (self.theme, self.weather, self.time_of_day, self.rainbow)
        if key != self.renderer.pano_key:
            r = self.renderer
            pano = build_panorama(
                self.atmo,
                self.time_of_day,
                self.weather,
                self.rainbow,
                r.pano_width,
                r.pano_height,
                self.spec.seed,
            )
            r.set_panorama(key, pano)

    # -- events ----------------------------------------------------------------------------
    def apply_event(self, event: str) -> None:
        if event in C.WEATHERS:
            self.weather = event
            if event != "clear":
                self.rainbow = False
            self._relight()
        elif event in C.TIMES_OF_DAY:
            self.time_of_day = event
            self._relight()
        elif event == "rainbow":
            self.rainbow = True
            if self.weather != "clear":
                self.weather = "clear"
            self._relight()
        elif event == "fire":
            self._cast_fire()
        elif event.startswith("spawn_"):
            self._spawn(event.removeprefix("spawn_"))
        elif event.startswith("gift_"):
            self.mixer.trigger("call_" + self.creature.receive_gift(event.removeprefix("gift_")))
        elif event.startswith("companion_"):
            self.creature.state.look = event.removeprefix("companion_")
            self.mixer.trigger("chime")
        else:  # pragma: no cover - guarded by the prompt library
            raise KeyError(event)

    def _ahead(self, distance: float) -> tuple[float, float]:
        return (self.x + distance * np.cos(self.yaw)) % MAP_SIZE, (
            self.y + distance * np.sin(self.yaw)
        ) % MAP_SIZE

    def _cast_fire(self) -> None:
        fx, fy = self._ahead(FIRE_CAST_DISTANCE)
        r = int(np.ceil(FIRE_CAST_RADIUS))
        dy, dx = np.mgrid[-r : r + 1, -r : r + 1]
        disc = dx**2 + dy**2 <= FIRE_CAST_RADIUS**2
        cells = (((int(fy) + dy[disc]) & MAP_MASK) << 8) | ((int(fx) + dx[disc]) & MAP_MASK)
        ignited = self.fire.ignite(cells.astype(np.int64), self.rng)
        self._burn(ignited, np.zeros(0, np.int64))
        self.mixer.trigger("chime")

    def _burn(self, ignited: np.ndarray, done: np.ndarray) -> None:
        active = self.fire.active
        if active.size:
            # Young cells (the spreading front) flame tall and bright; older ones glow as embers.
            life = self.fire.life[active]
            young = life > 8
            pick = self.rng.integers(0, 2, active.size) + np.where(young, 0, 2)
            flame = FLAME_RGB[pick] * np.where(young, 1.0, 0.7)[:, None]
            self.emissive[active] = flame
            self.albedo[active] = ASH_RGB
            flicker = self.rng.uniform(0.2, 1.2, active.size) * young
            self.height[active] = self.ground_flat[active] + flicker
            self.lit[active] = self.albedo[active] * self.ambient + flame
        if done.size:
            self.ash[done] = True
            self.emissive[done] = 0
            self.height[done] = self.ground_flat[done]
            self.lit[done] = ASH_RGB * self.ambient
        self.fire_light = self.fire.light_map(LIGHT_GRID, LIGHT_SHIFT)
        if active.size:
            dx = (active & MAP_MASK) - self.x
            dy = (active >> 8) - self.y
            dx = (dx + MAP_SIZE / 2) % MAP_SIZE - MAP_SIZE / 2
            dy = (dy + MAP_SIZE / 2) % MAP_SIZE - MAP_SIZE / 2
            self.fire_near = float(np.sum(1.0 / (1.0 + (dx * dx + dy * dy) / 100.0)))
        else:
            self.fire_near = 0.0

    def _spawn(self, kind: str) -> None:
        if len(self.objects) >= MAX_OBJECTS:
            return
        for distance in np.arange(SPAWN_DISTANCE, 4.0, -1.0):
            x, y = self._ahead(distance)
            if self.material[(int(y) << 8) | int(x)] != WATER:
                break
        base = float(self.ground_flat[(int(y) << 8) | int(x)])
        self.objects.append(SpawnedObject(kind, float(x), float(y), base))
        radius = OBJECT_SHAPES[kind].width / 4
        r = int(np.ceil(radius))
        for oy in range(-r, r + 1):
            for ox in range(-r, r + 1):
                if ox * ox + oy * oy <= radius * radius:
                    self.blocked[(int(y) + oy) & MAP_MASK, (int(x) + ox) & MAP_MASK] = True
        if kind == "lantern":
            cell = ((int(y) >> LIGHT_SHIFT) * LIGHT_GRID) + (int(x) >> LIGHT_SHIFT)
            bump = np.zeros(LIGHT_GRID * LIGHT_GRID, np.float32)
            bump[cell] = 1.0
            glow: np.ndarray = bump.reshape(LIGHT_GRID, LIGHT_GRID)
            for _ in range(2):
                glow = (glow + np.roll(glow, 1, 0) + np.roll(glow, -1, 0)) / 3
                glow = (glow + np.roll(glow, 1, 1) + np.roll(glow, -1, 1)) / 3
            self.lantern_light = np.minimum(self.lantern_light + 6 * glow.ravel(), 1.2)
        self.mixer.trigger("chime")

    # -- stepping --------------------------------------------------------------------------
    def step(self, inputs: FrameInputs | None = None) -> SimFrame:
        """Apply one frame of inputs and return that frame's picture, sound and labels."""
        inputs = inputs or FrameInputs()
        events: list[str] = []
        if inputs.image is not None:
            self.apply_reference(inputs.image)
        for text in inputs.prompts:
            resolved = resolve(text)
            if resolved.event is not None:
                self.apply_event(resolved.event)
                events.append(resolved.event)
        self.loudness *= 0.8
        self.onset = False
        if inputs.audio is not None:
            self.loudness = float(np.clip(inputs.audio.loudness, 0.0, 1.0))
            self.onset = bool(inputs.audio.onset)
            if (
                self.onset
                and self.loudness >= CLAP_LOUDNESS
                and self.creature.distance_to(self.x, self.y) < CLAP_RADIUS
            ):
                self.mixer.trigger("call_" + self.creature.startle())

        stepped = self._move(inputs)
        call = self.creature.update(self.x, self.y, self.rng)
        if call is not None:
            self.mixer.trigger("call_" + call)
        if self.fire.burning and self.frame_index % FIRE_TICK_FRAMES == 0:
            ignited, done = self.fire.tick(self.rng, wet=self.weather in ("rain", "snow"))
            self._burn(ignited, done)

        rgb, drawn = self._render()
        self.last_drawn = drawn  # billboard keys that drew pixels (engine/sim/visibility.py)
        surface = self._surface()
        if stepped:
            self.mixer.trigger("step_" + ("sand" if surface == "sand" else surface))
        called = any(grain.startswith("call_") for grain in self.mixer.started)
        audio = self.mixer.mix(self.frame_index, self._audio_gains())
        labels = self._labels(inputs, events, drawn, stepped, surface, called)
        self.frame_index += 1
        return SimFrame(rgb, audio, labels, tuple(events))

    def _move(self, inputs: FrameInputs) -> bool:
        keys = inputs.keys
        bits = C.KEY_BITS
        turn = bool(keys & bits["RIGHT"]) - bool(keys & bits["LEFT"])
        self.yaw += inputs.yaw + TURN_RATE * turn
        self.pitch = float(
            np.clip(
                self.pitch
                + inputs.pitch
                + PITCH_RATE * (bool(keys & bits["UP"]) - bool(keys & bits["DOWN"])),
                -PITCH_LIMIT,
                PITCH_LIMIT,
            )
        )
        forward = bool(keys & bits["W"]) - bool(keys & bits["S"])
        strafe = bool(keys & bits["D"]) - bool(keys & bits["A"])
        moved = 0.0
        if forward or strafe:
            c, s = np.cos(self.yaw), np.sin(self.yaw)
            dx, dy = forward * c - strafe * s, forward * s + strafe * c
            norm = WALK_SPEED / np.hypot(dx, dy)
            dx, dy = dx * norm, dy * norm
            for mx, my in ((dx, dy), (dx, 0.0), (0.0, dy)):  # slide along obstacles
                nx, ny = (self.x + mx) % MAP_SIZE, (self.y + my) % MAP_SIZE
                if not self.blocked[int(ny), int(nx)]:
                    self.x, self.y = nx, ny
                    moved = float(np.hypot(mx, my))
                    break
        stepped = False
        if moved > 0:
            self.walk += moved
            if self.walk >= STRIDE:
                self.walk -= STRIDE
                stepped = True
        else:
            self.walk = STRIDE
        ground = self.terrain.height_at(self.x, self.y)
        self.eye_ground += 0.5 * (ground - self.eye_ground)
        return stepped

    def _surface(self) -> str:
        material = self.material[(int(self.y) << 8) | int(self.x)]
        if material == ROCK:
            return "rock"
        if material == SHORE:
            return "sand"
        return self.theme.ground_surface

    def camera(self) -> Camera:
        walking = self.walk < STRIDE
        bob = BOB_HEIGHT * np.sin(np.pi * self.walk / STRIDE) if walking else 0.0
        return Camera(self.x, self.y, self.yaw, self.pitch, self.eye_ground + EYE_HEIGHT + bob)

    def look(self, turn: float) -> np.ndarray:
        """(H, W, 3) uint8: this moment seen from where the player stands, turned `turn`
        radians to the right (the pitch kept). Nothing moves, no time passes and the next
        `step` is the same as without the look (what it touches is put back)."""
        rng_state = self.rng.bit_generator.state
        r = self.renderer
        last = r.last_source, r.last_cells
        yaw, frame = self.yaw, self.frame_index
        try:
            self.yaw = yaw + turn
            self.frame_index = max(frame - 1, 0)  # the frame `step` last drew (water, weather)
            rgb, _ = self._render()
        finally:
            self.yaw, self.frame_index = yaw, frame
            self.rng.bit_generator.state = rng_state
            r.last_source, r.last_cells = last
        return rgb

    def look_around(self, views: int = 4) -> np.ndarray:
        """(views - 1, H, W, 3): the rest of a full turn in `views` equal steps to the right
        (with the 90-degree field of view, 4 views cover the whole turn edge to edge)."""
        return np.stack([self.look(2 * np.pi * q / views) for q in range(1, views)])

    def _render(self) -> tuple[np.ndarray, set[int]]:
        strength = _LIGHT_STRENGTH[self.time_of_day]
        light = None
        if self.fire.burning or self.objects and self.lantern_light.any():
            flicker = 0.85 + 0.3 * self.rng.random() if self.fire.burning else 1.0
            light = self.fire_light * flicker + self.lantern_light * (0.5 + self.loudness)
        lighting = Lighting(
            self.ambient,
            np.asarray(self.atmo.fog_rgb, np.float32),
            self.atmo.fog_distance,
            np.array([255, 140, 50], np.float32) * 0.8 * strength,
        )
        maps = SceneMaps(self.height, self.lit, self.water, light)
        return self.renderer.render(
            self.camera(), maps, lighting, self._billboards(), self.weather, self.frame_index
        )

    def _billboards(self) -> list[Billboard]:
        boards = []
        glow = 0.55 + 0.9 * self.loudness + (0.5 if self.onset else 0.0)
        flap = (self.frame_index // 4) % 2
        for i, obj in enumerate(self.objects):
            frames = self.sprites.objects[obj.kind]
            boards.append(
                Billboard(
                    i,
                    obj.x,
                    obj.y,
                    obj.base,
                    OBJECT_SHAPES[obj.kind],
                    frames[flap % len(frames)],
                    glow if obj.kind == "lantern" else 1.0,
                )
            )
        s = self.creature.state
        x, y = s.x, s.y
        if s.mood in ("afraid", "startled"):
            x += 0.12 * np.sin(self.frame_index * 2.7)
        base = float(self.ground_flat[(int(y) & MAP_MASK) << 8 | (int(x) & MAP_MASK)])
        boards.append(
            Billboard(
                CREATURE_KEY, x, y, base, CREATURE_SHAPE, self.sprites.creature[s.look], lift=s.hop
            )
        )
        icon = s.mood if s.mood in ("curious", "happy", "afraid", "startled") else None
        if icon:
            boards.append(
                Billboard(
                    ICON_KEY,
                    x,
                    y,
                    base,
                    ICON_SHAPE,
                    self.sprites.icons[icon],
                    lift=s.hop + CREATURE_SHAPE.height + 0.15,
                )
            )
        if s.gift_timer > 0 and s.gift:
            boards.append(
                Billboard(
                    GIFT_KEY, x + 0.6, y, base, GIFT_SHAPE, self.sprites.icons[s.gift], lift=0.8
                )
            )
        return boards

    def _audio_gains(self) -> AudioGains:
        theme = self.base_theme
        return AudioGains(
            ambient=0.5 if self.time_of_day == "night" else 1.0,
            wind=wind_gain(theme.wind, self.weather),
            rain=1.0 if self.weather == "rain" else 0.0,
            fire=float(min(1.0, self.fire_near / 8.0)),
        )

    def _labels(self, inputs, events, drawn, stepped, surface, called) -> np.void:
        objects_present = objects_in_view = 0
        for i, obj in enumerate(self.objects):
            bit = 1 << C.OBJECT_KINDS.index(obj.kind)
            objects_present |= bit
            if i in drawn:
                objects_in_view |= bit
        s = self.creature.state
        record = np.zeros((), LABEL_DTYPE)
        record[()] = (
            inputs.keys,
            inputs.yaw,
            inputs.pitch,
            C.WEATHERS.index(self.weather),
            C.TIMES_OF_DAY.index(self.time_of_day),
            self.fire.burning,
            self.fire.active.size,
            self.rainbow,
            objects_present,
            objects_in_view,
            C.CREATURE_MOODS.index(s.mood),
            C.RELATIONSHIPS.index(s.relationship),
            CREATURE_KEY in drawn,
            self.creature.distance_to(self.x, self.y),
            C.COMPANION_LOOKS.index(s.look),
            self.theme_id,
            EVENT_IDS[events[0]] if events else -1,
            stepped,
            C.SURFACES.index(surface),
            called,
            self.loudness,
            self.onset,
            inputs.image is not None,
            self.x,
            self.y,
            self.yaw,
            self.pitch,
            self.frame_index,
        )
        return cast(np.void, record[()])  # a 0-d structured array's one row

    # -- convenience -----------------------------------------------------------------------
    def player_delta_to(self, x: float, y: float) -> tuple[float, float]:
        return wrapped_delta(self.x, self.y, x, y)
