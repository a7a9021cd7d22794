"""The causal world transformer ("Omni Causal AR"): frame t's video + audio latents from the past.

Sequence layout. Every frame is a *block* of tokens: one input token (keys, camera deltas,
audio-input features, a freshly typed sentence), one audio token, and `tokens_per_frame` video
tokens (the 16x16xC video latent cut into patches). A block carries a flow-matching level s:
s = 1 is a clean (known) frame, s < 1 a noisy frame being generated
(x_s = s * x + (1 - s) * noise; the model predicts the velocity x - noise).
Each video token also sees the same patch of the previous clean frame (DIAMOND-style), so
"nothing changed" is easy to say.

Memory tokens (the theme, the reference image, the last sentences typed) sit outside time:
they are never evicted ("sink" memory) and a frame sees a memory token only once it has
arrived. Frames use rotary position over the frame index, so attention depends on how many
frames back a key is, never on absolute time; memory keys are not rotated.

Who sees what (block-causal):
  clean block at frame p: memory arrived <= p, clean blocks in [p - context, p]
  noisy block at frame p: memory arrived <= p, clean blocks in [p - context, p), itself
Training runs clean and noisy blocks for a whole window in one pass (teacher forcing with
every frame a target); inference keeps a KV cache of the last `context` clean blocks, so
generating frame p never recomputes frames < p.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch
from torch import nn

INPUT_FEATURES = 13  # 8 key bits, yaw, pitch, loudness, onset, image event
MEMORY_KINDS = ("theme", "text", "image")


@dataclass
class WorldModelConfig:
    latent_channels: int = 8
    latent_size: int = 16
    patch: int = 4  # 16x16 latent, 4x4 patches -> 16 video tokens per frame
    audio_dim: int = 32
    text_dim: int = 384
    image_dim: int = 128  # reference image latent pooled to 4x4xC
    themes: int = 5
    width: int = 192
    depth: int = 6
    heads: int = 6
    context: int = 5  # clean frames a block looks back (the rolling KV window)
    sampler_steps: int = 3
    rope_base: float = 100.0
    project_context: bool = False  # re-encode generated frames before they join the context
    refine_width: int = 0  # > 0: a conv refiner over the assembled latent (no tile grid)
    extra: dict = field(default_factory=dict)

    @property
    def tokens_per_frame(self) -> int:
        return (self.latent_size // self.patch) ** 2

    @property
    def block_tokens(self) -> int:
        return 2 + self.tokens_per_frame  # input, audio, video

    @property
    def patch_dim(self) -> int:
        return self.latent_channels * self.patch * self.patch


@dataclass
class Blocks:
    """A batch of frame blocks, each (B, F, ...): what `WorldModel.forward` runs."""

    video: torch.Tensor  # (B, F, C, S, S) latents: clean, or noisy at `level`
    prev: torch.Tensor  # (B, F, C, S, S) the previous clean frame of each block
    audio: torch.Tensor  # (B, F, A)
    inputs: torch.Tensor  # (B, F, INPUT_FEATURES)
    text: torch.Tensor  # (B, F, text_dim) the sentence typed at that frame (zeros if none)
    level: torch.Tensor  # (B, F) flow level; 1 = clean
    frame: torch.Tensor  # (B, F) frame index
    noisy: torch.Tensor  # (B, F) bool: a block being generated (sees only earlier frames)


@dataclass
class Memory:
    """Sink memory tokens (theme, reference image, sentences) with when each arrived."""

    tokens: torch.Tensor  # (B, M, width)
    arrival: torch.Tensor  # (B, M) frame index from which a token is visible
    valid: torch.Tensor  # (B, M) bool

    def select(self, rows: torch.Tensor) -> Memory:
        return Memory(self.tokens[rows], self.arrival[rows], self.valid[rows])


def rope_angles(pos: torch.Tensor, head_dim: int, base: float) -> tuple[torch.Tensor, torch.Tensor]:
    """cos/sin (B, 1, N, head_dim / 2) for per-token positions (B, N) (frame indices)."""
    d = head_dim // 2
    freqs = base ** (-torch.arange(d, device=pos.device, dtype=torch.float32) / d)
    ang = pos.float()[:, None, :, None] * freqs
    return ang.cos(), ang.sin()


def rope(x: torch.Tensor, angles: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
    """Rotate (B, H, N, D) queries or keys by precomputed angles."""
    cos, sin = angles
    d = x.shape[-1] // 2
    x1, x2 = x[..., :d], x[..., d:]
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)


class Layer(nn.Module):
    def __init__(self, cfg: WorldModelConfig):
        super().__init__()
        self.heads = cfg.heads
        self.ln1 = nn.LayerNorm(cfg.width)
        self.qkv = nn.Linear(cfg.width, 3 * cfg.width)
        self.proj = nn.Linear(cfg.width, cfg.width)
        self.ln2 = nn.LayerNorm(cfg.width)
        self.mlp = nn.Sequential(
            nn.Linear(cfg.width, 4 * cfg.width), nn.GELU(), nn.Linear(4 * cfg.width, cfg.width)
        )

    def _split(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        b, n, _ = x.shape
        q, k, v = self.qkv(self.ln1(x)).chunk(3, dim=-1)
        return tuple(t.view(b, n, self.heads, -1).transpose(1, 2) for t in (q, k, v))

    def memory_kv(self, mem: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        _, k, v = self._split(mem)
        return k, v

    def forward_memory(self, mem: torch.Tensor) -> torch.Tensor:
        """Memory tokens attend only to themselves: attention output is their own value."""
        _, _, v = self._split(mem)
        b, n, _ = mem.shape
        mem = mem + self.proj(v.transpose(1, 2).reshape(b, n, -1))
        return mem + self.mlp(self.ln2(mem))

    def forward(
        self,
        x: torch.Tensor,
        angles: tuple[torch.Tensor, torch.Tensor],
        mem_k: torch.Tensor,
        mem_v: torch.Tensor,
        mem_mask: torch.Tensor,
        past_k: torch.Tensor | None,
        past_v: torch.Tensor | None,
        past_mask: torch.Tensor | None,
        self_mask: torch.Tensor,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """x: (B, N, W) frame tokens; angles: their rotary cos/sin (frame positions).

        Keys are [memory (unrotated), past cached frame keys (already rotated), x itself].
        Masks are boolean (True = may attend): mem_mask (B, N, M), past_mask (B, N, P),
        self_mask (B, N, N). Returns x and this call's rotated keys and values (for a cache).
        """
        b, n, _ = x.shape
        q, k, v = self._split(x)
        qr, kr = rope(q, angles), rope(k, angles)
        scale = 1.0 / math.sqrt(q.shape[-1])
        logits = [q @ mem_k.transpose(-1, -2)]
        masks = [mem_mask]
        values = [mem_v]
        if past_k is not None:
            assert past_v is not None and past_mask is not None
            logits.append(qr @ past_k.transpose(-1, -2))
            masks.append(past_mask)
            values.append(past_v)
        logits.append(qr @ kr.transpose(-1, -2))
        masks.append(self_mask)
        values.append(v)
        att = torch.cat(logits, dim=-1) * scale
        att = att.masked_fill(~torch.cat(masks, dim=-1)[:, None], float("-inf"))
        out = att.softmax(dim=-1) @ torch.cat(values, dim=-2)
        x = x + self.proj(out.transpose(1, 2).reshape(b, n, -1))
        x = x + self.mlp(self.ln2(x))
        return x, kr, v


def level_embedding(s: torch.Tensor, dim: int) -> torch.Tensor:
    """Sinusoidal features of the flow level s in [0, 1]."""
    half = dim // 2
    freqs = torch.exp(-math.log(1000.0) * torch.arange(half, device=s.device) / half)
    ang = s[..., None].float() * 1000.0 * freqs
    return torch.cat([ang.sin(), ang.cos()], dim=-1)


class WorldModel(nn.Module):
    def __init__(self, config: WorldModelConfig):
        super().__init__()
        self.config = cfg = config
        w = cfg.width
        self.video_in = nn.Linear(2 * cfg.patch_dim, w)  # noisy patch + previous clean patch
        self.audio_in = nn.Linear(cfg.audio_dim, w)
        self.input_in = nn.Linear(INPUT_FEATURES, w)
        self.text_in = nn.Linear(cfg.text_dim, w)  # a sentence typed at this very frame
        self.slot = nn.Parameter(torch.randn(cfg.block_tokens, w) * 0.02)
        self.level = nn.Sequential(nn.Linear(64, w), nn.SiLU(), nn.Linear(w, w))
        self.theme_mem = nn.Embedding(cfg.themes, w)
        self.text_mem = nn.Linear(cfg.text_dim, w)
        self.image_mem = nn.Linear(cfg.image_dim, w)
        self.mem_kind = nn.Embedding(len(MEMORY_KINDS), w)
        self.layers = nn.ModuleList(Layer(cfg) for _ in range(cfg.depth))
        self.ln_out = nn.LayerNorm(w)
        self.video_out = nn.Linear(w, cfg.patch_dim)
        self.audio_out = nn.Linear(w, cfg.audio_dim)
        nn.init.zeros_(self.video_out.weight)
        nn.init.zeros_(self.video_out.bias)
        self.refine = latent_refiner(cfg) if cfg.refine_width else None

    # -- tokens ------------------------------------------------------------------------------
    def patchify(self, z: torch.Tensor) -> torch.Tensor:
        """(..., C, H, W) latent -> (..., tokens, patch_dim), tokens in raster order."""
        p, c, s = self.config.patch, self.config.latent_channels, self.config.latent_size
        g, lead = s // p, z.shape[:-3]
        z = z.reshape(-1, c, g, p, g, p).permute(0, 2, 4, 1, 3, 5)  # (n, g, g, c, p, p)
        return z.reshape(*lead, g * g, c * p * p)

    def unpatchify(self, t: torch.Tensor) -> torch.Tensor:
        p, c, s = self.config.patch, self.config.latent_channels, self.config.latent_size
        g, lead = s // p, t.shape[:-2]
        z = t.reshape(-1, g, g, c, p, p).permute(0, 3, 1, 4, 2, 5)  # (n, c, g, p, g, p)
        return z.reshape(*lead, c, s, s)

    def embed_blocks(
        self,
        video: torch.Tensor,
        prev: torch.Tensor,
        audio: torch.Tensor,
        inputs: torch.Tensor,
        text: torch.Tensor,
        level: torch.Tensor,
    ) -> torch.Tensor:
        """Blocks (B, F, ...) -> tokens (B, F * block_tokens, width)."""
        v = self.video_in(torch.cat([self.patchify(video), self.patchify(prev)], dim=-1))
        a = self.audio_in(audio)[:, :, None]
        i = (self.input_in(inputs) + self.text_in(text))[:, :, None]
        x = torch.cat([i, a, v], dim=2) + self.slot
        x = x + self.level(level_embedding(level, 64))[:, :, None]
        b, f, n, w = x.shape
        return x.reshape(b, f * n, w)

    def embed_memory(
        self, theme: torch.Tensor, text: torch.Tensor, image: torch.Tensor
    ) -> torch.Tensor:
        """theme (B,) ids, text (B, K, 384), image (B, image_dim) -> memory (B, 2 + K, W)."""
        kinds = self.mem_kind.weight
        t = (self.theme_mem(theme) + kinds[0])[:, None]
        s = self.text_mem(text) + kinds[1]
        im = (self.image_mem(image) + kinds[2])[:, None]
        return torch.cat([t, im, s], dim=1)

    def readout(self, x: torch.Tensor, video: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Tokens -> (video velocity (B, F, C, H, W), audio velocity (B, F, A)).

        `video` (B, F, C, H, W) is the blocks' input latent: the refiner, if any, sees it next
        to the assembled per-token velocity, so it can mend detail across patch borders.
        """
        b, blocks = video.shape[:2]
        x = self.ln_out(x).view(b, blocks, self.config.block_tokens, -1)
        velocity = self.unpatchify(self.video_out(x[:, :, 2:]))
        if self.refine is not None:
            flat = torch.cat([velocity, video], dim=2).flatten(0, 1)
            velocity = velocity + self.refine(flat).view_as(velocity)
        return velocity, self.audio_out(x[:, :, 1])

    def transformer_layers(self) -> list[Layer]:
        """The layers, typed (iterating an nn.ModuleList yields plain Modules)."""
        return [layer for layer in self.layers if isinstance(layer, Layer)]

    def memory_layers(self, mem: torch.Tensor) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """Per-layer (k, v) of memory tokens; they depend on nothing else, so cache them."""
        kv = []
        for layer in self.transformer_layers():
            kv.append(layer.memory_kv(mem))
            mem = layer.forward_memory(mem)
        return kv

    # -- full (uncached) pass: training and the reference for the cache -------------------------
    def forward(self, blocks: Blocks, memory: Memory) -> tuple[torch.Tensor, torch.Tensor]:
        """Run any set of blocks under the block-causal rule; velocities for every block."""
        cfg = self.config
        n = cfg.block_tokens
        b = blocks
        x = self.embed_blocks(b.video, b.prev, b.audio, b.inputs, b.text, b.level)
        angles = rope_angles(
            b.frame.repeat_interleave(n, dim=1), cfg.width // cfg.heads, cfg.rope_base
        )
        mem_mask = memory.valid[:, None, :] & (memory.arrival[:, None, :] <= b.frame[:, :, None])
        self_mask = block_mask(b.frame, b.noisy, cfg.context)
        mem_mask = mem_mask.repeat_interleave(n, dim=1)
        self_mask = self_mask.repeat_interleave(n, dim=1).repeat_interleave(n, dim=2)
        mem = memory.tokens
        for layer in self.transformer_layers():
            mk, mv = layer.memory_kv(mem)
            x, _, _ = layer(x, angles, mk, mv, mem_mask, None, None, None, self_mask)
            mem = layer.forward_memory(mem)
        return self.readout(x, b.video)

    # -- cached inference ----------------------------------------------------------------------
    def new_cache(self) -> KVCache:
        return KVCache(self.config.depth, self.config.context)

    def cached_block(
        self,
        cache: KVCache,
        video: torch.Tensor,
        prev: torch.Tensor,
        audio: torch.Tensor,
        inputs: torch.Tensor,
        text: torch.Tensor,
        level: float,
        frame: int,
        write: bool,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """One block at frame `frame` (batch 1 or B) against the cache.

        write=False: a noisy block (sees cached frames < frame). write=True: the clean block;
        its keys join the cache (evicting the oldest beyond `context`).
        """
        b = video.shape[0]
        n = self.config.block_tokens
        lv = torch.full((b, 1), float(level))
        x = self.embed_blocks(
            video[:, None], prev[:, None], audio[:, None], inputs[:, None], text[:, None], lv
        )
        cfg = self.config
        angles = rope_angles(
            torch.full((b, n), frame, dtype=torch.long), cfg.width // cfg.heads, cfg.rope_base
        )
        self_mask = torch.ones(b, n, n, dtype=torch.bool)
        past_frames = [f for f in cache.frames if frame - self.config.context <= f < frame]
        keep = [i for i, f in enumerate(cache.frames) if f in past_frames]
        for li, layer in enumerate(self.transformer_layers()):
            mk, mv = cache.memory_kv(li, b)
            mem_mask = torch.ones(b, n, mk.shape[2], dtype=torch.bool)
            pk = pv = pmask = None
            if keep:
                pk = torch.cat([cache.keys[li][i] for i in keep], dim=2)
                pv = torch.cat([cache.values[li][i] for i in keep], dim=2)
                pmask = torch.ones(b, n, pk.shape[2], dtype=torch.bool)
            x, k, v = layer(x, angles, mk, mv, mem_mask, pk, pv, pmask, self_mask)
            if write:
                cache.keys[li].append(k)
                cache.values[li].append(v)
        if write:
            cache.frames.append(frame)
            cache.evict()
        return self.readout(x, video[:, None])


def latent_refiner(cfg: WorldModelConfig) -> nn.Sequential:
    """Three 3x3 convs over the whole 16x16 latent (velocity and input latent in, velocity
    correction out): overlapping receptive fields across every patch border, so no token's
    4x4 tile is decided alone. Its last conv starts at zero: a warm start from weights
    without it begins exactly where those weights are."""
    c, w = cfg.latent_channels, cfg.refine_width
    last = nn.Conv2d(w, c, 3, padding=1)
    assert last.bias is not None
    nn.init.zeros_(last.weight)
    nn.init.zeros_(last.bias)
    return nn.Sequential(
        nn.Conv2d(2 * c, w, 3, padding=1), nn.SiLU(), nn.Conv2d(w, w, 3, padding=1), nn.SiLU(), last
    )


def block_mask(frame: torch.Tensor, noisy: torch.Tensor, context: int) -> torch.Tensor:
    """(B, F, F) may block a attend to block b: clean keys in the window, or itself."""
    fa, fb = frame[:, :, None], frame[:, None, :]
    na, nb = noisy[:, :, None], noisy[:, None, :]
    in_window = (fb >= fa - context) & ((fb < fa) | ((fb == fa) & ~na))
    eye = torch.eye(frame.shape[1], dtype=torch.bool, device=frame.device)[None]
    return (in_window & ~nb) | eye


class KVCache:
    """Per-layer keys/values of the last `context` clean frames, plus timeless memory."""

    def __init__(self, depth: int, context: int):
        self.context = context
        self.keys: list[list[torch.Tensor]] = [[] for _ in range(depth)]
        self.values: list[list[torch.Tensor]] = [[] for _ in range(depth)]
        self.frames: list[int] = []
        self.memory: list[tuple[torch.Tensor, torch.Tensor]] = []  # per layer (k, v)

    def set_memory(self, kv: list[tuple[torch.Tensor, torch.Tensor]]) -> None:
        self.memory = kv

    def memory_kv(self, layer: int, batch: int) -> tuple[torch.Tensor, torch.Tensor]:
        k, v = self.memory[layer]
        return k.expand(batch, -1, -1, -1), v.expand(batch, -1, -1, -1)

    def evict(self) -> None:
        while len(self.frames) > self.context:
            self.frames.pop(0)
            for keys, values in zip(self.keys, self.values, strict=True):
                keys.pop(0)
                values.pop(0)
