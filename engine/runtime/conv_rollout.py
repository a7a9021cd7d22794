"""Latent autoregression for the convolutional world model (engine/model/conv_world.py).

The same surface as `LatentRollout` (observe, generate, add_text, set_image, last_frame), so
sessions, the eval and measurements run either generator through `World.new_rollout`:

    roll = ConvRollout(model, theme_id)
    roll.observe(z, audio_latent, inputs, frame)     # a known frame
    z, a = roll.generate(inputs, frame, text)        # the model's next frame

A frame costs one network evaluation (`sampler_steps` for a denoising model, from noise
drawn with the session's seed; a code model draws its codes with that seed); the history is the
last `context` latents.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import torch

from engine.model.conv_world import (
    MEMORY_SLOTS,
    PICTURE_SETTLE_FRAMES,
    WALK_KEYS,
    Conditioning,
    ConvWorldModel,
    camera_shift,
    sample_frame,
    walk_flow,
)
from engine.model.depth_head import DepthHead
from engine.model.latent_codes import CodeDraws
from engine.model.sound_cues import StrideClock, weather_cues
from engine.model.view_memory import ViewMemory
from engine.spec import PITCH_CELLS_PER_RADIAN, PITCH_LIMIT

HORIZON_LIMIT = math.tan(PITCH_LIMIT) * PITCH_CELLS_PER_RADIAN  # 3.9 cells


def _whole_cells(move: torch.Tensor, rest: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """A move in cells plus what earlier frames carried -> (the whole cells to move now,
    the rest to carry on)."""
    total = rest + move
    whole = torch.round(total)
    return whole, total - whole


class ConvRollout:
    def __init__(
        self,
        model: ConvWorldModel,
        theme: int,
        image_token: torch.Tensor | None = None,
        seed: int = 0,
        steps: int | None = None,
        project: object | None = None,
        depth: DepthHead | None = None,
    ):
        del steps, project  # the model's own sampler steps; it never re-encodes
        self.model = model
        self.depth = depth  # each history cell's inverse depth, for the walk warp
        self.gen = torch.Generator().manual_seed(seed)  # a denoiser's noise, a code model's draws
        cfg = model.config
        self.draws = CodeDraws(self.gen, cfg.code_noise_blur, cfg.code_noise_memory)
        self.views: ViewMemory | None = None  # what each direction looked like, last seen
        self.warp_rest = torch.zeros(1, 2)  # camera move not yet applied (whole-cell warps)
        size = cfg.latent_size
        self.walk_rest = torch.zeros(1, 2, size, size)  # each cell's step not yet applied
        self.horizon = torch.zeros(1)  # cells below the frame's middle (the walk warp's)
        if cfg.camera_warp and cfg.view_memory:
            self.views = ViewMemory(cfg.latent_channels, cfg.latent_size)
        self.theme = torch.tensor([theme])
        self.image = self._image_row(image_token)
        # the frame the reference picture arrived (a picture given at the start: frame 0)
        self.image_since: int | None = None if image_token is None else 0
        self.history: list[torch.Tensor] = []  # newest last, at most `context`
        self.audio = torch.zeros(1, 0, cfg.audio_dim)  # (1, H, A) last sounds, newest last
        self.stride = StrideClock()  # the walk's footstep rhythm, for a model with sound cues
        # the weather the session's picture shows (a WEATHERS index, set by the session from
        # its particle layer), for a model with weather cues
        self.weather = 0
        self.texts: list[tuple[torch.Tensor, int]] = []  # (embedding, arrival frame)
        # the arrival frames of the sentences whose change the history shows (`rewrite_history`)
        self.drawn: set[int] = set()
        self.held_change: Callable[[torch.Tensor], torch.Tensor] | None = None  # `hold_change`
        self.frame = 0
        self.last_frame: torch.Tensor | None = None  # never decoded here

    def _image_row(self, token: torch.Tensor | None) -> torch.Tensor:
        if token is None:
            return torch.zeros(1, self.model.config.image_dim)
        return token.float().view(1, -1)

    def add_text(self, embedding: np.ndarray | torch.Tensor, frame: int | None = None) -> None:
        arrival = self.frame if frame is None else frame
        self.texts.append((torch.as_tensor(embedding, dtype=torch.float32).view(-1), arrival))
        self.texts = self.texts[-MEMORY_SLOTS:]
        self.drawn &= {a for _, a in self.texts}
        self._world_changed()

    def set_image(self, token: torch.Tensor) -> None:
        self.image = self._image_row(token)
        self.image_since = self.frame
        self._world_changed()

    def settle_picture(self) -> None:
        """The history already shows the reference picture (known frames of the world with
        it): the code keep holds from now, with no `PICTURE_SETTLE_FRAMES` window for the
        world to recolour in (in it, a primed session changed 50 times more than the
        simulator from frame to frame while standing still; MODEL.md v27)."""
        if self.image_since is not None:
            self.image_since = min(self.image_since, self.frame - PICTURE_SETTLE_FRAMES)

    def _world_changed(self) -> None:
        """A sentence or a picture may change the whole world: the directions the session was
        only told of (`remember_around`) show it as it was, and a turn would bring that back."""
        if self.views is not None:
            self.views.forget_told()

    def _conditioning(self, inputs, frame: int, text) -> Conditioning:
        cfg = self.model.config
        memory = torch.zeros(1, MEMORY_SLOTS, cfg.text_dim)
        age = torch.zeros(1, MEMORY_SLOTS)
        valid = torch.zeros(1, MEMORY_SLOTS, dtype=torch.bool)
        drawn = torch.zeros(1, MEMORY_SLOTS, dtype=torch.bool)
        offset = MEMORY_SLOTS - len(self.texts)  # newest in the last slot, as in training
        for i, (embedding, arrival) in enumerate(self.texts):
            memory[0, offset + i] = embedding
            age[0, offset + i] = frame - arrival
            valid[0, offset + i] = True
            drawn[0, offset + i] = arrival in self.drawn
        now = torch.zeros(1, cfg.text_dim)
        if text is not None:
            now = torch.as_tensor(text, dtype=torch.float32).view(1, -1)
        return Conditioning(
            inputs=torch.as_tensor(inputs, dtype=torch.float32).view(1, -1),
            text=now,
            memory=memory,
            memory_age=age,
            memory_valid=valid,
            theme=self.theme,
            image=self.image,
            noise=torch.full((1,), cfg.run_noise),
            image_age=None
            if self.image_since is None
            else torch.tensor([float(frame - self.image_since)]),
            drawn=drawn,
        )

    def _context(self) -> tuple[torch.Tensor, torch.Tensor]:
        cfg = self.model.config
        shape = (cfg.latent_channels, cfg.latent_size, cfg.latent_size)
        missing = cfg.context - len(self.history)
        frames = [torch.zeros(shape)] * missing + self.history
        valid = torch.tensor([[False] * missing + [True] * len(self.history)])
        return torch.stack(frames)[None], valid

    def observe(
        self,
        z: torch.Tensor,
        audio: torch.Tensor,
        inputs,
        frame: int,
        text: np.ndarray | torch.Tensor | None = None,
    ) -> None:
        """A clean frame (known or just generated) joins the history. As with
        `LatentRollout`, remembering a sentence is `add_text`'s job (`generate` does it);
        `inputs` and `text` are what the frame was made from: only the camera warp reads the
        inputs (where the camera now looks: the view memory's place and the horizon)."""
        del text
        if self.model.config.camera_warp:
            dx, dy = camera_shift(torch.as_tensor(inputs, dtype=torch.float32).view(1, -1))[0]
            self._track_camera(dx.item(), dy.item())
        if self.model.config.codes:  # a code model's history is codes (it trained on no other)
            z = self._as_codes(z)
        self._remember(z, audio, frame)

    def keep_stride(self, inputs: np.ndarray) -> None:
        """The inputs (n, INPUT_FEATURES) of frames the session did not generate, oldest first
        (a primed session's known past): its footsteps go on in the walk's rhythm."""
        self.stride.advance(inputs)

    def remember_around(self, latents: torch.Tensor) -> None:
        """The rest of a full turn from the current view, (n, C, S, S) in n + 1 equal steps to
        the right, seen at the same moment: the view memory knows those directions before
        the camera first faces them (without a view memory there is nothing to fill)."""
        if self.views is None:
            return
        if self.model.config.codes:
            latents = self.model.snap(latents.float())
        self.views.write_around(latents)

    def rewrite_history(
        self, change: Callable[[torch.Tensor], torch.Tensor], everywhere: bool, drawn: bool = True
    ) -> None:
        """Every history frame changed by `change` ((n, C, S, S) -> the same; a code model's
        result snapped to its codes): the world changed at once (a sentence's scene edit).
        A change `everywhere` (night, rain, a reference picture) changes what the view
        memory holds of the other directions too (`ViewMemory.rewrite`), so a turn there
        shows the same place in the changed world.
        The sentence typed at the next frame is the one drawn: the network is still told it,
        but not guided by it, and the code keep holds the change (`Conditioning.drawn`;
        guided and unkept, the network let a drawn tree fade within 10 frames). A change no
        sentence asked for (a reference picture's) is not `drawn`."""
        if not self.history:
            return
        if drawn:
            self.drawn.add(self.frame)
        changed = self._snapped(change)
        self.history = list(changed(torch.stack(self.history)))
        if self.views is not None:
            if everywhere:
                self.views.rewrite(changed)
            self.views.write(self.history[-1])

    def hold_change(self, change: Callable[[torch.Tensor], torch.Tensor] | None) -> None:
        """Every frame generated from now put through `change` ((n, C, S, S) -> the same; a
        code model's result snapped) before it joins the history and is shown, or none with
        None. A reference picture's palette edit stays on this way: the network paints the
        cells a walk or a turn brings in partly in the theme's own colours (held, the
        reference test's ratio to the simulator went from 0.81 to 0.86; MODEL.md v32)."""
        self.held_change = None if change is None else self._snapped(change)

    def _snapped(
        self, change: Callable[[torch.Tensor], torch.Tensor]
    ) -> Callable[[torch.Tensor], torch.Tensor]:
        """`change` as the history takes it: a code model's frames stay codes."""
        if not self.model.config.codes:
            return change
        return lambda frames: self.model.snap(change(frames))

    def _as_codes(self, z: torch.Tensor) -> torch.Tensor:
        """A latent as a code model's history holds it: each cell its nearest code's vector
        (plus its residual code's)."""
        return self.model.snap(z.reshape(1, -1, *z.shape[-2:]))

    def _track_camera(self, dx: float, dy: float) -> None:
        """Where the camera now looks: the view memory's position and the horizon's row
        (the simulator's pitch limit keeps it within `HORIZON_LIMIT` cells of the middle)."""
        if self.views is not None:
            self.views.move(dx, dy)
        self.horizon = (self.horizon + dy).clamp(-HORIZON_LIMIT, HORIZON_LIMIT)

    def _history_move(self, cond: Conditioning) -> torch.Tensor:
        """The move the camera warp gives this frame's history, and what it tracks: the
        camera's turn and tilt (by whole cells where `warp_whole_cells`, the rest carried), and
        with `walk_warp` the step's move of each cell (each with its own rest): by its depth
        as the depth head reads it off the newest history frame, or as flat ground."""
        cfg = self.model.config
        shift = camera_shift(cond.inputs)
        dx, dy = shift[0].tolist()
        self.draws.move(dx, dy)
        self._track_camera(dx, dy)
        if cfg.warp_whole_cells:
            shift, self.warp_rest = _whole_cells(shift, self.warp_rest)
        if not cfg.walk_warp:
            return shift
        step = walk_flow(cond.inputs, cfg.latent_size, self.horizon, self._inverse_depth(cond))
        if cfg.warp_whole_cells:
            step, self.walk_rest = _whole_cells(step, self.walk_rest)
        return shift[:, :, None, None] + step

    def _inverse_depth(self, cond: Conditioning) -> torch.Tensor | None:
        """(1, S, S) inverse depth of the newest history frame's cells where the weights
        have a depth head and the frame steps; None: flat ground."""
        if self.depth is None or not self.history:
            return None
        if not bool(cond.inputs[0, WALK_KEYS].abs().sum() > 0):
            return None
        with torch.inference_mode():
            return self.depth(self.history[-1][None].float())

    def _remember(self, z: torch.Tensor, audio: torch.Tensor, frame: int) -> None:
        cfg = self.model.config
        self.history.append(z.reshape(cfg.latent_channels, cfg.latent_size, cfg.latent_size))
        if self.views is not None:
            self.views.write(self.history[-1])
        self.history = self.history[-cfg.context :]
        heard = torch.as_tensor(audio).float().view(1, 1, -1)
        self.audio = torch.cat([self.audio, heard], dim=1)[:, -cfg.audio_history :]
        self.frame = frame + 1

    def _next_frame_inputs(
        self, inputs, frame: int, text: np.ndarray | torch.Tensor | None
    ) -> tuple[torch.Tensor, torch.Tensor, Conditioning, torch.Tensor | None]:
        """(context, valid, conditioning, a denoiser's noise) for frame `frame`: the sentence
        typed at it remembered, the history moved as the camera moved."""
        if text is not None:
            self.add_text(text, frame)
        context, valid = self._context()
        cfg = self.model.config
        noise = None
        if cfg.denoise:
            shape = (1, cfg.latent_channels, cfg.latent_size, cfg.latent_size)
            noise = torch.randn(shape, generator=self.gen)
        cond = self._conditioning(inputs, frame, text)
        if cfg.sound_cues:  # only a model that hears them keeps the rhythm
            cond.cues = torch.cat([self.stride.step(inputs), weather_cues(self.weather)])[None]
        if cfg.camera_warp:
            cond.shift = self._history_move(cond)
        if self.views is not None:
            latent, seen = self.views.recall()
            cond.seen = torch.cat([latent, seen[None].float()])[None]
        return context, valid, cond, noise

    def generate(
        self, inputs, frame: int, text: np.ndarray | torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Frame `frame` from its inputs and any sentence typed at it; it joins the history."""
        context, valid, cond, noise = self._next_frame_inputs(inputs, frame, text)
        z, a = sample_frame(
            self.model, context, valid, self.audio, cond, noise, self.gen, self.draws
        )
        if self.held_change is not None:
            z = self.held_change(z)
        self._remember(z[0], a[0], frame)  # a code model's frame is codes already
        return z[0], a[0]

    def display_move(self) -> torch.Tensor | None:
        """(1, 2, S, S) cells: how far the newest frame's picture still has to move to sit where
        the camera is, or None. A session that warps by whole cells (`warp_whole_cells`) keeps
        its history made of codes and carries the rest; the picture shown is moved by that
        rest at pixel precision, so a turn slides 5 px every frame instead of 8 px on some
        frames and none on others (the history itself never sees the move)."""
        cfg = self.model.config
        if not (cfg.camera_warp and cfg.warp_whole_cells):
            return None
        size = cfg.latent_size
        move = self.warp_rest[:, :, None, None].expand(1, 2, size, size)
        if cfg.walk_warp:
            move = move + self.walk_rest
        return move if bool(move.abs().sum() > 0) else None

    def teacher_logits(
        self,
        z: torch.Tensor,
        audio: torch.Tensor,
        inputs,
        frame: int,
        text: np.ndarray | torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Teacher forcing for a code model: its own logits (1, codes, S, S) for frame `frame`,
        no guidance and no keep (what the network itself predicts), after which the true
        latent `z` (as its nearest codes) and sound `audio` join the history in place of a
        draw."""
        assert self.model.config.codes, "teacher_logits needs a code model"
        context, valid, cond, _ = self._next_frame_inputs(inputs, frame, text)
        logits = self.model.predict(context, valid, self.audio, cond).logits
        assert logits is not None
        self._remember(self._as_codes(z), audio, frame)
        return logits
