"""The convolutional world model: frame t's video and audio latents from the last frames.

One network evaluation per frame, no tokens. The last `context` latents (16x16xC each) are
stacked as channels and run through a small U-Net (16x16 -> 8x8 -> 4x4, one self-attention
over the 16 cells of the coarsest level) whose every block is modulated (FiLM) by one
conditioning vector: the held keys and camera deltas of frame t, a sentence typed at t, the
last sentences typed (sink memory: oldest to newest, with how long ago each arrived), the
theme, the reference picture and how noisy the context is. The output is added to the newest
context latent, so "nothing changed" is the zero output the network starts from, and every
cell's prediction mixes its neighbours across all borders (no tile grid, as the token model's
per-patch readout had).

Why this shape (engine/MODEL.md has the measurements): a deterministic step trained on its own
unrolled rollouts (backpropagating through them) learns to keep a rollout on the data's
manifold, where the flow-matching transformer drifted into a mosaic of its 4x4 latent tiles.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from engine.spec import (
    EYE_HEIGHT,
    PITCH_CELLS_PER_RADIAN,
    PITCH_RATE,
    TURN_CELLS_PER_RADIAN,
    TURN_RATE,
    WALK_SPEED,
)

from .inputs import CAMERA_SCALE, KEY_ORDER, PITCH_FEATURE, YAW_FEATURE
from .latent_codes import (
    CodeDraws,
    code_indices,
    code_latents,
    gumbel_from_uniform,
    nearest_codes,
    random_numbers,
    snap_to_codes,
)
from .sampler import EulerSampler
from .sentence_head import SentenceHead
from .sound_flow import SoundFlow, level_features
from .world import INPUT_FEATURES

MEMORY_SLOTS = 4  # sentences remembered (the runtime and the training data keep 4 as well)
AGE_SCALE = 64.0  # frames; a sentence's age feature saturates after about 3 s


@dataclass
class ConvWorldConfig:
    arch: str = "conv"  # tells loaders which generator a world.pt holds
    latent_channels: int = 8
    latent_size: int = 16
    audio_dim: int = 32
    text_dim: int = 384
    image_dim: int = 128
    themes: int = 5
    context: int = 4  # latents stacked as the input
    width: int = 48  # channels at 16x16
    width_low: int = 96  # channels at 8x8 and 4x4
    cond_dim: int = 128
    run_noise: float = 0.0  # context noise level the model is told at run time
    flow: bool = False  # also predict a motion field that moves the newest latent (a warp)
    # the history is moved by the frame's own camera turn and tilt (known from its inputs,
    # `camera_shift`) before the network reads it, and the newest frame, moved, is what the
    # output is added to: a turn slides the picture without the network having to learn how
    camera_warp: bool = False
    # with the camera warp: a session remembers the newest latent of every direction it has
    # faced (engine/model/view_memory.py) and a turn that uncovers one starts from it.
    # A run-time knob, not trained (`python -m engine.train view-memory`)
    view_memory: bool = False
    # with the camera warp: a session moves its history by whole cells only, carrying the
    # rest to the next frame, so a code model's history stays made of its codes (a
    # fractional move blends neighbouring codes into a patch no code is). Run-time, not trained
    warp_whole_cells: bool = False
    # with the camera warp: W/S/A/D also move the history, as a step spreads a flat ground
    # out from the horizon or slides it sideways (`walk_flow`); with whole cells each cell
    # carries its own rest. Run-time, not trained (`python -m engine.train camera-warp`)
    walk_warp: bool = False
    denoise: bool = False  # a flow-matching denoiser: the frame is sampled in sampler_steps
    # passes from noise (the model sees the noisy frame and its level) instead of regressed
    clamp: float = 8.0  # outputs are kept within +-clamp (unit-scale latents; a free rollout
    # that feeds an outlier back must not run away)
    sampler_steps: int = 1  # one network evaluation per frame (reported by the benchmark)
    # Guidance at run time (a regressor's classifier-free guidance): 1 = off; w > 1 moves the
    # prediction w times as far from the one made without the sentences (text and memory) or
    # without the reference picture, where the frame has them. Not trained; set on a weights
    # folder with `python -m engine.train guidance`.
    text_guidance: float = 1.0
    image_guidance: float = 1.0
    # > 0: text guidance only while the newest sentence is younger than this many frames (a
    # push toward what was asked; the model then holds it alone, and a session that typed
    # once is not extrapolated for the rest of its life); 0 = while any is remembered
    text_guidance_frames: int = 0
    project_context: bool = False
    # > 0: the picture is a code per latent cell from a learnt codebook of this size
    # (engine/model/latent_codes.py); the model classifies each cell and a code is drawn at
    # `code_temperature` (0 = the likeliest code), so its history is always real patches
    codes: int = 0
    code_temperature: float = 0.7
    # > 0 (with codes): a second, residual code per cell from a codebook of this size fitted
    # on what the first code leaves (RQ-VAE style; MODEL.md v16: 0.117 -> 0.032 of the
    # latent's variance). A per-cell head reads the features, the drawn first code and what
    # the cell showed (`residual_logits`); drawn at `residual_temperature` (0 = likeliest).
    residual_codes: int = 0
    residual_temperature: float = 0.0
    # the residual as the softmax's expected residual code vector instead of one drawn code:
    # an unsure head then adds little rather than a confident wrong detail. Run-time
    residual_mean: bool = False
    # how a session's code draws share their random numbers (latent_codes.CodeDraws): over
    # `code_noise_blur` cells and from frame to frame with correlation `code_noise_memory`;
    # 0 and 0 = independent per cell and frame, as in training. Run-time knobs, not trained.
    code_noise_blur: float = 0.0
    code_noise_memory: float = 0.0
    # nats added to the logit of the code each cell already shows (the history's newest
    # frame, moved by any camera warp) while the player does not walk and no sentence is
    # being followed: > 0 keeps what has no reason to change (`kept_logits`). Run-time
    code_keep: float = 0.0
    # code_keep also while the player walks: with `walk_warp` the code a cell shows is the
    # one the step moved there, so keeping it lets the ground flow. Run-time
    keep_walking: bool = False
    # The sound head reads the last `audio_history` audio latents (footsteps keep a rhythm
    # that one frame of sound does not show); with `audio_sample` it predicts a mean and a
    # spread per number and the sound is drawn (a regressed mean plays every uncertain event,
    # a footstep or a crackle, as its average: quieter and duller).
    audio_history: int = 1
    audio_sample: bool = False
    # > 0: the sound is drawn by a flow-matching head (engine/model/sound_flow.py) in this
    # many Euler steps; the regressing head stays and gives the sound's mean
    audio_flow_steps: int = 0
    # > 0: the sound head also reads this many sound cues a session keeps itself (2: the
    # walk's footstep rhythm; 4: and the weather its picture shows; engine/model/sound_cues.py)
    sound_cues: int = 0
    # > 0 (with codes): a second reader of the newest sentence with this many channels
    # (engine/model/sentence_head.py) adds code logits while that sentence is younger than
    # `sentence_head_frames`; trained alone (`python -m engine.train conv --sentence-only`)
    sentence_head: int = 0
    sentence_head_frames: int = 60
    extra: dict = field(default_factory=dict)


@dataclass
class Prediction:
    """One evaluation: the regressed next latent (B, C, S, S), the next audio latent (B, A)
    (its mean, for a model that draws its sound), for a code model each cell's code logits
    (B, K, S, S), and for a model that draws its sound the spread of each audio number."""

    video: torch.Tensor
    audio: torch.Tensor
    logits: torch.Tensor | None = None
    audio_spread: torch.Tensor | None = None  # (B, A) standard deviation (audio_sample models)
    heard: torch.Tensor | None = None  # (B, D) what the sound heads read (flow-sound models)
    # (B, C, S, S) the newest history latent as the output was added to it (moved by the
    # camera warp), and (B, S, S) bool the cells the warp left for the network to paint
    # (uncovered and not remembered); what a code model's `code_keep` favours
    newest: torch.Tensor | None = None
    painted: torch.Tensor | None = None
    # (B, width, S, S) the features the code heads read (a residual code model's second
    # head reads them once the first code is drawn)
    features: torch.Tensor | None = None
    # (B, K, S, S) the sentence head's share of `logits` (sentence-head models): guidance
    # scales the trunk's reading of a sentence, and adds the head's once
    told: torch.Tensor | None = None


@dataclass
class Conditioning:
    """Everything but the pictures that decides frame t, batched (B, ...)."""

    inputs: torch.Tensor  # (B, 13) keys, camera deltas, audio-input features, image flag
    text: torch.Tensor  # (B, text_dim) sentence typed at this frame (zeros if none)
    memory: torch.Tensor  # (B, MEMORY_SLOTS, text_dim) last sentences, newest last, zeros empty
    memory_age: torch.Tensor  # (B, MEMORY_SLOTS) frames since each arrived (0 where empty)
    memory_valid: torch.Tensor  # (B, MEMORY_SLOTS) bool
    theme: torch.Tensor  # (B,) theme ids
    image: torch.Tensor  # (B, image_dim) pooled reference latent (zeros if none)
    noise: torch.Tensor  # (B,) context noise level
    level: torch.Tensor | None = None  # (B,) flow level of the noisy target (denoising models)
    # (B, C + 1, S, S) a session's view memory (engine/model/view_memory.py) at this frame's
    # camera: the remembered latents and a plane that is 1 where the cell was ever seen. The
    # camera warp fills what the move uncovers from it instead of repeating the border.
    seen: torch.Tensor | None = None
    # (B, 2), or (B, 2, S, S) per cell, the move in cells the camera warp applies; None =
    # the frame's own (`history_move`; training). A session may move its history by whole
    # cells only and carry the rest to the next frame (`ConvWorldConfig.warp_whole_cells`).
    shift: torch.Tensor | None = None
    # (B,) frames since the reference picture arrived, where a session knows (None: training,
    # or no picture yet). While it is under PICTURE_SETTLE_FRAMES the code keep holds nothing:
    # the world must take the picture's colours before anything keeps them.
    image_age: torch.Tensor | None = None
    # (B, MEMORY_SLOTS) bool, where a session knows: the remembered sentences whose change its
    # history already shows (a scene edit drew it into every frame; the sentence typed now is
    # the newest slot, age 0). They get no text guidance and do not lift the code keep: what
    # the history shows is what the sentence asked for, so keeping it is following it.
    drawn: torch.Tensor | None = None
    # (B, sound_cues) what the session knows of this frame's sound (engine/model/sound_cues.py);
    # None: zeros (no cue)
    cues: torch.Tensor | None = None


# Frames after a reference picture arrives in which `code_keep` holds no cell (2 s)
PICTURE_SETTLE_FRAMES = 40


class FiLMBlock(nn.Module):
    """Residual block: norm, FiLM from the conditioning, conv, norm, conv."""

    def __init__(self, cin: int, cout: int, cond_dim: int):
        super().__init__()
        self.norm1 = nn.GroupNorm(8, cin)
        self.conv1 = nn.Conv2d(cin, cout, 3, padding=1)
        self.film = nn.Linear(cond_dim, 2 * cout)
        self.norm2 = nn.GroupNorm(8, cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, padding=1)
        self.skip = nn.Conv2d(cin, cout, 1) if cin != cout else nn.Identity()
        nn.init.zeros_(self.film.weight)
        nn.init.zeros_(self.film.bias)

    def forward(self, x: torch.Tensor, cond: torch.Tensor) -> torch.Tensor:
        h = self.conv1(F.silu(self.norm1(x)))
        scale, shift = self.film(cond)[:, :, None, None].chunk(2, dim=1)
        h = F.silu(self.norm2(h) * (1 + scale) + shift)
        return self.skip(x) + self.conv2(h)


class CellAttention(nn.Module):
    """Self-attention over the cells of a small feature map (global consistency: a turn moves
    the whole picture, sky included)."""

    def __init__(self, channels: int, heads: int = 4):
        super().__init__()
        self.norm = nn.GroupNorm(8, channels)
        self.attn = nn.MultiheadAttention(channels, heads, batch_first=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, c, h, w = x.shape
        t = self.norm(x).flatten(2).transpose(1, 2)
        out, _ = self.attn(t, t, t, need_weights=False)
        return x + out.transpose(1, 2).reshape(b, c, h, w)


class ConvWorldModel(nn.Module):
    def __init__(self, config: ConvWorldConfig):
        super().__init__()
        self.config = cfg = config
        c, w, wl, d = cfg.latent_channels, cfg.width, cfg.width_low, cfg.cond_dim
        self.input_in = nn.Sequential(nn.Linear(INPUT_FEATURES, d), nn.SiLU(), nn.Linear(d, d))
        self.text_in = nn.Linear(cfg.text_dim, d)
        self.memory_in = nn.Linear(MEMORY_SLOTS * (cfg.text_dim + 1), d)
        self.theme_in = nn.Embedding(cfg.themes, d)
        self.image_in = nn.Linear(cfg.image_dim, d)
        self.noise_in = nn.Linear(16, d)
        self.cond_mlp = nn.Sequential(nn.SiLU(), nn.Linear(d, d), nn.SiLU())
        self.level_in = nn.Linear(16, d) if cfg.denoise else None
        stem_in = cfg.context * (c + 1) + (c if cfg.denoise else 0)
        self.stem = nn.Conv2d(stem_in, w, 3, padding=1)
        self.enc_hi = nn.ModuleList([FiLMBlock(w, w, d), FiLMBlock(w, w, d)])
        self.down_mid = nn.Conv2d(w, wl, 3, stride=2, padding=1)
        self.enc_mid = nn.ModuleList([FiLMBlock(wl, wl, d), FiLMBlock(wl, wl, d)])
        self.down_lo = nn.Conv2d(wl, wl, 3, stride=2, padding=1)
        self.lo = nn.ModuleList([FiLMBlock(wl, wl, d), FiLMBlock(wl, wl, d)])
        self.attn = CellAttention(wl)
        self.dec_mid = FiLMBlock(2 * wl, wl, d)
        self.dec_hi = FiLMBlock(wl + w, w, d)
        self.out_norm = nn.GroupNorm(8, w)
        self.out = nn.Conv2d(w, c, 3, padding=1)
        assert self.out.bias is not None
        nn.init.zeros_(self.out.weight)
        nn.init.zeros_(self.out.bias)
        self.flow_out = nn.Conv2d(w, 2, 3, padding=1) if cfg.flow else None
        if self.flow_out is not None:  # starts at "nothing moves", like the picture head
            assert self.flow_out.bias is not None
            nn.init.zeros_(self.flow_out.weight)
            nn.init.zeros_(self.flow_out.bias)
        audio_out = cfg.audio_dim * (2 if cfg.audio_sample else 1)
        sound_in = wl + d + cfg.sound_cues + cfg.audio_history * cfg.audio_dim
        self.audio_head = nn.Sequential(
            nn.Linear(sound_in, 2 * d), nn.SiLU(), nn.Linear(2 * d, audio_out)
        )
        self.sound_flow = SoundFlow(sound_in, cfg.audio_dim) if cfg.audio_flow_steps else None
        if cfg.codes:
            # logits = scale * -|z - code|^2 (up to a per-cell constant) + a learnt correction:
            # a regressor gains code heads that start as "the code nearest its prediction"
            self.register_buffer("codebook", torch.zeros(cfg.codes, c))
            self.code_scale = nn.Parameter(torch.tensor(1.0))
            self.code_out = nn.Conv2d(w, cfg.codes, 1)
            assert self.code_out.bias is not None
            nn.init.zeros_(self.code_out.weight)
            nn.init.zeros_(self.code_out.bias)
        self.sentence_head = None
        if cfg.codes and cfg.sentence_head:
            self.sentence_head = SentenceHead(
                cfg.text_dim, w, cfg.sentence_head, cfg.codes, cfg.sentence_head_frames
            )
        if cfg.codes and cfg.residual_codes:
            # starts as "the residual nearest what the regression leaves beyond the drawn
            # first code, and where the cell keeps the code it showed, the residual it
            # showed" (`residual_logits`), plus a learnt per-cell correction
            self.register_buffer("residual_codebook", torch.zeros(cfg.residual_codes, c))
            self.residual_scale = nn.Parameter(torch.tensor([1.0, 1.0]))
            self.residual_out = nn.Sequential(
                nn.Conv2d(w + 2 * c + 1, w, 1), nn.SiLU(), nn.Conv2d(w, cfg.residual_codes, 1)
            )
            last = self.residual_out[-1]
            assert isinstance(last, nn.Conv2d) and last.bias is not None
            nn.init.zeros_(last.weight)
            nn.init.zeros_(last.bias)

    def condition(self, c: Conditioning) -> torch.Tensor:
        """(B, cond_dim) conditioning vector."""
        age = (c.memory_age.float() / AGE_SCALE).clamp(max=1.0) * c.memory_valid
        mem = torch.cat([c.memory * c.memory_valid[..., None], age[..., None]], dim=-1)
        h = (
            self.input_in(c.inputs)
            + self.text_in(c.text)
            + self.memory_in(mem.flatten(1))
            + self.theme_in(c.theme)
            + self.image_in(c.image)
            + self.noise_in(level_features(c.noise))
        )
        if self.level_in is not None:
            assert c.level is not None, "a denoising model needs the target's flow level"
            h = h + self.level_in(level_features(c.level))
        return self.cond_mlp(h)

    def forward(
        self,
        context: torch.Tensor,
        valid: torch.Tensor,
        prev_audio: torch.Tensor,
        cond: Conditioning,
        noisy: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """context (B, K, C, S, S) oldest first, valid (B, K) which of them exist, prev_audio
        (B, A) the last audio latent or (B, H, A) the last H, oldest first -> (next video
        latent (B, C, S, S), next audio latent (B, A); its mean for a model that draws it).
        A denoising model also reads `noisy` (B, C, S, S), the frame at flow level
        `cond.level`, and returns its estimate of the clean frame."""
        p = self.predict(context, valid, prev_audio, cond, noisy)
        return p.video, p.audio

    def predict(
        self,
        context: torch.Tensor,
        valid: torch.Tensor,
        prev_audio: torch.Tensor,
        cond: Conditioning,
        noisy: torch.Tensor | None = None,
    ) -> Prediction:
        """`forward`'s outputs, plus the code logits of a code model."""
        b, k, _, s, _ = context.shape
        painted = None
        if self.config.camera_warp:
            shift = history_move(self.config, cond.inputs) if cond.shift is None else cond.shift
            context = warp_by_camera(context, shift, cond.seen)
            painted = uncovered_cells(shift, s)
            if cond.seen is not None:
                painted = painted & (cond.seen[:, -1] < 0.5)
        mask = valid.float()[:, :, None, None, None]
        planes = mask.expand(b, k, 1, s, s)
        x = torch.cat([context * mask, planes], dim=2).flatten(1, 2)
        if self.config.denoise:
            assert noisy is not None, "a denoising model needs the noisy frame"
            x = torch.cat([x, noisy], dim=1)
        e = self.condition(cond)
        h = self.stem(x)
        for block in self.enc_hi:
            h = block(h, e)
        skip_hi = h
        h = self.down_mid(h)
        for block in self.enc_mid:
            h = block(h, e)
        skip_mid = h
        h = self.down_lo(h)
        for block in self.lo:
            h = block(h, e)
        h = self.attn(h)
        pooled = h.mean(dim=(2, 3))
        h = F.interpolate(h, scale_factor=2, mode="nearest")
        h = self.dec_mid(torch.cat([h, skip_mid], dim=1), e)
        h = F.interpolate(h, scale_factor=2, mode="nearest")
        h = self.dec_hi(torch.cat([h, skip_hi], dim=1), e)
        features = F.silu(self.out_norm(h))
        delta = self.out(features)
        newest = context[:, -1] * mask[:, -1]
        if self.flow_out is not None:
            newest = warp(newest, self.flow_out(features))
        heard = torch.cat(
            [pooled, e, self.sound_cue_rows(cond), self.audio_history_rows(prev_audio).flatten(1)],
            dim=-1,
        )
        audio = self.audio_head(heard)
        spread = None
        if self.config.audio_sample:
            audio, log_spread = audio.chunk(2, dim=-1)
            spread = log_spread.clamp(-6.0, 2.0).exp()
        limit = self.config.clamp
        video = (newest + delta).clamp(-limit, limit)
        logits = self.code_logits(video, features) if self.config.codes else None
        told = None
        if logits is not None and self.sentence_head is not None:
            told = self.sentence_head(features, cond.memory, cond.memory_age, cond.memory_valid)
            logits = logits + told
        flow_reads = heard if self.sound_flow is not None else None
        return Prediction(
            video,
            audio.clamp(-limit, limit),
            logits,
            spread,
            flow_reads,
            newest,
            painted,
            features if self.config.residual_codes else None,
            told,
        )

    def sound_cue_rows(self, cond: Conditioning) -> torch.Tensor:
        """(B, sound_cues) the cues the sound head reads: the first `sound_cues` of the
        conditioning's (engine/model/sound_cues.py lays them out), zeros without."""
        n = self.config.sound_cues
        if cond.cues is None or not n:
            return cond.inputs.new_zeros(cond.inputs.shape[0], n)
        return cond.cues[:, :n].to(cond.inputs)

    def audio_history_rows(self, prev_audio: torch.Tensor) -> torch.Tensor:
        """(B, A) or (B, H', A) past audio latents -> the (B, audio_history, A) the sound head
        reads: the newest, zero-padded in front where fewer are known."""
        rows = prev_audio if prev_audio.dim() == 3 else prev_audio[:, None]
        h = self.config.audio_history
        rows = rows[:, -h:]
        if rows.shape[1] < h:
            rows = F.pad(rows, (0, 0, h - rows.shape[1], 0))
        return rows

    def draw_audio(self, p: Prediction, gen: torch.Generator | None = None) -> torch.Tensor:
        """The sound of a prediction: its mean; for a model that draws its sound, the mean
        plus its spread times normal noise from `gen`; for a flow-sound model, the flow's
        Euler steps from normal noise from `gen`."""
        limit = self.config.clamp
        if self.sound_flow is not None and p.heard is not None:
            noise = random_numbers(p.audio.shape, p.audio.device, gen, normal=True)
            drawn = self.sound_flow.draw(p.heard, noise, self.config.audio_flow_steps)
            return drawn.clamp(-limit, limit)
        if p.audio_spread is None:
            return p.audio
        noise = random_numbers(p.audio.shape, p.audio.device, gen, normal=True)
        return (p.audio + p.audio_spread * noise).clamp(-limit, limit)

    def code_logits(self, video: torch.Tensor, features: torch.Tensor) -> torch.Tensor:
        """(B, K, S, S): -scale * |video - code|^2 per cell (the per-cell |video|^2 term
        drops out of a softmax over codes) plus the learnt correction."""
        codebook: torch.Tensor = self.codebook  # type: ignore[assignment]
        return self.code_scale * _nearness(video, codebook) + self.code_out(features)

    @property
    def residual_book(self) -> torch.Tensor | None:
        """The residual codebook (R, C) of a residual code model, else None."""
        book = getattr(self, "residual_codebook", None)
        return book if isinstance(book, torch.Tensor) else None

    def snap(self, latent: torch.Tensor) -> torch.Tensor:
        """(B, C, S, S) latents as a code model's history holds them: every cell its nearest
        code (plus its residual code)."""
        codebook: torch.Tensor = self.codebook  # type: ignore[assignment]
        return snap_to_codes(latent, codebook, self.residual_book)

    def residual_logits(self, p: Prediction, first: torch.Tensor) -> torch.Tensor:
        """(B, R, S, S) logits of each cell's residual code given its first code's latent
        `first` (B, C, S, S): nearness to what the regression leaves beyond it, plus, where
        the cell keeps the first code it showed (the newest history frame, moved), nearness
        to the residual it showed (a patch that stays keeps its detail), plus a correction
        read from the features, the first code and what the cell showed."""
        book = self.residual_book
        assert book is not None, "residual_logits needs a residual code model"
        assert p.features is not None and p.newest is not None
        codebook: torch.Tensor = self.codebook  # type: ignore[assignment]
        shown = code_latents(nearest_codes(p.newest, codebook), codebook)
        kept = (first == shown).all(dim=1, keepdim=True).to(first.dtype)
        shown_rest = p.newest - first
        near = self.residual_scale[0] * _nearness(p.video - first, book)
        near = near + self.residual_scale[1] * kept * _nearness(shown_rest, book)
        read = torch.cat([p.features, first, shown_rest * kept, kept], dim=1)
        return near + self.residual_out(read)

    def draw_residual(
        self,
        p: Prediction,
        first: torch.Tensor,
        gen: torch.Generator | None = None,
        keep: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """The first codes' latents (B, C, S, S) plus a residual code per cell drawn at
        `residual_temperature` (or with `residual_mean` the expected residual code vector);
        `keep` (B, R, S, S) is added to the logits first."""
        book = self.residual_book
        assert book is not None
        logits = self.residual_logits(p, first)
        if keep is not None:
            logits = logits + keep
        if self.config.residual_mean:
            return first + torch.einsum("bkhw,kc->bchw", logits.softmax(dim=1), book.to(first))
        picked = _gumbel_max(logits, self.config.residual_temperature, gen)
        return first + code_latents(picked, book)

    def draw_codes(
        self,
        logits: torch.Tensor,
        gen: torch.Generator | None = None,
        gumbel: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """A code per cell (B, S, S) at the config's temperature, as latents (B, C, S, S).
        Drawn by Gumbel-max (argmax of logits / T plus Gumbel noise: the softmax's
        distribution, 2 ms a frame where torch.multinomial took 7), with `gumbel` as the noise
        where given (a session's correlated draws), else independent noise from `gen`."""
        picked = _gumbel_max(logits, self.config.code_temperature, gen, gumbel)
        return code_latents(picked, self.codebook)  # type: ignore[arg-type]


def _nearness(video: torch.Tensor, codebook: torch.Tensor) -> torch.Tensor:
    """(B, K, S, S) 2 z.k - |k|^2 per cell: -|z - k|^2 up to the cell's own |z|^2."""
    return (
        2 * torch.einsum("bchw,kc->bkhw", video, codebook)
        - codebook.pow(2).sum(1)[None, :, None, None]
    )


def _gumbel_max(
    logits: torch.Tensor,
    temperature: float,
    gen: torch.Generator | None,
    gumbel: torch.Tensor | None = None,
) -> torch.Tensor:
    """(B, S, S) the index drawn per cell from softmax(logits / temperature) by Gumbel-max
    (`gumbel` as the noise where given, else fresh from `gen`); 0 = the likeliest."""
    if temperature <= 0:
        return logits.argmax(dim=1)
    if gumbel is None:
        gumbel = gumbel_from_uniform(random_numbers(logits.shape, logits.device, gen))
    return (logits / temperature + gumbel).argmax(dim=1)


def warp(latent: torch.Tensor, flow: torch.Tensor, mode: str = "bilinear") -> torch.Tensor:
    """Move a latent (B, C, S, S) by a field (B, 2, S, S) of displacements in cells (x, y):
    each output cell reads the input at its own position minus the displacement (bilinear, or
    `mode` "nearest"; outside the frame reads the nearest border cell)."""
    b, _, s, _ = latent.shape
    steps = torch.linspace(-1.0, 1.0, s, device=latent.device)
    gy, gx = torch.meshgrid(steps, steps, indexing="ij")
    grid = torch.stack([gx, gy], dim=-1)[None] - flow.permute(0, 2, 3, 1) * (2.0 / (s - 1))
    return F.grid_sample(latent, grid, mode=mode, padding_mode="border", align_corners=True)


def warp_picture(images: torch.Tensor, move: torch.Tensor) -> torch.Tensor:
    """Decoded frames (B, 3, H, W) moved by a field (B, 2, S, S) of displacements in latent
    cells, to the nearest whole pixel: every pixel is one the decoder drew (a bilinear
    resampling at fractional offsets would soften every edge, and by a different amount each
    frame)."""
    size = images.shape[-2:]
    scale = size[-1] / move.shape[-1]
    field = torch.round(F.interpolate(move, size=size, mode="bilinear") * scale)
    return warp(images, field, mode="nearest")


_LEFT, _RIGHT, _UP, _DOWN = (KEY_ORDER.index(k) for k in ("LEFT", "RIGHT", "UP", "DOWN"))
WALK_KEYS = [KEY_ORDER.index(k) for k in ("W", "A", "S", "D")]
_W, _A, _S, _D = WALK_KEYS
# Largest share of its distance from the horizon a ground cell moves in one step: cells
# nearer than a step would otherwise be flung out of the frame
_MAX_SPREAD = 0.5


def camera_shift(inputs: torch.Tensor) -> torch.Tensor:
    """(B, INPUT_FEATURES) input features -> (B, 2): how far, in latent cells (x right, y
    down), the frame's camera move slides the picture: the mouse's yaw and pitch deltas plus
    the held arrow keys' turn and tilt (a right turn moves the picture left; looking up
    moves it down)."""
    turn, tilt = inputs[:, _RIGHT] - inputs[:, _LEFT], inputs[:, _UP] - inputs[:, _DOWN]
    yaw = inputs[:, YAW_FEATURE] / CAMERA_SCALE + TURN_RATE * turn
    pitch = inputs[:, PITCH_FEATURE] / CAMERA_SCALE + PITCH_RATE * tilt
    return torch.stack([-yaw * TURN_CELLS_PER_RADIAN, pitch * PITCH_CELLS_PER_RADIAN], dim=1)


def walk_flow(
    inputs: torch.Tensor,
    size: int,
    horizon: torch.Tensor | None = None,
    inverse_depth: torch.Tensor | None = None,
) -> torch.Tensor:
    """(B, INPUT_FEATURES) input features -> (B, 2, S, S): how far, in latent cells (x right,
    y down), the frame's step moves each cell. A cell at inverse depth q (1 / world units
    along the view axis; `inverse_depth` (B, S, S), flat ground from `EYE_HEIGHT` when None)
    moves away from the vanishing point (the middle column, `horizon`'s row: (B,) cells below
    the frame's middle, 0 when unknown) by f q / (1 - f q) of its offset for a step f forward,
    and slides left by s S/2 q cells for a step s to the right (a 90-degree view). The sky
    (q = 0) stays where it is."""
    b = inputs.shape[0]
    forward = inputs[:, _W] - inputs[:, _S]
    strafe = inputs[:, _D] - inputs[:, _A]
    speed = WALK_SPEED / torch.hypot(forward, strafe).clamp_min(1e-6)  # diagonals no faster
    f, side = (forward * speed)[:, None, None], (strafe * speed)[:, None, None]
    n = torch.arange(size, dtype=inputs.dtype, device=inputs.device) + 0.5 - size / 2
    below = n[None, :, None] - (0.0 if horizon is None else horizon.view(b, 1, 1))
    q = flat_ground_inverse_depth(below, size) if inverse_depth is None else inverse_depth
    reach = (1 - f * q).clamp_min(1e-6)
    spread = (f * q / reach).clamp(-_MAX_SPREAD, _MAX_SPREAD)
    x = spread * n[None, None, :] - side * (size / 2) * q
    y = spread * below
    return torch.stack([x.expand(b, size, size), y.expand(b, size, size)], dim=1)


def flat_ground_inverse_depth(below: torch.Tensor, size: int) -> torch.Tensor:
    """Cells `below` the horizon (any shape) -> the inverse depth of a flat ground seen from
    `EYE_HEIGHT` there (a 90-degree view: y cells below is S/2 EYE_HEIGHT / y away); 0 at and
    above the horizon."""
    return below.clamp_min(0.0) / (EYE_HEIGHT * size / 2)


def history_move(
    config: ConvWorldConfig, inputs: torch.Tensor, horizon: torch.Tensor | None = None
) -> torch.Tensor:
    """The move the camera warp gives frame t's history, in cells: the camera's turn and tilt
    (B, 2), plus with `walk_warp` the step's spread of the ground (B, 2, S, S)."""
    shift = camera_shift(inputs)
    if not config.walk_warp:
        return shift
    return shift[:, :, None, None] + walk_flow(inputs, config.latent_size, horizon)


def _move_field(move: torch.Tensor, size: int) -> torch.Tensor:
    """A move (B, 2) for every cell alike, or (B, 2, S, S) per cell -> (B, 2, S, S)."""
    if move.dim() == 4:
        return move
    return move[:, :, None, None].expand(move.shape[0], 2, size, size)


def warp_by_camera(
    context: torch.Tensor, shift: torch.Tensor, seen: torch.Tensor | None = None
) -> torch.Tensor:
    """Every latent of `context` (B, K, C, S, S) moved by its row's move in cells: a camera
    shift (B, 2) (`camera_shift`) or a field (B, 2, S, S) (`history_move`); bilinear.
    The cells the move uncovers repeat the border for the network to paint, or, where `seen`
    (B, C + 1, S, S: latents and a seen plane, `Conditioning.seen`) remembers them, start
    from what was there."""
    b, k, c, s, _ = context.shape
    if not bool(shift.abs().sum() > 0):
        return context
    flow = _move_field(shift, s)
    moved = warp(context.reshape(b, k * c, s, s), flow).reshape(b, k, c, s, s)
    if seen is None:
        return moved
    fill = uncovered_cells(shift, s) & (seen[:, -1] > 0.5)  # (B, S, S)
    return torch.where(fill[:, None, None], seen[:, None, :-1], moved)


def uncovered_cells(shift: torch.Tensor, size: int) -> torch.Tensor:
    """(B, 2) camera shifts or (B, 2, S, S) moves in cells -> (B, S, S) bool: the cells whose
    content the move brings in from outside the frame (they read more than half a cell
    beyond its border)."""
    flow = _move_field(shift, size)
    n = torch.arange(size, dtype=shift.dtype, device=shift.device)
    x = n[None, None, :] - flow[:, 0]
    y = n[None, :, None] - flow[:, 1]
    edge = size - 0.5
    return (x < -0.5) | (x > edge) | (y < -0.5) | (y > edge)


def without_text(c: Conditioning) -> Conditioning:
    """The same conditioning with no sentence typed now and none remembered."""
    return dataclasses.replace(
        c,
        text=torch.zeros_like(c.text),
        memory=torch.zeros_like(c.memory),
        memory_age=torch.zeros_like(c.memory_age),
        memory_valid=torch.zeros_like(c.memory_valid),
    )


def without_image(c: Conditioning) -> Conditioning:
    """The same conditioning with no reference picture."""
    return dataclasses.replace(c, image=torch.zeros_like(c.image))


def stack_conditionings(parts: list[Conditioning]) -> Conditioning:
    """One batch of several conditionings (each (B, ...)), in order."""
    fields: dict[str, Any] = {}
    for f in dataclasses.fields(Conditioning):
        values = [getattr(c, f.name) for c in parts]
        fields[f.name] = None if values[0] is None else torch.cat(values)
    return Conditioning(**fields)


def guided_rows(cond: Conditioning, frames: int) -> torch.Tensor:
    """(B,) bool: the rows text guidance applies to: a sentence typed now, or remembered
    and, when `frames` > 0, younger than `frames`; neither where its change is drawn
    already (`Conditioning.drawn`)."""
    remembered = cond.memory_valid
    if frames > 0:
        remembered = remembered & (cond.memory_age < frames)
    typed = cond.text.abs().sum(dim=-1) > 0
    if cond.drawn is not None:
        remembered = remembered & ~cond.drawn
        typed = typed & ~(cond.drawn[:, -1] & (cond.memory_age[:, -1] == 0))
    return typed | remembered.any(dim=-1)


def guided_prediction(
    model: ConvWorldModel,
    context: torch.Tensor,
    valid: torch.Tensor,
    prev_audio: torch.Tensor,
    cond: Conditioning,
) -> Prediction:
    """The next frame with the config's text and image guidance: one batched evaluation of
    the full conditioning and of each guided part left out (only where some row of the batch
    has that part), z = z_full + sum (w - 1) (z_full - z_without), for a regressor's latent
    and a code model's logits alike; text guidance weighs only the rows `guided_rows` picks.
    A sentence head's share of the logits is added once, unscaled: it was trained as a
    reader of its own, and scaling it by the guidance weight wrecks the picture.
    The sound is the full conditioning's."""
    cfg = model.config
    guided: list[tuple[torch.Tensor, Conditioning]] = []
    asked = guided_rows(cond, cfg.text_guidance_frames)
    if cfg.text_guidance != 1.0 and bool(asked.any()):
        guided.append((torch.where(asked, cfg.text_guidance, 1.0), without_text(cond)))
    if cfg.image_guidance != 1.0 and bool(cond.image.abs().sum() > 0):
        weight = torch.full((cond.image.shape[0],), cfg.image_guidance, device=cond.image.device)
        guided.append((weight, without_image(cond)))
    if not guided:
        return model.predict(context, valid, prev_audio, cond)
    n = 1 + len(guided)
    b = context.shape[0]
    p = model.predict(
        context.repeat(n, 1, 1, 1, 1),
        valid.repeat(n, 1),
        prev_audio.repeat(n, *[1] * (prev_audio.dim() - 1)),
        stack_conditionings([cond] + [c for _, c in guided]),
    )

    def guide(x: torch.Tensor) -> torch.Tensor:
        full = x[:b]
        out = full
        for i, (weight, _) in enumerate(guided, start=1):
            w = weight.view(-1, *[1] * (x.dim() - 1))
            out = out + (w - 1.0) * (full - x[i * b : (i + 1) * b])
        return out

    logits = None
    if p.logits is not None and p.told is not None:
        logits = guide(p.logits - p.told) + p.told[:b]
    elif p.logits is not None:
        logits = guide(p.logits)
    spread = None if p.audio_spread is None else p.audio_spread[:b]
    heard = None if p.heard is None else p.heard[:b]
    video = guide(p.video).clamp(-cfg.clamp, cfg.clamp)
    newest = None if p.newest is None else p.newest[:b]
    painted = None if p.painted is None else p.painted[:b]
    features = None if p.features is None else p.features[:b]
    told = None if p.told is None else p.told[:b]
    return Prediction(video, p.audio[:b], logits, spread, heard, newest, painted, features, told)


def kept_logits(model: ConvWorldModel, p: Prediction, cond: Conditioning) -> torch.Tensor:
    """A code model's logits with `code_keep` nats added, in every cell the history carries
    (everywhere but what a turn uncovered and nothing remembers), to the code that cell
    already shows: a picture that has no reason to change keeps its patches, where a fresh
    draw each frame lets a region slide toward whatever code is commonest (an ember forest's
    whole view turning into its red tree band). Rows whose sentence text guidance still
    pushes (the world must change) get none, nor rows whose player walks (the ground must
    flow) unless `keep_walking` (the walk warp moved it), nor rows whose reference picture
    arrived less than PICTURE_SETTLE_FRAMES ago (the world must recolour)."""
    assert p.logits is not None and p.newest is not None
    codebook: torch.Tensor = model.codebook  # type: ignore[assignment]
    shown = nearest_codes(p.newest, codebook)[:, None]  # (B, 1, S, S)
    return p.logits.scatter_add(1, shown, _keep_gain(model, p, cond).contiguous())


def kept_residual(
    model: ConvWorldModel, p: Prediction, cond: Conditioning, first: torch.Tensor
) -> torch.Tensor:
    """`kept_logits` for a residual code model's second code: (B, R, S, S) zeros but
    `code_keep` on the residual code a cell shows, where the cell kept its first code
    (`first`, the drawn first codes' latents): a kept patch keeps its detail as well."""
    assert p.newest is not None
    codebook: torch.Tensor = model.codebook  # type: ignore[assignment]
    book = model.residual_book
    assert book is not None
    shown_first, shown_rest = code_indices(p.newest, codebook, book)
    assert shown_rest is not None
    shown = shown_rest[:, None]
    same = (first == code_latents(shown_first, codebook)).all(dim=1, keepdim=True)
    gain = _keep_gain(model, p, cond) * same
    keep = torch.zeros(first.shape[0], len(book), *first.shape[-2:], device=first.device)
    return keep.scatter_add(1, shown, gain.to(keep.dtype).contiguous())


def _keep_gain(model: ConvWorldModel, p: Prediction, cond: Conditioning) -> torch.Tensor:
    """(B, 1, S, S) the nats `code_keep` adds to each cell's shown code: in rows nothing asks
    to change, in cells the history carries."""
    assert p.newest is not None
    walking = cond.inputs[:, WALK_KEYS].abs().sum(dim=1) > 0
    if model.config.keep_walking:
        walking = torch.zeros_like(walking)
    asked = guided_rows(cond, model.config.text_guidance_frames)
    if cond.image_age is not None:
        asked = asked | (cond.image_age < PICTURE_SETTLE_FRAMES)
    still = (~walking & ~asked).to(p.newest.dtype).view(-1, 1, 1, 1)
    b, _, s, _ = p.newest.shape
    gain = (model.config.code_keep * still).expand(b, 1, s, s)
    if p.painted is not None:
        gain = gain * (~p.painted)[:, None]
    return gain


def sample_frame(
    model: ConvWorldModel,
    context: torch.Tensor,
    valid: torch.Tensor,
    prev_audio: torch.Tensor,
    cond: Conditioning,
    noise: torch.Tensor | None = None,
    gen: torch.Generator | None = None,
    draws: CodeDraws | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The next frame: one evaluation of a regressing model, a code per cell drawn from a code
    model's logits (with `draws`' correlated noise where given, else independently by `gen`),
    or `sampler_steps` Euler steps of a denoising one from `noise` (B, C, S, S) at level 0 up
    to the clean estimate at level 1 (x_s = s * x + (1 - s) * noise; each step moves x_s
    toward the model's clean estimate). A model that draws its sound draws it with `gen`."""
    if model.config.codes:
        p = guided_prediction(model, context, valid, prev_audio, cond)
        assert p.logits is not None
        logits = p.logits if model.config.code_keep == 0 else kept_logits(model, p, cond)
        gumbel = None
        if draws is not None and draws.correlated:
            gumbel = draws.gumbel(logits.shape, logits.device)
        z = model.draw_codes(logits, gen, gumbel)
        if model.config.residual_codes:
            keep = None if model.config.code_keep == 0 else kept_residual(model, p, cond, z)
            z = model.draw_residual(p, z, gen, keep)
        return z, model.draw_audio(p, gen)
    if not model.config.denoise:
        p = guided_prediction(model, context, valid, prev_audio, cond)
        return p.video, model.draw_audio(p, gen)
    assert noise is not None, "a denoising model samples from noise"
    sampler = EulerSampler(model.config.sampler_steps)
    x = noise
    for s in sampler.levels():
        cond.level = torch.full((x.shape[0],), s, device=x.device)
        p = model.predict(context, valid, prev_audio, cond, noisy=x)
        x = sampler.step(x, (p.video - x) / (1 - s))  # the velocity toward the estimate
    return x, model.draw_audio(p, gen)
