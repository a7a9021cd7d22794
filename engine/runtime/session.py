"""World and Session: the narrow runtime API the web side calls.

    world = World.load()                       # engine/weights by default
    session = world.start(WorldSpec(seed=1, theme="frost_valley"))
    session.push(Action(keys=("W",)))          # or push({"kind": "prompt", "text": "..."})
    chunk = session.next_chunk()               # Chunk(video, audio, pts, ...)

Threading: `push` is thread-safe (the event loop may call it while another thread runs
`next_chunk`); one thread at a time may call `next_chunk`. `prepare` does an event's slow part
(a sentence's encoding, ~30 ms) on any thread, so a real-time caller can keep it off the thread
that generates frames and push the prepared event there. Frame i is presented at i / 20 s and
its audio covers [i / 20, (i + 1) / 20) s at 16 kHz.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from engine.model.audio_ae import AudioAE, AudioAEConfig, float_to_int16, int16_to_float
from engine.model.checkpoint import load_checkpoint
from engine.model.conv_world import ConvWorldModel, warp_picture
from engine.model.depth_head import DEPTH_FILE, DepthHead, DepthHeadConfig
from engine.model.inputs import input_features
from engine.model.palette_edit import PALETTE_EDIT_FILE, PaletteEdit, PaletteEditConfig
from engine.model.particles import PARTICLES_FILE, Particles, ParticlesConfig
from engine.model.scene_edit import (
    LOCAL_EVENTS,
    SCENE_EDIT_FILE,
    SCENE_EVENTS,
    SceneEdit,
    SceneEditConfig,
)
from engine.model.sentence_snap import SNAP_FILE, SentenceSnap
from engine.model.text import TextEncoder
from engine.model.video_ae import (
    VideoAE,
    VideoAEConfig,
    frames_to_tensor,
    image_token,
    tensor_to_frames,
)
from engine.model.world import INPUT_FEATURES
from engine.model.world_loader import Generator, load_world_model
from engine.spec import FPS, SAMPLE_RATE, SAMPLES_PER_FRAME, THEME_NAMES

from .conv_rollout import ConvRollout
from .events import Action, AudioIn, EncodedPrompt, Event, EventError, Image, Prompt, parse_event
from .openings import OPENINGS_FILE, Openings
from .rollout import LatentRollout

DEFAULT_WEIGHTS = Path(__file__).resolve().parent.parent / "weights"
WEIGHT_FILES = ("video_ae.pt", "audio_ae.pt", "world.pt")
LONG_CHUNK_FRAMES = 4  # a sentence or image opens a chunk this long; actions get 1 frame


@dataclass
class Chunk:
    video: np.ndarray  # (n, H, W, 3) uint8
    audio: np.ndarray  # (n * 800,) int16 mono at 16 kHz
    pts: np.ndarray  # (n,) float64 presentation time of each frame, seconds
    first_frame: int  # session frame index of video[0]
    sample_rate: int = SAMPLE_RATE
    fps: int = FPS
    answered: list[int] = field(default_factory=list)  # ids of pushed events applied here
    gen_ms: float = 0.0  # wall time spent generating this chunk

    @property
    def audio_pts(self) -> float:
        return float(self.pts[0]) if len(self.pts) else 0.0


def shown_pictures(decoded: torch.Tensor, moves: list[torch.Tensor | None]) -> torch.Tensor:
    """Decoded frames (n, 3, H, W) as a player sees them: each moved by what its rollout's
    whole-cell history has not moved yet (`ConvRollout.display_move`; None: as decoded)."""
    if all(m is None for m in moves):
        return decoded
    return torch.cat(
        [
            decoded[i : i + 1] if m is None else warp_picture(decoded[i : i + 1], m)
            for i, m in enumerate(moves)
        ]
    )


class World:
    """Loaded weights (tokenizers + world transformer); start any number of sessions."""

    def __init__(
        self,
        video_ae: VideoAE,
        audio_ae: AudioAE,
        model: Generator,
        text_encoder: TextEncoder | None = None,
        openings: Openings | None = None,
        snap: SentenceSnap | None = None,
        particles: Particles | None = None,
        scene_edit: SceneEdit | None = None,
        depth: DepthHead | None = None,
        palette_edit: PaletteEdit | None = None,
    ):
        self.video_ae, self.audio_ae, self.model = video_ae.eval(), audio_ae.eval(), model.eval()
        self.depth = depth.eval() if depth is not None else None  # the walk warp's depth
        self.particles = particles.eval() if particles is not None else None
        self.scene_edit = scene_edit.eval() if scene_edit is not None else None
        self.palette_edit = palette_edit.eval() if palette_edit is not None else None
        self.text = text_encoder or TextEncoder()
        self.snap = snap
        self.resolution = 8 * model.config.latent_size
        cfg = model.config
        if openings is not None:
            shape = tuple(next(iter(openings.video.values())).shape[2:])
            if shape != (cfg.latent_channels, cfg.latent_size, cfg.latent_size):
                raise ValueError(
                    f"opening keyframes have latent shape {shape}, the model "
                    "expects another: rebuild them with python -m engine.train "
                    "openings"
                )
        self.openings = openings

    @classmethod
    def load(
        cls,
        weights_dir: str | Path | None = None,
        threads: int | None = None,
        preload_text: bool = False,
    ) -> World:
        """Load the shipped weights (fp16 on disk, fp32 in memory: fp32 is what is fast here)."""
        if threads is not None:
            torch.set_num_threads(threads)
        folder = Path(weights_dir) if weights_dir is not None else DEFAULT_WEIGHTS
        missing = [f for f in WEIGHT_FILES if not (folder / f).exists()]
        if missing:
            raise FileNotFoundError(f"weights missing in {folder}: {missing}")
        openings, snap, particles, scene_edit, depth, palette_edit = (
            folder / OPENINGS_FILE,
            folder / SNAP_FILE,
            folder / PARTICLES_FILE,
            folder / SCENE_EDIT_FILE,
            folder / DEPTH_FILE,
            folder / PALETTE_EDIT_FILE,
        )
        world = cls(
            load_checkpoint(folder / "video_ae.pt", VideoAE, VideoAEConfig),
            load_checkpoint(folder / "audio_ae.pt", AudioAE, AudioAEConfig),
            load_world_model(folder / "world.pt"),
            openings=Openings.load(openings) if openings.exists() else None,
            snap=SentenceSnap.load(snap) if snap.exists() else None,
            particles=load_checkpoint(particles, Particles, ParticlesConfig)
            if particles.exists()
            else None,
            scene_edit=load_checkpoint(scene_edit, SceneEdit, SceneEditConfig)
            if scene_edit.exists()
            else None,
            depth=load_checkpoint(depth, DepthHead, DepthHeadConfig) if depth.exists() else None,
            palette_edit=load_checkpoint(palette_edit, PaletteEdit, PaletteEditConfig)
            if palette_edit.exists()
            else None,
        )
        if preload_text:
            world.text.encode(["warm up"])
        return world

    def encode_sentence(self, text: str) -> np.ndarray:
        """(TEXT_DIM,) what the model is told for a typed sentence: its embedding, moved onto
        the training sentences it resembles where the weights carry a `SentenceSnap`."""
        return self.read_sentence(text)[0]

    def read_sentence(self, text: str) -> tuple[np.ndarray, str | None]:
        """`encode_sentence`'s embedding and the event the sentence asks for (None where the
        weights' snap names no events or the sentence is like no training sentence)."""
        vector = self.text.encode([text])
        if self.snap is None:
            return vector[0], None
        snapped, events = self.snap.read(vector)
        return snapped[0], events[0]

    def new_rollout(
        self, theme: int, image: torch.Tensor | None = None, seed: int = 0, steps: int | None = None
    ) -> LatentRollout | ConvRollout:
        """A latent rollout as these weights are meant to run (the generator's own rollout,
        projection per the config): sessions, eval and measurements should all build theirs
        here."""
        if isinstance(self.model, ConvWorldModel):
            return ConvRollout(self.model, theme, image, seed=seed, depth=self.depth)
        project = self.video_ae if self.model.config.project_context else None
        return LatentRollout(self.model, theme, image, seed=seed, steps=steps, project=project)

    @property
    def params(self) -> int:
        return sum(
            p.numel() for m in (self.video_ae, self.audio_ae, self.model) for p in m.parameters()
        )

    def start(
        self, spec=None, *, seed: int = 0, theme: str = THEME_NAMES[0], opening: bool = True
    ) -> Session:
        """Start a session from a WorldSpec (or a dict with seed/theme/reference_image).

        With `opening` (and an openings file beside the weights) the session's history starts
        with its theme's opening keyframes (engine/runtime/openings.py); frame 0 is generated.
        """
        if spec is not None:
            get = spec.get if isinstance(spec, dict) else lambda k, d=None: getattr(spec, k, d)
            seed, theme = get("seed", seed), get("theme", theme)
            reference = get("reference_image", None)
        else:
            reference = None
        if theme not in THEME_NAMES:
            raise EventError(f"unknown theme {theme!r}; known: {', '.join(THEME_NAMES)}")
        if not isinstance(seed, int) or isinstance(seed, bool):
            raise EventError("seed must be an integer")
        session = Session(self, THEME_NAMES.index(theme), seed)
        if opening and self.openings is not None:
            session.open_from(*self.openings.pick(theme, seed))
        if reference is not None:
            session.push(Image(reference))
        return session


class Session:
    def __init__(self, world: World, theme: int, seed: int):
        self.world = world
        self.rollout = world.new_rollout(theme, None, seed=seed)
        # the rain or snow over the picture (engine/model/particles.py): its own random
        # numbers, so the world's draws are the same with or without it
        self.particle_noise = torch.Generator().manual_seed(seed)
        self.particle_code = world.particles.rest_code if world.particles is not None else 0
        self.frame_index = 0
        self._lock = threading.Lock()
        self._keys = 0
        self._yaw = self._pitch = 0.0
        self._loudness, self._onset = 0.0, False
        self._prompts: list[tuple[np.ndarray, str | None]] = []  # (embedding, its event)
        self._image: np.ndarray | None = None
        self._pending_ids: list[int] = []
        self._next_id = 0
        self.closed = False

    # -- input ----------------------------------------------------------------------------------
    def prepare(self, event: Event | dict) -> Event:
        """The event validated, a sentence already encoded: `push` of the result is quick.
        Touches no session state (any thread); raises EventError on bad input."""
        event = parse_event(event)
        if isinstance(event, Prompt) and not isinstance(event, EncodedPrompt):
            return EncodedPrompt(event.text, *self.world.read_sentence(event.text))
        return event

    def push(self, event: Event | dict) -> int:
        """Queue an input for the next frame; returns an id reported in `Chunk.answered`."""
        if self.closed:
            raise EventError("session is closed")
        event = self.prepare(event)  # a sentence: ~30 ms, outside the lock
        embedding = picture = asked = None
        if isinstance(event, EncodedPrompt):
            embedding, asked = event.embedding, event.event
        elif isinstance(event, Image):
            picture = event.picture()
        with self._lock:
            if isinstance(event, Action):
                self._keys = event.mask
                self._yaw += event.yaw
                self._pitch += event.pitch
            elif isinstance(event, Prompt):
                if embedding is not None:  # always set for a Prompt (above)
                    self._prompts.append((embedding, asked))
            elif isinstance(event, Image):
                self._image = picture
            elif isinstance(event, AudioIn):
                self._loudness, onset = event.features(self._loudness)
                self._onset = self._onset or onset
            event_id = self._next_id
            self._next_id += 1
            self._pending_ids.append(event_id)
        return event_id

    def _take_inputs(self):
        with self._lock:
            state = (
                self._keys,
                self._yaw,
                self._pitch,
                self._loudness,
                self._onset,
                self._prompts[:1],
                self._image,
                self._pending_ids,
            )
            self._yaw = self._pitch = 0.0
            self._onset = False
            self._prompts = self._prompts[1:]  # one sentence per frame; the rest follow
            self._image = None
            self._pending_ids = []
        return state

    # -- output ---------------------------------------------------------------------------------
    @torch.inference_mode()
    def next_chunk(self, max_frames: int | None = None) -> Chunk:
        """Generate the next chunk: 1 frame, or LONG_CHUNK_FRAMES after a sentence/image."""
        if self.closed:
            raise EventError("session is closed")
        t0 = time.perf_counter()
        first = self.frame_index
        latents: list[torch.Tensor] = []
        pictures: list[torch.Tensor | None] = []
        audio: list[torch.Tensor] = []
        answered: list[int] = []
        moves: list[torch.Tensor | None] = []
        particle_codes: list[int] = []
        length = 1
        while len(latents) < length:
            keys, yaw, pitch, loud, onset, prompts, image, ids = self._take_inputs()
            answered += ids
            text = prompts[0][0] if prompts else None
            if prompts and prompts[0][1] is not None:
                self._edit_scene(prompts[0][1])
            if image is not None:
                self._show_picture(image)
            if (text is not None or image is not None) and not latents:
                length = LONG_CHUNK_FRAMES
            if max_frames is not None:
                length = max(1, min(length, max_frames))
            inputs = input_features(keys, yaw, pitch, loud, onset, image is not None)
            particle_codes.append(self._next_particle_code(text))
            z, a = self.rollout.generate(inputs, self.frame_index, text)
            latents.append(z)
            pictures.append(self.rollout.last_frame)
            moves.append(self.rollout.display_move())
            audio.append(a)
            self.frame_index += 1
        if pictures[0] is not None:  # projection already decoded every frame
            decoded = torch.cat([p for p in pictures if p is not None])
        else:
            decoded = self.world.video_ae.decode(torch.stack(latents))
        if self.world.particles is not None:
            codes = torch.tensor(particle_codes)
            decoded = self.world.particles.composite(decoded, codes, self.particle_noise)
        video = tensor_to_frames(shown_pictures(decoded, moves))
        wave = float_to_int16(self.world.audio_ae.decode(torch.stack(audio)).reshape(-1))
        pts = np.arange(first, self.frame_index, dtype=np.float64) / FPS
        assert wave.size == len(latents) * SAMPLES_PER_FRAME
        return Chunk(
            video, wave, pts, first, answered=answered, gen_ms=(time.perf_counter() - t0) * 1000
        )

    def _edit_scene(self, event: str) -> None:
        """The world changed at once by the event a sentence asked for: every history frame
        edited by the weights' scene edit (engine/model/scene_edit.py), if they carry one."""
        edit = self.world.scene_edit
        if edit is None or event not in SCENE_EVENTS or not isinstance(self.rollout, ConvRollout):
            return
        self.rollout.rewrite_history(
            lambda latents: edit.change(latents, event), everywhere=event not in LOCAL_EVENTS
        )

    def _show_picture(self, picture: np.ndarray) -> None:
        """The network told the reference picture; with the weights' palette edit
        (engine/model/palette_edit.py) the world is first recoloured at once, every history
        frame and every direction the session knows (before the rollout hears of the
        picture, which forgets what was not rewritten); as the history then shows the
        picture, the code keep holds it from now, and an edit trained for it (`holds`) stays
        on for every new frame (`ConvRollout.hold_change`) until another picture comes."""
        edit, roll = self.world.palette_edit, self.rollout
        token = image_token(self.world.video_ae, picture)
        if edit is None or not isinstance(roll, ConvRollout):
            roll.set_image(token)
            return
        theme = int(roll.theme[0])

        def change(latents: torch.Tensor) -> torch.Tensor:
            return edit.recolour(latents, picture, theme)

        roll.rewrite_history(change, everywhere=True, drawn=False)
        if edit.config.holds:
            roll.hold_change(change)
        roll.set_image(token)
        roll.settle_picture()

    def _next_particle_code(self, text: np.ndarray | None) -> int:
        """The particle code of the frame about to be generated, from the last one and the
        sentence typed at it (the rollout is told the weather it shows, for the sound)."""
        if self.world.particles is None:
            return 0
        told = None if text is None else torch.as_tensor(text, dtype=torch.float32)
        self._show_particle_code(self.world.particles.next_code(self.particle_code, told))
        return self.particle_code

    def _show_particle_code(self, code: int) -> None:
        self.particle_code = code
        if self.world.particles is not None and isinstance(self.rollout, ConvRollout):
            self.rollout.weather = self.world.particles.weather_of(code)

    @torch.inference_mode()
    def prime(
        self,
        frames: np.ndarray,
        audio: np.ndarray | None = None,
        around: np.ndarray | None = None,
        inputs: np.ndarray | None = None,
    ) -> None:
        """Start from known pictures (e.g. a simulator clip): (n, H, W, 3) uint8 frames and
        optional (n, 800) int16 audio become the context, as if generated; idle inputs.
        `around` (m, H, W, 3), if given, is the rest of a full turn from the last frame in
        m + 1 equal steps to the right (`SimWorld.look_around`): the directions the session
        knows before it first faces them. `inputs` (k, INPUT_FEATURES), if given, are the
        inputs of the frames up to the last known one, oldest first (k may exceed n: a clip's
        whole past): the session's footsteps keep that walk's rhythm. The known pictures show
        the world with the session's reference picture, if it has one: it counts as settled
        (`settle_picture`)."""
        pictures = frames_to_tensor(self._checked_frames(frames, "prime"))
        if inputs is not None:
            inputs = np.asarray(inputs, np.float32)
            if inputs.ndim != 2 or inputs.shape[1] != INPUT_FEATURES:
                raise EventError(f"prime inputs must be (k, {INPUT_FEATURES}) input features")
        z = self.world.video_ae.encode(pictures)
        if self.world.particles is not None and len(pictures):
            particles = self.world.particles
            self._show_particle_code(int(particles.nearest(particles.read(pictures[-1:]))[0]))
        a = (
            self.world.audio_ae.encode(int16_to_float(audio))
            if audio is not None
            else torch.zeros(len(frames), self.world.audio_ae.config.latent_dim)
        )
        for i in range(len(frames)):
            self.rollout.observe(
                z[i], a[i], input_features(0, 0, 0, 0, False, False), self.frame_index
            )
            self.frame_index += 1
        if around is not None:
            views = frames_to_tensor(self._checked_frames(around, "around"))
            self.rollout.remember_around(self.world.video_ae.encode(views))
        if isinstance(self.rollout, ConvRollout):
            if inputs is not None:
                self.rollout.keep_stride(inputs)
            if len(frames):
                self._settle_picture(self.rollout)

    def _settle_picture(self, rollout: ConvRollout) -> None:
        """A reference picture given before the known pictures is one they already show: it
        is set now, not at the next frame (where it would open the recolouring window), and
        the code keep holds from the first generated frame."""
        with self._lock:
            picture, self._image = self._image, None
        if picture is not None:
            rollout.set_image(image_token(self.world.video_ae, picture))
        rollout.settle_picture()

    def _checked_frames(self, frames: np.ndarray, name: str) -> np.ndarray:
        frames = np.asarray(frames)
        size = self.world.resolution
        if frames.ndim != 4 or frames.shape[1:] != (size, size, 3):
            raise EventError(f"{name} frames must be (n, {size}, {size}, 3) uint8")
        return frames

    @torch.inference_mode()
    def open_from(
        self, video: torch.Tensor, audio: torch.Tensor, around: torch.Tensor | None = None
    ) -> None:
        """Known latents (n, C, S, S) and (n, A) become the history before frame 0; `around`
        (m, C, S, S), the rest of a full turn from the last of them (`Session.prime`), what
        the session knows of the directions it has not faced yet."""
        idle = input_features(0, 0, 0, 0, False, False)
        for i in range(len(video)):
            self.rollout.observe(video[i], audio[i], idle, i - len(video))
        if around is not None:
            self.rollout.remember_around(around)

    def close(self) -> None:
        self.closed = True
