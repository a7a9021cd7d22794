"""Train the convolutional world model (engine/model/conv_world.py) on its own rollouts.

    python -m engine.train conv --data data/v3 --out runs/conv --minutes 30 [--error-bank]

Every step takes windows of `context + unroll` true frames. The first `context` are the
history (noised to a random level for part of the batch; the model is told the level, as
GameNGen does); the model then predicts `unroll` frames one after another, each prediction
becoming the newest history frame of the next, and the loss on every predicted frame is
backpropagated through the whole chain. So the model is trained on exactly what it meets at
play time, its own output as history, and learns to pull a drifting rollout back to the truth.

Error Bank (R2): with `bank_share > 0`, every `bank_every` steps the current model rolls
`bank_rollouts` windows out freely for up to `bank_horizon` frames and the histories it
builds on the way (drifted brightness, blur, lost objects) are stored with where in the data
they stand; that share of every later batch starts from a stored history instead of the
true one, the targets being the true continuation. `bank_share = 0` is the ablation.

Code models (`--codes K`, engine/model/latent_codes.py): the data's latents are replaced by
their nearest codes (a codebook fitted by k-means on the data when the model has none), every
predicted cell is scored by cross-entropy against the true cell's code (plus the regression
loss its logits start from), and the chain goes on from codes drawn as at run time, with no
gradient through the draw. `--init` with a regressor gives it code heads that start as "the
code nearest the regression". `--residual-codes R` gives a code model a second code per cell
(a residual codebook fitted on what the first codes leave), scored by cross-entropy given
the true first code; `--residual-only` trains that head alone.

Tokenizers and opening keyframes are frozen (copied from `weights`); the run resumes from
`out/state.pt` and writes a complete weights folder `out/weights/` at every checkpoint.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from tqdm import tqdm

from engine.model.checkpoint import atomic_save, load_payload
from engine.model.conv_world import (
    Conditioning,
    ConvWorldConfig,
    ConvWorldModel,
    Prediction,
    guided_rows,
    sample_frame,
)
from engine.model.latent_codes import (
    code_indices,
    code_latents,
    code_latents_of,
    fit_codebook,
    snap_to_codes,
)
from engine.model.world_loader import load_world_model

from .bank import LatentBank
from .common import (
    Budget,
    LossLog,
    Throughput,
    cosine_lr,
    optimizer_step,
    pick_device,
    resume,
    save_state,
)
from .latent_critic import LatentCritic, critic_loss, generator_adversarial_loss
from .latents import encode_dataset, tokenizer_fingerprint
from .plots import line_plot
from .weights_folder import write_weights

DENOISER_STEPS = 3  # Euler steps per frame of a new denoiser (one network pass each)


@dataclass
class ConvTrainConfig:
    data: str = "data/v3"
    weights: str = "engine/weights"  # tokenizers + openings (frozen); a conv world.pt warm-starts
    init: str | None = None  # another conv world.pt to warm-start from
    out: str = "runs/conv"
    steps: int = 100_000
    minutes: float | None = 30.0  # wall-clock budget (carries over resumes)
    batch: int = 8
    unroll: int = 4  # frames predicted in a chain per window
    lr: float = 1e-3
    audio_weight: float = 0.5
    ctx_noise: float = 0.3  # most context noise (latents are unit-scale)
    noise_share: float = 0.5  # windows whose history is noised
    drop_share: float = 0.05  # windows that miss their oldest history frames (cold starts)
    bank_share: float = 0.0  # share of every batch replayed from the Error Bank; 0 = none
    bank_every: int = 40
    bank_rollouts: int = 8
    bank_horizon: int = 48
    bank_size: int = 512
    # > 0: a latent critic scores every predicted frame against the true one (regressors only)
    adv_weight: float = 0.0
    adv_gamma: float = 1.0  # R1 + R2 penalty weight of the critic
    critic_warmup: int = 0  # first steps of a run in which only the critic learns (a fresh
    # critic against a warm-started generator would otherwise push it with noise)
    init_critic: str | None = None  # a critic.pt (written beside a run's weights) to start from
    image_share: float = 0.0  # share of every batch whose predicted frames see a reference
    # image arrive (the world recolours; rare in the data otherwise)
    sentence_share: float = 0.0  # share of every batch in which a sentence is typed among the
    # predicted frames (what a sentence does to the picture, seen far more often)
    # those windows open on their sentence: it is typed at the first predicted frame, so
    # every frame of the chain is one it governs, drawn from the model's own history (what a
    # rollout meets for the seconds after a sentence; a chain with the sentence anywhere in
    # it holds 2.5 such frames on average at unroll 4)
    sentence_onset: bool = False
    code_weight: float = 1.0  # a code model's cross-entropy weight (its regression keeps 1)
    # > 1: a code model's cross-entropy weighs this much more on frames a sentence governs
    # (typed now, or remembered and younger than `onset_frames`): those frames are few and
    # what a sentence changes is lost among the cells every frame repeats
    onset_weight: float = 1.0
    onset_frames: int = 40
    audio_only: bool = False  # train the sound head alone (the picture frozen; no Error Bank)
    residual_only: bool = False  # train a residual code model's second head alone
    sentence_only: bool = False  # train a code model's sentence head alone (the rest frozen)
    # share of windows whose chain starts having heard nothing (its sound history zeros): the
    # sound head must then tell rain or fire from the picture and the sentences, as it must
    # in a long session once its own washed-out sounds are all it has heard
    audio_drop_share: float = 0.0
    # The shape of a new model (warm starts keep their own); a denoiser's sampler_steps is
    # its Euler steps per frame, in the Error Bank's rollouts and at run time.
    model: ConvWorldConfig = field(default_factory=ConvWorldConfig)
    text_table: str | None = None
    threads: int | None = None
    seed: int = 0
    checkpoint_every: int = 50
    device: str = "auto"


@dataclass
class ErrorHistories:
    """Stored erroneous histories: (N, K, C, S, S) latents, their audio (N, K, A), the data
    row of the first frame after each, and how far from the truth each history had
    drifted."""

    video: torch.Tensor
    audio: torch.Tensor
    row: torch.Tensor
    error: torch.Tensor

    @classmethod
    def empty(cls, k: int, c: int, s: int, a: int, device: torch.device) -> ErrorHistories:
        return cls(
            torch.zeros(0, k, c, s, s, device=device),
            torch.zeros(0, k, a, device=device),
            torch.zeros(0, dtype=torch.long, device=device),
            torch.zeros(0, device=device),
        )

    def add(self, other: ErrorHistories, size: int) -> ErrorHistories:
        """Append, keeping the newest `size`."""
        joined = [
            torch.cat([a, b])[-size:]
            for a, b in zip(dataclasses.astuple(self), dataclasses.astuple(other), strict=True)
        ]
        return ErrorHistories(*joined)

    def state(self) -> dict[str, torch.Tensor]:
        return dataclasses.asdict(self)


def conv_windows(bank: LatentBank, starts: torch.Tensor, window: int) -> dict[str, torch.Tensor]:
    """`bank.windows` plus each frame's own sentence memory (B, T, K, ...): the last K
    sentences typed at or before that frame, newest last, as the runtime lays them out
    (a window's end can remember other sentences than its start)."""
    w = bank.windows(starts, window)
    rows = starts[:, None] + torch.arange(window, device=starts.device)
    mem_rows = bank.memory_rows[rows]
    valid = mem_rows >= 0
    safe = mem_rows.clamp(min=0)
    w["frame_mem_text"] = bank.text[safe] * valid[..., None]
    w["frame_mem_age"] = (bank.local[rows][..., None] - bank.local[safe]) * valid
    w["frame_mem_valid"] = valid
    return w


def frame_conditioning(w: dict[str, torch.Tensor], t: int, noise: torch.Tensor) -> Conditioning:
    """What the model is told for window position t (windows from `conv_windows`)."""
    return Conditioning(
        inputs=w["inputs"][:, t],
        text=w["text"][:, t],
        memory=w["frame_mem_text"][:, t],
        memory_age=w["frame_mem_age"][:, t],
        memory_valid=w["frame_mem_valid"][:, t],
        theme=w["theme"],
        image=w["image"] * w["frame_has_image"][:, t, None],
        noise=noise,
        cues=w["cues"][:, t],
    )


def weighted_code_loss(
    logits: torch.Tensor, codes: torch.Tensor, governed: torch.Tensor, cfg: ConvTrainConfig
) -> torch.Tensor:
    """The code cross-entropy, each row weighted `onset_weight` where a sentence governs
    it (`governed`, (B,) bool) and 1 elsewhere, normalised by the weights so the loss keeps
    its scale."""
    if cfg.onset_weight == 1.0:
        return F.cross_entropy(logits, codes)
    per_row = F.cross_entropy(logits, codes, reduction="none").flatten(1).mean(dim=1)
    weight = 1.0 + (cfg.onset_weight - 1.0) * governed.float()
    return (per_row * weight).sum() / weight.sum()


def context_noise_levels(
    b: int, cfg: ConvTrainConfig, gen: torch.Generator, device: torch.device
) -> torch.Tensor:
    """(b,) how much noise each window's true history gets: uniform in [0, ctx_noise] for a
    `noise_share` of the windows, 0 for the rest."""
    noise = torch.rand(b, generator=gen).to(device) * cfg.ctx_noise
    return noise * (torch.rand(b, generator=gen).to(device) < cfg.noise_share)


@dataclass
class StepLosses:
    """One training step's losses; `pairs` (previous true latent, true and predicted next
    latent, inputs; each chain step stacked into the batch) is what the critic learns from."""

    loss: torch.Tensor
    video: torch.Tensor
    audio: torch.Tensor
    adversarial: torch.Tensor | None = None
    pairs: tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor] | None = None
    codes: torch.Tensor | None = None  # a code model's cross-entropy
    residual: torch.Tensor | None = None  # a residual code model's second cross-entropy


def unrolled_loss(
    model: ConvWorldModel,
    w: dict[str, torch.Tensor],
    cfg: ConvTrainConfig,
    gen: torch.Generator,
    history: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None = None,
    critic: LatentCritic | None = None,
) -> StepLosses:
    """Losses of predicting the last `unroll` frames of each window in a chain from its first
    `context`. `history` (video, audio, rows bool) replaces the history of the chosen windows
    with stored erroneous ones (the Error Bank). With a `critic`, every predicted frame is also
    scored against the true one (`adv_weight` of the relativistic generator loss)."""
    k = model.config.context
    b = w["video"].shape[0]
    dev = w["video"].device
    ctx = w["video"][:, :k]
    prev_audio = w["audio"][:, :k]
    noise = context_noise_levels(b, cfg, gen, dev)
    ctx = ctx + noise[:, None, None, None, None] * torch.randn(ctx.shape, generator=gen).to(dev)
    if history is not None:
        bad_v, bad_a, rows = history
        ctx = torch.where(rows[:, None, None, None, None], bad_v, ctx)
        prev_audio = torch.where(rows[:, None, None], bad_a, prev_audio)
        noise = torch.where(rows, torch.zeros_like(noise), noise)
    valid = torch.ones(b, k, dtype=torch.bool, device=dev)
    dropped = torch.rand(b, generator=gen).to(dev) < cfg.drop_share
    missing = torch.randint(1, k + 1, (b,), generator=gen).to(dev)
    valid &= ~(dropped[:, None] & (torch.arange(k, device=dev)[None] < missing[:, None]))
    if cfg.audio_drop_share > 0:
        deaf = torch.rand(b, generator=gen).to(dev) < cfg.audio_drop_share
        prev_audio = torch.where(deaf[:, None, None], torch.zeros_like(prev_audio), prev_audio)
    video_loss = audio_loss = code_loss = residual_loss = torch.zeros((), device=dev)
    predictions = []
    for r in range(cfg.unroll):
        t = k + r
        cond = frame_conditioning(w, t, noise)
        governed = guided_rows(cond, cfg.onset_frames)
        p = model.predict(ctx, valid, prev_audio, cond)
        z = p.video
        target = w["video"][:, t]
        video_loss = video_loss + F.mse_loss(z, target) + 0.5 * F.l1_loss(z, target)
        audio_loss = audio_loss + sound_loss(model, p, w["audio"][:, t], gen)
        with torch.set_grad_enabled(model.sound_flow is None):  # a drawn sound is a sample
            a = model.draw_audio(p, gen)
        predictions.append(z)
        if p.logits is not None:  # a code model goes on from the codes it draws
            code_loss = code_loss + weighted_code_loss(p.logits, w["codes"][:, t], governed, cfg)
            if model.config.residual_codes:  # the second code, given the true first
                first = code_latents(w["codes"][:, t], model.codebook)  # type: ignore[arg-type]
                rest = model.residual_logits(p, first)
                residual_loss = residual_loss + weighted_code_loss(
                    rest, w["residual"][:, t], governed, cfg
                )
            with torch.no_grad():
                z = model.draw_codes(p.logits, gen)
                if model.config.residual_codes:
                    z = model.draw_residual(p, z, gen)
        ctx = torch.cat([ctx[:, 1:], z[:, None]], dim=1)
        valid = torch.cat([valid[:, 1:], torch.ones(b, 1, dtype=torch.bool, device=dev)], dim=1)
        prev_audio = torch.cat([prev_audio[:, 1:], a[:, None]], dim=1)
    video_loss, audio_loss = video_loss / cfg.unroll, audio_loss / cfg.unroll
    code_loss, residual_loss = code_loss / cfg.unroll, residual_loss / cfg.unroll
    if cfg.audio_only:
        return StepLosses(audio_loss, video_loss.detach(), audio_loss, codes=code_loss.detach())
    if cfg.residual_only:
        video, audio, codes = video_loss.detach(), audio_loss.detach(), code_loss.detach()
        return StepLosses(residual_loss, video, audio, codes=codes, residual=residual_loss)
    if cfg.sentence_only:
        return StepLosses(code_loss, video_loss.detach(), audio_loss.detach(), codes=code_loss)
    loss = video_loss + cfg.audio_weight * audio_loss
    loss = loss + cfg.code_weight * (code_loss + residual_loss)
    if critic is None:
        return StepLosses(loss, video_loss, audio_loss, codes=code_loss, residual=residual_loss)
    steps = slice(k, k + cfg.unroll)
    pairs = (
        w["video"][:, k - 1 : k - 1 + cfg.unroll].flatten(0, 1),
        w["video"][:, steps].flatten(0, 1),
        torch.stack(predictions, dim=1).flatten(0, 1),
        w["inputs"][:, steps].flatten(0, 1),
    )
    adversarial = generator_adversarial_loss(critic, *pairs)
    return StepLosses(
        loss + cfg.adv_weight * adversarial, video_loss, audio_loss, adversarial, pairs
    )


def sound_loss(
    model: ConvWorldModel, p: Prediction, target: torch.Tensor, gen: torch.Generator
) -> torch.Tensor:
    """The sound heads' loss: squared error of a regressed sound, the Gaussian negative log
    likelihood (up to a constant) of a drawn one, plus a flow head's rectified-flow loss."""
    if p.audio_spread is None:
        loss = F.mse_loss(p.audio, target)
    else:
        z = (target - p.audio) / p.audio_spread
        loss = (0.5 * z.pow(2) + p.audio_spread.log()).mean()
    if model.sound_flow is not None and p.heard is not None:
        loss = loss + model.sound_flow.loss(p.heard, target, gen)
    return loss


def denoise_loss(
    model: ConvWorldModel,
    w: dict[str, torch.Tensor],
    cfg: ConvTrainConfig,
    gen: torch.Generator,
    history: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None = None,
    critic: LatentCritic | None = None,
) -> StepLosses:
    """Flow-matching loss of a denoising model on each of the last `unroll` frames of the
    windows, each from its own true history (noised as in `unrolled_loss`; the Error Bank's
    stored history for the chosen windows' first target): the model sees the frame at a
    random level s (x_s = s * x + (1 - s) * noise) and is scored on its clean estimate."""
    k = model.config.context
    b = w["video"].shape[0]
    dev = w["video"].device
    noise = context_noise_levels(b, cfg, gen, dev)
    video_loss = audio_loss = torch.zeros((), device=dev)
    for r in range(cfg.unroll):
        t = k + r
        ctx = w["video"][:, r:t]
        ctx = ctx + noise[:, None, None, None, None] * torch.randn(ctx.shape, generator=gen).to(dev)
        prev_audio = w["audio"][:, t - k : t]
        level = noise
        if history is not None and r == 0:
            bad_v, bad_a, rows = history
            ctx = torch.where(rows[:, None, None, None, None], bad_v, ctx)
            prev_audio = torch.where(rows[:, None, None], bad_a, prev_audio)
            level = torch.where(rows, torch.zeros_like(noise), noise)
        valid = torch.ones(b, k, dtype=torch.bool, device=dev)
        target = w["video"][:, t]
        s = torch.rand(b, generator=gen).to(dev)
        eps = torch.randn(target.shape, generator=gen).to(dev)
        noisy = s[:, None, None, None] * target + (1 - s[:, None, None, None]) * eps
        cond = frame_conditioning(w, t, level)
        cond.level = s
        p = model.predict(ctx, valid, prev_audio, cond, noisy=noisy)
        video_loss = video_loss + F.mse_loss(p.video, target)
        audio_loss = audio_loss + sound_loss(model, p, w["audio"][:, t], gen)
    video_loss, audio_loss = video_loss / cfg.unroll, audio_loss / cfg.unroll
    return StepLosses(video_loss + cfg.audio_weight * audio_loss, video_loss, audio_loss)


@torch.no_grad()
def collect_histories(
    model: ConvWorldModel, bank: LatentBank, cfg: ConvTrainConfig, gen: torch.Generator
) -> ErrorHistories:
    """Free rollouts of the current model from true history; the histories it builds at a few
    horizons, each with the data row that follows it (room is left for `unroll` targets)."""
    k = model.config.context
    length = k + cfg.bank_horizon + cfg.unroll
    starts = bank.sample(cfg.bank_rollouts, length, gen, first_frame_share=0.0)
    w = conv_windows(bank, starts, length)
    marks = {h for h in (4, 12, 24, cfg.bank_horizon) if h <= cfg.bank_horizon}
    zeros = torch.zeros(len(starts), device=starts.device)
    ctx, audio = w["video"][:, :k], w["audio"][:, :k]
    valid = torch.ones(len(starts), k, dtype=torch.bool, device=starts.device)
    found = []
    model.eval()
    for h in range(1, cfg.bank_horizon + 1):
        t = k + h - 1
        sample_noise = torch.randn(ctx[:, 0].shape, generator=gen).to(ctx.device)
        z, heard = sample_frame(
            model, ctx, valid, audio, frame_conditioning(w, t, zeros), sample_noise, gen
        )
        ctx = torch.cat([ctx[:, 1:], z[:, None]], dim=1)
        audio = torch.cat([audio[:, 1:], heard[:, None]], dim=1)
        if h in marks:
            error = (ctx - w["video"][:, t - k + 1 : t + 1]).pow(2).mean(dim=(1, 2, 3, 4))
            found.append(ErrorHistories(ctx.clone(), audio.clone(), starts + t + 1, error))
    model.train()
    out = found[0]
    for more in found[1:]:
        out = out.add(more, size=10**9)
    return out


def initial_model(cfg: ConvTrainConfig) -> ConvWorldModel:
    """A conv generator to warm-start from (`init`, else the weights folder's own when it is one
    of the kind asked for: regressing or denoising, with or without a motion field), or a new
    one."""
    wanted = cfg.model
    if cfg.init is not None:
        model = load_world_model(cfg.init)
        if not isinstance(model, ConvWorldModel):
            raise ValueError(f"{cfg.init} holds no convolutional world model")
        if wanted.codes and not model.config.codes:
            model = with_code_heads(model, wanted.codes)
        return _grown(model, wanted)
    shipped = Path(cfg.weights) / "world.pt"
    if shipped.exists():
        model = load_world_model(shipped)
        if (
            isinstance(model, ConvWorldModel)
            and model.config.denoise == wanted.denoise
            and model.config.flow == wanted.flow
            and model.config.codes == wanted.codes
        ):
            return _grown(model, wanted)
    return ConvWorldModel(wanted)


def _grown(model: ConvWorldModel, wanted: ConvWorldConfig) -> ConvWorldModel:
    """A warm start with the parts `wanted` asks for that it lacks."""
    model = with_residual_head(model, wanted.residual_codes)
    model = with_sentence_head(model, wanted.sentence_head)
    model = with_camera_warp(model, wanted.camera_warp)
    return with_sound_head(
        model,
        wanted.audio_history,
        wanted.audio_sample,
        wanted.audio_flow_steps,
        wanted.sound_cues,
    )


def with_camera_warp(model: ConvWorldModel, wanted: bool) -> ConvWorldModel:
    """The model reading its history moved by the camera where that is asked for or it did
    already (the warp has no weights of its own: the same network, moved inputs)."""
    if wanted and not model.config.camera_warp:
        model.config = dataclasses.replace(model.config, camera_warp=True)
    return model


def with_code_heads(model: ConvWorldModel, codes: int) -> ConvWorldModel:
    """A regressor as a code model: the same weights, code heads that start at "the code
    nearest the regression" and an empty codebook (fitted on the data before training)."""
    if model.config.denoise:
        raise ValueError("code heads go on a regressing model (not a denoiser)")
    coded = ConvWorldModel(dataclasses.replace(model.config, codes=codes))
    missing, unexpected = coded.load_state_dict(model.state_dict(), strict=False)
    assert not unexpected and all(n.startswith(("code", "codebook")) for n in missing), missing
    return coded


def with_residual_head(model: ConvWorldModel, residual: int) -> ConvWorldModel:
    """A code model with a residual second code per cell (`residual` > 0 and none yet): the
    same weights, a residual head that starts at "the residual nearest what the regression
    leaves" and an empty residual codebook (fitted on the data before training)."""
    if not residual or model.config.residual_codes:
        return model
    if not model.config.codes:
        raise ValueError("a residual code stage goes on a code model (--codes)")
    return _with_new_part(model, "residual", residual_codes=residual)


def with_sentence_head(model: ConvWorldModel, hidden: int) -> ConvWorldModel:
    """A code model with a second reader of the newest sentence (`hidden` > 0 and none yet):
    the same weights, a sentence head whose output starts at zero (the same logits)."""
    if not hidden or model.config.sentence_head:
        return model
    if not model.config.codes:
        raise ValueError("a sentence head goes on a code model (--codes)")
    return _with_new_part(model, "sentence_head", sentence_head=hidden)


def _with_new_part(model: ConvWorldModel, prefix: str, **config: Any) -> ConvWorldModel:
    """The model rebuilt with `config` changed, its weights kept: only parameters named
    `prefix`... are new."""
    grown = ConvWorldModel(dataclasses.replace(model.config, **config))
    missing, unexpected = grown.load_state_dict(model.state_dict(), strict=False)
    assert not unexpected and all(n.startswith(prefix) for n in missing), missing
    return grown


def with_sound_head(
    model: ConvWorldModel, history: int, sample: bool, flow_steps: int = 0, cues: int = 0
) -> ConvWorldModel:
    """The model with a sound head that reads `history` past audio latents and `cues` sound
    cues (engine/model/sound_cues.py), with `sample` predicts a spread as well, and with
    `flow_steps` gains a flow-matching head drawing the sound in that many Euler steps. It
    starts as the old head (the new inputs' weights and the spread's weights zero, every
    spread 1; a new flow draws plain noise until trained). A head that has all of these
    already, or more, is kept; a flow's steps are set as asked."""
    cfg = model.config
    wanted = dataclasses.replace(
        cfg,
        audio_history=max(history, cfg.audio_history),
        audio_sample=sample or cfg.audio_sample,
        audio_flow_steps=flow_steps or cfg.audio_flow_steps,
        sound_cues=max(cues, cfg.sound_cues),
    )
    if wanted == cfg:
        return model
    grown = ConvWorldModel(wanted)
    mine = grown.state_dict()
    kept = {k: v for k, v in model.state_dict().items() if k in mine and v.shape == mine[k].shape}
    missing, unexpected = grown.load_state_dict(kept, strict=False)
    sound = ("audio_head", "sound_flow")
    assert not unexpected and all(n.startswith(sound) for n in missing), missing
    with torch.no_grad():
        if (wanted.audio_history, wanted.sound_cues) != (cfg.audio_history, cfg.sound_cues):
            _grow_sound_inputs(model.audio_head[0], grown.audio_head[0], cfg, wanted)
            if model.sound_flow is not None and grown.sound_flow is not None:
                old_in, new_in = model.sound_flow.context_in[0], grown.sound_flow.context_in[0]
                _grow_sound_inputs(old_in, new_in, cfg, wanted)
        if wanted.audio_sample != cfg.audio_sample:
            old_out, new_out = _linear(model.audio_head[2]), _linear(grown.audio_head[2])
            new_out.weight.zero_()
            new_out.bias.zero_()
            new_out.weight[: old_out.out_features] = old_out.weight
            new_out.bias[: old_out.out_features] = old_out.bias
    return grown


def _grow_sound_inputs(
    old: torch.nn.Module, new: torch.nn.Module, was: ConvWorldConfig, now: ConvWorldConfig
) -> None:
    """Copy a sound head's input layer into one that reads more cues or past sounds. Its
    inputs are the pooled features and the conditioning, the cues, then the sounds (newest
    last): what the old head read keeps its weights, what is new starts at 0."""
    old_in, new_in = _linear(old), _linear(new)
    shared = was.width_low + was.cond_dim
    heard = was.audio_history * was.audio_dim
    new_in.weight.zero_()
    new_in.weight[:, : shared + was.sound_cues] = old_in.weight[:, : shared + was.sound_cues]
    new_in.weight[:, new_in.in_features - heard :] = old_in.weight[:, old_in.in_features - heard :]
    new_in.bias.copy_(old_in.bias)


def _linear(layer: torch.nn.Module) -> torch.nn.Linear:
    assert isinstance(layer, torch.nn.Linear)
    return layer


def quantize_bank(
    model: ConvWorldModel,
    bank: LatentBank,
    samples: int = 400_000,
    gen: torch.Generator | None = None,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """A code model's data: fit its codebook (and a residual model's residual codebook, on
    what the first codes leave) on `samples` of the bank's latent cells where it has none,
    replace the bank's latents by their codes, and return every frame's codes (N, S, S) and
    residual codes (N, S, S; None without a residual stage)."""
    codebook: torch.Tensor = model.codebook  # type: ignore[assignment]
    c = bank.video.shape[1]
    cells = bank.video.permute(0, 2, 3, 1).reshape(-1, c)
    pick = torch.randint(len(cells), (min(samples, len(cells)),), generator=gen)
    sample = cells[pick.to(cells.device)].cpu().float()
    if not codebook.abs().sum():
        codebook.copy_(fit_codebook(sample, len(codebook)))
    residual = model.residual_book
    if residual is not None and not residual.abs().sum():
        first = snap_to_codes(sample[:, :, None, None], codebook.cpu().float())[:, :, 0, 0]
        residual.copy_(fit_codebook(sample - first, len(residual)))
    parts = [
        code_indices(bank.video[i : i + 512], codebook, residual)
        for i in range(0, len(bank.video), 512)
    ]
    indices = torch.cat([first for first, _ in parts])
    rest = None if residual is None else torch.cat([r for _, r in parts if r is not None])
    bank.video = code_latents_of(indices, rest, codebook, residual).to(bank.video.dtype)
    return indices, rest


def adversarial_parts(
    cfg: ConvTrainConfig, model: ConvWorldModel, device: torch.device
) -> tuple[LatentCritic | None, torch.optim.Optimizer | None, dict]:
    """The critic and its optimizer when `adv_weight > 0` (None, None otherwise), and the
    named parts a checkpoint saves and resumes them by."""
    if cfg.adv_weight <= 0:
        return None, None, {}
    if model.config.denoise or model.config.codes:
        raise ValueError("the adversarial loss is for regressing models (no --denoise, --codes)")
    critic = LatentCritic(model.config.latent_channels)
    if cfg.init_critic is not None:
        critic.load_state_dict(load_payload(cfg.init_critic)["critic"])
    critic = critic.float().to(device).train()
    critic_opt = torch.optim.AdamW(critic.parameters(), lr=cfg.lr / 2, betas=(0.5, 0.9))
    return critic, critic_opt, {"critic": critic, "critic_opt": critic_opt}


def with_event_windows(
    starts: torch.Tensor,
    bank: LatentBank,
    cfg: ConvTrainConfig,
    window: int,
    context: int,
    gen: torch.Generator,
) -> torch.Tensor:
    """`starts` with its first `image_share` replaced by windows in which a reference image
    arrives among the predicted frames, the next `sentence_share` by windows in which a
    sentence is typed among them (a share is skipped where the data has no such window)."""
    picks = []
    for share, pool in (
        (cfg.image_share, bank.image_event_starts(window, context)),
        (
            cfg.sentence_share,
            bank.sentence_event_starts(
                window, context, context + 1 if cfg.sentence_onset else None
            ),
        ),
    ):
        n = int(round(share * len(starts)))
        if n and len(pool):
            picks.append(pool[torch.randint(len(pool), (n,), generator=gen).to(pool.device)])
    taken = sum(len(p) for p in picks)
    return torch.cat([*picks, starts[taken:]])[: len(starts)]


def save_critic(critic: LatentCritic, path: Path) -> None:
    """The critic's weights in fp16 (under 1 MB), so a candidate generator can be continued
    against the critic it was trained with (`--init-critic`)."""
    atomic_save({"critic": {k: v.half() for k, v in critic.state_dict().items()}}, path)


def train_conv(cfg: ConvTrainConfig) -> Path:
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    device = pick_device(cfg.device)
    torch.manual_seed(cfg.seed)
    cache = out.parent / (
        f"{Path(cfg.data).name}_latents_{tokenizer_fingerprint(cfg.weights)[:10]}.pt"
    )
    episodes, table = encode_dataset(cfg.data, cfg.weights, cache, device, cfg.text_table)
    model = initial_model(cfg)
    bank = LatentBank.build(episodes, table, device, model.config.image_dim)
    model = model.to(device).train()
    if cfg.audio_only or cfg.residual_only or cfg.sentence_only:
        head: tuple[str, ...] = ("audio_head", "sound_flow")
        flag, what = "--audio-only", "sound"
        if cfg.residual_only:
            flag, what, head = "--residual-only", "residual", ("residual",)
        if cfg.sentence_only:
            flag, what, head = "--sentence-only", "sentence", ("sentence_head",)
        if cfg.bank_share > 0 or cfg.adv_weight > 0:
            raise ValueError(f"{flag} trains the {what} head alone: no Error Bank, no critic")
        if cfg.residual_only and not model.config.residual_codes:
            raise ValueError("--residual-only needs a residual code model (--residual-codes)")
        if cfg.sentence_only and model.sentence_head is None:
            raise ValueError("--sentence-only needs a code model with --sentence-head N")
        for name, param in model.named_parameters():
            param.requires_grad_(name.startswith(head))
    trained = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(trained, lr=cfg.lr, weight_decay=0.01, betas=(0.9, 0.95))
    critic, critic_opt, adversary = adversarial_parts(cfg, model, device)
    state = out / "state.pt"
    step, spent = resume(state, model=model, opt=opt, **adversary)
    codes = residual = None  # a code model's targets: every data frame's codes (N, S, S)
    if model.config.codes:  # after resuming: a resumed codebook is kept, not refitted
        codes, residual = quantize_bank(model, bank, gen=torch.Generator().manual_seed(cfg.seed))
    c, s, a = model.config.latent_channels, model.config.latent_size, model.config.audio_dim
    errors = ErrorHistories.empty(model.config.context, c, s, a, device)
    if state.exists() and "errors" in (saved := torch.load(state, weights_only=True)):
        errors = ErrorHistories(**{k: v.to(device) for k, v in saved["errors"].items()})
    budget = Budget(cfg.minutes, spent) if cfg.minutes else None
    gen = torch.Generator().manual_seed(cfg.seed * 100_003 + step)
    log = LossLog(out / "loss.jsonl")
    window = model.config.context + cfg.unroll
    bar = tqdm(total=cfg.steps, initial=step, desc="conv world", unit="step", mininterval=10)
    speed = Throughput(device, frames_per_step=cfg.batch * cfg.unroll)

    def frac() -> float:
        done = step / cfg.steps
        return max(done, budget.spent / budget.seconds) if budget is not None else done

    resumed_at = step  # a resumed run warms up again: a budget extended after a finished run
    # would otherwise jump from the schedule's end (0.1 of the peak) to where it now stands
    while frac() < 1:
        for g in opt.param_groups:
            g["lr"] = cosine_lr(cfg.lr, frac(), step - resumed_at, warmup=50)
        if cfg.bank_share > 0 and step % cfg.bank_every == 0:
            errors = errors.add(collect_histories(model, bank, cfg, gen), cfg.bank_size)
        starts = bank.sample(cfg.batch, window, gen, first_frame_share=0.0)
        starts = with_event_windows(starts, bank, cfg, window, model.config.context, gen)
        history = None
        n_bad = int(round(cfg.bank_share * cfg.batch)) if len(errors.row) else 0
        if n_bad:
            pick = torch.randint(len(errors.row), (n_bad,), generator=gen).to(errors.row.device)
            first = errors.row[pick].to(device) - model.config.context
            starts = torch.cat([starts[: cfg.batch - n_bad], first])
            rows = torch.arange(cfg.batch, device=device) >= cfg.batch - n_bad
            pad = cfg.batch - n_bad
            bad_v = torch.cat(
                [errors.video[pick][:1].expand(pad, -1, -1, -1, -1) * 0, errors.video[pick]]
            )
            bad_a = torch.cat([errors.audio[pick][:1].expand(pad, -1, -1) * 0, errors.audio[pick]])
            history = (bad_v.to(device), bad_a.to(device), rows)
        w = conv_windows(bank, starts, window)
        frames = starts[:, None] + torch.arange(window, device=device)
        if codes is not None:
            w["codes"] = codes[frames]
        if residual is not None:
            w["residual"] = residual[frames]
        loss_of = denoise_loss if model.config.denoise else unrolled_loss
        losses = loss_of(model, w, cfg, gen, history, critic)
        if step >= cfg.critic_warmup or critic is None:
            optimizer_step(opt, losses.loss, clip=trained)
        figures = {"video": losses.video.item(), "audio": losses.audio.item()}
        if codes is not None and losses.codes is not None:
            figures["codes"] = losses.codes.item()
        if residual is not None and losses.residual is not None:
            figures["residual"] = losses.residual.item()
        if critic is not None and losses.pairs is not None:
            assert critic_opt is not None and losses.adversarial is not None
            d_loss, relativistic = critic_loss(critic, *losses.pairs, gamma=cfg.adv_gamma)
            optimizer_step(critic_opt, d_loss)
            figures |= {"generator_adv": losses.adversarial.item(), "critic": relativistic.item()}
        step += 1
        speed.tick()
        bar.update()
        log.add(step, loss=losses.loss.item(), **figures)
        bar.set_postfix({k: f"{v:.3f}" for k, v in figures.items()}, refresh=False)
        if step % cfg.checkpoint_every == 0 or frac() >= 1:
            save_state(
                state,
                step,
                budget.spent if budget else 0.0,
                {"train": dataclasses.asdict(cfg), "errors": errors.state()},
                model=model,
                opt=opt,
                **adversary,
            )
            shown = ("video", "audio") + (("generator_adv", "critic") if critic else ())
            shown += ("codes",) if codes is not None else ()
            shown += ("residual",) if residual is not None else ()
            line_plot(out / "loss.png", log.series(*shown), "conv world: unrolled loss")
            write_weights(cfg, out, world=model, step=step)
            if critic is not None:
                save_critic(critic, out / "weights" / "critic.pt")
    bar.close()
    speed.report()
    return write_weights(cfg, out, world=model, step=step)
