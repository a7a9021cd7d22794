"""CLI: `python -m engine.train STAGE --preset {cpu,gpu}`; STAGE is video, audio, generator, ship,
text-table (sentence embeddings for a machine without the text encoder), openings (keyframes
sessions start from), sampler-steps (the shipped generator's default), guidance (a conv
generator's run-time text and image guidance), code-draws (a code model's run-time draw
temperature and noise sharing), camera-warp (a conv generator reads its history moved by the
camera, optionally by whole cells and with a memory of each direction; --off undoes it),
sentence-snap (a typed sentence moved onto the training sentences it resembles; --off removes
it), measure (rollout picture quality against the simulator, engine/train/measure.py), sheets
(60-second contact sheets per theme), audio-study (what a per-frame audio latent can carry; SNR
and log-spectral distance of audio tokenizers on held-out audio), or the issue-11 fine-tunes
warm-started from shipped weights (engine/train/finetune.py): latents, errorbank, finetune,
decoder; or conv, the convolutional world model trained on its own unrolled rollouts
(engine/train/conv_generator.py); or particles, the rain and snow layer drawn over the
picture (engine/train/particles.py); or scene-edit, the change a sentence makes to the
picture at once (engine/train/scene_edit.py); or depth, how far away each cell of a latent
frame is, for the walk warp (engine/train/depth.py).

Every stage resumes from its checkpoint under --out when re-run with the same arguments.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from .presets import PRESETS


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m engine.train")
    parser.add_argument(
        "stage",
        choices=(
            "video",
            "audio",
            "generator",
            "ship",
            "text-table",
            "openings",
            "sampler-steps",
            "guidance",
            "code-draws",
            "camera-warp",
            "sentence-snap",
            "measure",
            "sheets",
            "errorbank",
            "finetune",
            "decoder",
            "latents",
            "audio-study",
            "conv",
            "particles",
            "scene-edit",
            "palette-edit",
            "depth",
        ),
    )
    parser.add_argument("--preset", choices=sorted(PRESETS), default="cpu")
    parser.add_argument("--data", default=None, help="dataset root (python -m engine.data)")
    parser.add_argument("--out", default=None, help="run folder (checkpoints, plots)")
    parser.add_argument("--tokenizers", default=None, help="folder with the tokenizer files")
    parser.add_argument("--minutes", type=float, default=None, help="wall-clock budget")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--dest", default=None, help="ship: where to write (engine/weights)")
    parser.add_argument(
        "--steps",
        type=int,
        default=None,
        help="sampler-steps: the generator's default Euler steps per frame",
    )
    parser.add_argument("--device", default=None, help="auto (CUDA when there is one), cpu, cuda")
    parser.add_argument(
        "--text-guidance", type=float, default=1.0, help="guidance: sentences' weight (1 = off)"
    )
    parser.add_argument(
        "--text-guidance-frames",
        type=int,
        default=0,
        help="guidance: frames after a sentence that text guidance lasts (0 = while remembered)",
    )
    parser.add_argument(
        "--image-guidance",
        type=float,
        default=1.0,
        help="guidance: the reference picture's weight (1 = off)",
    )
    parser.add_argument(
        "--adv-weight",
        type=float,
        default=None,
        help="video stage and decoder: patch-discriminator weight (0 turns it off); conv: "
        "latent-critic weight on every predicted frame (regressors)",
    )
    parser.add_argument(
        "--text-table",
        default=None,
        help="generator: sentence embeddings from the text-table stage "
        "(for machines without the text encoder); text-table: where to "
        "write them",
    )
    parser.add_argument(
        "--weights", default=None, help="measure/sheets: weights folder (engine/weights by default)"
    )
    parser.add_argument(
        "--project",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="measure: re-encode generated frames (default: as configured)",
    )
    parser.add_argument(
        "--long-frames", type=int, default=2000, help="measure: length of the walking rollouts"
    )
    parser.add_argument(
        "--around",
        action="store_true",
        help="measure, sheets: every session also knows the rest of a full turn from where "
        "its priming ends, as one opened from its theme's keyframes does",
    )
    parser.add_argument(
        "--error-bank",
        default=None,
        help="finetune: ErrorBank file to replay; errorbank: where to write it",
    )
    parser.add_argument(
        "--bank-share",
        type=float,
        default=None,
        help="finetune: share of every batch replayed from the Error Bank",
    )
    parser.add_argument(
        "--rollouts",
        type=int,
        default=40,
        help="errorbank: model rollouts to collect histories from",
    )
    parser.add_argument(
        "--keep",
        type=int,
        default=0,
        help="errorbank: histories to keep, equally many per error quartile",
    )
    parser.add_argument(
        "--seed",
        type=int,
        default=0,
        help="errorbank/finetune/decoder: random seed (parallel workers differ)",
    )
    parser.add_argument(
        "--horizons",
        default="5,16,48,96,160",
        help="errorbank: rollout lengths at which histories are stored",
    )
    parser.add_argument(
        "--episodes",
        type=int,
        default=None,
        help="measure: fidelity episodes (10 by default, as the eval; 0 skips them); "
        "scene-edit: simulator episodes to take pairs from (200); depth: episodes to learn "
        "from (60)",
    )
    parser.add_argument(
        "--long-runs", type=int, default=2, help="measure: walking rollouts for brightness drift"
    )
    parser.add_argument("--batch", type=int, default=None, help="finetune/decoder: batch size")
    parser.add_argument(
        "--init",
        default=None,
        help="conv: a conv world.pt to warm-start from; scene-edit: a scene_edit.pt; "
        "palette-edit: a palette_edit.pt; "
        "depth: a depth.pt",
    )
    parser.add_argument(
        "--lr",
        type=float,
        default=None,
        help="conv: peak learning rate (1e-3; a continuation of trained weights wants less)",
    )
    parser.add_argument(
        "--unroll", type=int, default=None, help="conv: frames predicted in a chain per window"
    )
    parser.add_argument(
        "--width", type=int, default=None, help="conv: channels at 16x16 (a new model only)"
    )
    parser.add_argument(
        "--flow", action="store_true", help="conv: a new model also predicts a motion field"
    )
    parser.add_argument(
        "--camera-warp",
        action="store_true",
        help="conv: the history is moved by each frame's camera turn before the model reads it "
        "(an --init model gets it too)",
    )
    parser.add_argument(
        "--off",
        action="store_true",
        help="camera-warp: stop reading moved history; sentence-snap: remove the snap",
    )
    parser.add_argument(
        "--snap-floor",
        type=float,
        default=None,
        help="sentence-snap: the cosine to a training sentence below which text is left "
        "alone (0.45)",
    )
    parser.add_argument(
        "--snap-neighbours",
        type=int,
        default=None,
        help="sentence-snap: training sentences a typed one is moved onto (3)",
    )
    parser.add_argument(
        "--whole-cells",
        action="store_true",
        help="camera-warp: a session moves its history by whole cells (the rest carried)",
    )
    parser.add_argument(
        "--view-memory",
        action="store_true",
        help="camera-warp: a session remembers each direction; a turn back starts from it",
    )
    parser.add_argument(
        "--walk",
        action="store_true",
        help="camera-warp: W/S/A/D spread the ground out from the horizon or slide it sideways",
    )
    parser.add_argument(
        "--bank-every", type=int, default=None, help="conv: steps between Error Bank collections"
    )
    parser.add_argument(
        "--bank-rollouts", type=int, default=None, help="conv: free rollouts per collection"
    )
    parser.add_argument(
        "--denoise", action="store_true", help="conv: a new model is a flow-matching denoiser"
    )
    parser.add_argument(
        "--width-low", type=int, default=None, help="conv: channels at 8x8 and 4x4 (new model)"
    )
    parser.add_argument(
        "--critic-warmup",
        type=int,
        default=None,
        help="conv: first steps in which only the latent critic learns",
    )
    parser.add_argument(
        "--init-critic",
        default=None,
        help="conv: a critic.pt (written beside a run's weights) to start from",
    )
    parser.add_argument(
        "--image-share",
        type=float,
        default=None,
        help="conv: share of each batch in which a reference image arrives (recolouring)",
    )
    parser.add_argument(
        "--sentence-share",
        type=float,
        default=None,
        help="conv: share of each batch in which a sentence is typed (what it changes)",
    )
    parser.add_argument(
        "--sentence-onset",
        action="store_true",
        default=None,
        help="conv: the sentence windows open on their sentence (every frame it governs)",
    )
    parser.add_argument(
        "--onset-weight",
        type=float,
        default=None,
        help="conv: code cross-entropy weight on frames a sentence governs (1 = plain)",
    )
    parser.add_argument(
        "--onset-frames",
        type=int,
        default=None,
        help="conv: how long after a sentence its frames get --onset-weight",
    )
    parser.add_argument(
        "--codes",
        type=int,
        default=None,
        help="conv: a code model with a codebook of this size (an --init regressor gets heads)",
    )
    parser.add_argument(
        "--residual-codes",
        type=int,
        default=None,
        help="conv: a second, residual code per cell from a codebook of this size (code models)",
    )
    parser.add_argument(
        "--residual-temperature",
        type=float,
        default=None,
        help="code-draws: a residual code model's second-code temperature (0 = likeliest)",
    )
    parser.add_argument(
        "--residual-mean",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="code-draws: the expected residual code vector instead of a drawn code",
    )
    parser.add_argument(
        "--residual-only",
        action="store_true",
        help="conv: train a residual code model's second head alone (the rest frozen)",
    )
    parser.add_argument(
        "--sentence-head",
        type=int,
        default=None,
        help="conv: a second reader of the newest sentence with this many channels (code models)",
    )
    parser.add_argument(
        "--sentence-only",
        action="store_true",
        help="conv: train a code model's sentence head alone (the rest frozen)",
    )
    parser.add_argument(
        "--code-temperature",
        type=float,
        default=None,
        help="conv, code-draws: a code model's draw temperature (0 = likeliest code)",
    )
    parser.add_argument(
        "--code-noise-blur",
        type=float,
        default=None,
        help="code-draws: cells over which a code model's draws share their noise (0 = none)",
    )
    parser.add_argument(
        "--code-noise-memory",
        type=float,
        default=None,
        help="code-draws: frame-to-frame correlation of a code model's draw noise, in [0, 1)",
    )
    parser.add_argument(
        "--code-keep",
        type=float,
        default=None,
        help="code-draws: nats added to the code each cell already shows (0 = none)",
    )
    parser.add_argument(
        "--keep-walking",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="code-draws: the code keep holds while the player walks too (for the walk warp)",
    )
    parser.add_argument(
        "--refine-width",
        type=int,
        default=None,
        help="finetune: add the latent refiner with this many channels",
    )
    parser.add_argument(
        "--heldout",
        default="data/heldout",
        help="audio-study: held-out data set (seeds from 1,000,000)",
    )
    parser.add_argument(
        "--audio-only",
        action="store_true",
        default=None,
        help="finetune: train only the audio projections (new audio tokenizer); "
        "conv: train only the sound head (the picture frozen)",
    )
    parser.add_argument(
        "--audio-history",
        type=int,
        default=None,
        help="conv: past audio latents the sound head reads (an --init model gets the inputs)",
    )
    parser.add_argument(
        "--label-codes",
        action="store_true",
        help="particles: name the weather of each particle code of the --dest weights "
        "(engine/weights) from --data's frames, for the sound head's weather cue",
    )
    parser.add_argument(
        "--sound-cues",
        type=int,
        default=None,
        help="conv: sound cues the sound head reads (2: the footstep rhythm a session keeps "
        "from the keys; an --init model gets the inputs)",
    )
    parser.add_argument(
        "--audio-sample",
        action="store_true",
        default=None,
        help="conv: the sound head predicts a mean and a spread and the sound is drawn",
    )
    parser.add_argument(
        "--audio-drop-share",
        type=float,
        default=None,
        help="conv: share of training windows whose sound history is silenced (zeros)",
    )
    parser.add_argument(
        "--audio-flow-steps",
        type=int,
        default=None,
        help="conv: a flow-matching sound head draws the sound in this many Euler steps",
    )
    parser.add_argument(
        "--audio-weight", type=float, default=None, help="finetune: weight of the audio flow loss"
    )
    args = parser.parse_args(argv)
    from .common import pick_device

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    preset = PRESETS[args.preset]
    overrides = {
        k: v
        for k, v in (("data", args.data), ("out", args.out), ("device", args.device))
        if v is not None
    }

    if args.stage in ("video", "audio"):
        from .tokenizers import train_audio_ae, train_video_ae

        tok_cfg = dataclasses.replace(preset.tokenizers, **overrides)
        if args.minutes is not None:
            key = "minutes" if args.stage == "video" else "audio_minutes"
            tok_cfg = dataclasses.replace(tok_cfg, **{key: args.minutes})
        if args.adv_weight is not None:
            tok_cfg = dataclasses.replace(tok_cfg, adv_weight=args.adv_weight)
        if args.weights is not None:
            tok_cfg = dataclasses.replace(tok_cfg, warm_start=args.weights)
        path = train_video_ae(tok_cfg) if args.stage == "video" else train_audio_ae(tok_cfg)
    elif args.stage == "generator":
        from .generator import train_generator

        if args.tokenizers is not None:
            overrides["tokenizers"] = args.tokenizers
        if args.text_table is not None:
            overrides["text_table"] = args.text_table
        gen_cfg = dataclasses.replace(preset.generator, **overrides)
        if args.minutes is not None:
            gen_cfg = dataclasses.replace(gen_cfg, minutes=args.minutes)
        path = train_generator(gen_cfg)
    elif args.stage == "sampler-steps":
        from .ship import WEIGHTS, set_sampler_steps

        if args.steps is None:
            parser.error("sampler-steps needs --steps N")
        path = set_sampler_steps(args.steps, Path(args.dest) if args.dest else WEIGHTS)
    elif args.stage == "guidance":
        from .ship import WEIGHTS, set_guidance

        path = set_guidance(
            args.text_guidance,
            args.image_guidance,
            Path(args.dest) if args.dest else WEIGHTS,
            args.text_guidance_frames,
        )
    elif args.stage == "code-draws":
        from .ship import WEIGHTS, set_code_draws

        try:
            path = set_code_draws(
                Path(args.dest) if args.dest else WEIGHTS,
                args.code_temperature,
                args.code_noise_blur,
                args.code_noise_memory,
                args.code_keep,
                args.residual_temperature,
                args.residual_mean,
                args.keep_walking,
            )
        except ValueError as err:
            parser.error(str(err))
    elif args.stage == "camera-warp":
        from .ship import WEIGHTS, set_camera_warp

        try:
            path = set_camera_warp(
                not args.off,
                Path(args.dest) if args.dest else WEIGHTS,
                args.whole_cells,
                args.view_memory,
                args.walk,
            )
        except ValueError as err:
            parser.error(str(err))
    elif args.stage == "sentence-snap":
        from .ship import WEIGHTS, set_sentence_snap

        try:
            path = set_sentence_snap(
                Path(args.dest) if args.dest else WEIGHTS,
                not args.off,
                args.snap_floor,
                args.snap_neighbours,
            )
        except ValueError as err:
            parser.error(str(err))
    elif args.stage == "openings":
        from .ship import WEIGHTS, write_openings

        path = write_openings(Path(args.dest) if args.dest is not None else WEIGHTS)
    elif args.stage == "measure":
        from .measure import measure

        result = measure(
            args.weights,
            args.out or "runs/measure",
            args.project,
            episodes=10 if args.episodes is None else args.episodes,
            long_runs=args.long_runs,
            long_frames=args.long_frames,
            text_table=args.text_table,
            around=args.around,
        )
        print(json.dumps(result))
        path = Path(args.out or "runs/measure")
    elif args.stage == "sheets":
        from engine.runtime.session import World

        from .measure import SHEET_PROMPTS, theme_sheets

        path = Path(args.out or "runs/sheets")
        world = World.load(args.weights)
        figures = {}
        for p in theme_sheets(world, path, around=args.around) + theme_sheets(
            world, path, every_s=5, prompts=SHEET_PROMPTS, around=args.around
        ):
            print(p)
            if p.suffix == ".json":
                figures[p.stem] = json.loads(p.read_text())["mean"]
        print(json.dumps(figures))
    elif args.stage in ("finetune", "decoder"):
        from .finetune import DecoderTuneConfig, FinetuneConfig, train_decoder, train_finetune

        fields = {
            "data": args.data,
            "out": args.out,
            "device": args.device,
            "weights": args.weights,
            "steps": args.steps,
            "batch": args.batch,
            "seed": args.seed,
            "minutes": args.minutes,
            "text_table": args.text_table,
        }
        if args.stage == "finetune":
            fields.update(
                error_bank=args.error_bank,
                bank_share=args.bank_share,
                refine_width=args.refine_width,
                audio_only=args.audio_only,
                audio_weight=args.audio_weight,
            )
            path = train_finetune(given_config(FinetuneConfig, fields))
        else:
            fields.update(adv_weight=args.adv_weight)
            path = train_decoder(given_config(DecoderTuneConfig, fields))
    elif args.stage == "conv":
        from engine.model.conv_world import ConvWorldConfig

        from .conv_generator import DENOISER_STEPS, ConvTrainConfig, train_conv

        fields = {
            "data": args.data,
            "out": args.out,
            "device": args.device,
            "weights": args.weights,
            "init": args.init,
            "steps": args.steps,
            "batch": args.batch,
            "unroll": args.unroll,
            "lr": args.lr,
            "model": ConvWorldConfig(
                **{
                    k: v
                    for k, v in {
                        "width": args.width,
                        "width_low": args.width_low,
                        "codes": args.codes,
                        "residual_codes": args.residual_codes,
                        "sentence_head": args.sentence_head,
                        "code_temperature": args.code_temperature,
                        "audio_history": args.audio_history,
                        "audio_sample": args.audio_sample,
                        "audio_flow_steps": args.audio_flow_steps,
                        "sound_cues": args.sound_cues,
                    }.items()
                    if v is not None
                },
                flow=args.flow,
                camera_warp=args.camera_warp,
                denoise=args.denoise,
                sampler_steps=DENOISER_STEPS if args.denoise else 1,
            ),
            "seed": args.seed,
            "minutes": args.minutes,
            "text_table": args.text_table,
            "bank_share": args.bank_share,
            "bank_every": args.bank_every,
            "bank_rollouts": args.bank_rollouts,
            "adv_weight": args.adv_weight,
            "critic_warmup": args.critic_warmup,
            "init_critic": args.init_critic,
            "image_share": args.image_share,
            "sentence_share": args.sentence_share,
            "sentence_onset": args.sentence_onset,
            "onset_weight": args.onset_weight,
            "onset_frames": args.onset_frames,
            "audio_only": args.audio_only,
            "residual_only": args.residual_only,
            "sentence_only": args.sentence_only,
            "audio_drop_share": args.audio_drop_share,
            "threads": args.threads,
        }
        path = train_conv(given_config(ConvTrainConfig, fields))
    elif args.stage == "latents":
        from .finetune import latent_bank

        data_cfg = data_config(args)
        bank, _ = latent_bank(data_cfg, pick_device(args.device or "auto"))
        path = Path(data_cfg.out).parent
        print(f"{len(bank.video)} latent frames")
    elif args.stage == "errorbank":
        from engine.model.world import WorldModel
        from engine.runtime.session import World

        from .errorbank import collect
        from .finetune import latent_bank

        data_cfg = data_config(args)
        loaded = World.load(data_cfg.weights)
        if not isinstance(loaded.model, WorldModel):
            parser.error(
                "errorbank collects the token transformer's histories; the conv model "
                "collects its own while it trains (conv --bank-share)"
            )
        bank, frames = latent_bank(data_cfg, torch.device("cpu"))
        errors = collect(
            loaded.model,
            loaded.video_ae,
            bank,
            frames,
            args.rollouts,
            horizons=tuple(int(h) for h in args.horizons.split(",")),
            keep=args.keep,
            seed=args.seed,
        )
        path = Path(args.error_bank or "runs/errorbank.pt")
        errors.save(path)
        print(json.dumps(errors.summary()))
    elif args.stage == "audio-study":
        from .audio_study import study
        from .latents import load_audio_tokenizer

        folders = (args.weights or "engine/weights").split(",")
        result = study(
            args.data or "data/v2", args.heldout, {f: load_audio_tokenizer(f) for f in folders}
        )
        print(json.dumps(result, indent=1))
        path = Path(args.heldout)
    elif args.stage == "particles" and args.label_codes:
        from .particles import label_particle_codes
        from .ship import WEIGHTS

        dest = Path(args.dest) if args.dest else WEIGHTS
        print(json.dumps(label_particle_codes(dest, args.data or "data/v7")))
        return 0
    elif args.stage == "particles":
        from .particles import ParticlesTrainConfig, train_particles

        given = {
            "data": args.data,
            "out": args.out,
            "text_table": args.text_table,
            "minutes": args.minutes,
            "seed": args.seed,
            "codes": args.codes,
        }
        path = train_particles(given_config(ParticlesTrainConfig, given))
    elif args.stage in ("scene-edit", "palette-edit", "depth"):
        from .depth import DepthTrainConfig, train_depth
        from .palette_edit import PaletteEditTrainConfig, train_palette_edit
        from .scene_edit import SceneEditTrainConfig, train_scene_edit

        stages: dict[str, tuple[type, Callable[[Any], Path]]] = {
            "scene-edit": (SceneEditTrainConfig, train_scene_edit),
            "palette-edit": (PaletteEditTrainConfig, train_palette_edit),
            "depth": (DepthTrainConfig, train_depth),
        }
        config_cls, train = stages[args.stage]
        given = {
            "out": args.out,
            "weights": args.weights,
            "init": args.init,
            "episodes": args.episodes,
            "minutes": args.minutes,
            "seed": args.seed,
        }
        path = train(given_config(config_cls, given))
    elif args.stage == "text-table":
        from .latents import save_text_table

        path = save_text_table(args.text_table or "runs/text_table.npz")
    else:
        from .ship import ship

        path = ship(
            args.out or preset.generator.out, *([Path(args.dest)] if args.dest is not None else [])
        )
    print(path)
    return 0


def given_config(config_cls: type, given: dict):
    """A stage's config from the arguments given on the command line (None: its default)."""
    return config_cls(**{k: v for k, v in given.items() if v is not None})


def data_config(args: argparse.Namespace):
    """The data, weights and cache location that the latents and errorbank stages read."""
    from .finetune import FinetuneConfig

    return FinetuneConfig(
        **{
            k: v
            for k, v in (
                ("data", args.data),
                ("weights", args.weights),
                ("out", args.out),
                ("text_table", args.text_table),
            )
            if v is not None
        }
    )


if __name__ == "__main__":
    sys.exit(main())
