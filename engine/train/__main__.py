"""CLI: `python -m engine.train {tokenizers,generator,ship} --preset {cpu,gpu} [--minutes M]`.

Every stage resumes from its checkpoint under --out when re-run with the same arguments.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys

import torch

from .presets import PRESETS


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m engine.train")
    parser.add_argument("stage", choices=("video", "audio", "generator", "ship"))
    parser.add_argument("--preset", choices=sorted(PRESETS), default="cpu")
    parser.add_argument("--data", default=None, help="dataset root (python -m engine.data)")
    parser.add_argument("--out", default=None, help="run folder (checkpoints, plots)")
    parser.add_argument("--tokenizers", default=None, help="folder with the tokenizer files")
    parser.add_argument("--minutes", type=float, default=None, help="wall-clock budget")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    preset = PRESETS[args.preset]
    overrides = {k: v for k, v in (("data", args.data), ("out", args.out)) if v is not None}

    if args.stage in ("video", "audio"):
        from .tokenizers import train_audio_ae, train_video_ae

        cfg = dataclasses.replace(preset.tokenizers, **overrides)
        if args.minutes is not None:
            key = "minutes" if args.stage == "video" else "audio_minutes"
            cfg = dataclasses.replace(cfg, **{key: args.minutes})
        path = train_video_ae(cfg) if args.stage == "video" else train_audio_ae(cfg)
    elif args.stage == "generator":
        from .generator import train_generator

        if args.tokenizers is not None:
            overrides["tokenizers"] = args.tokenizers
        cfg = dataclasses.replace(preset.generator, **overrides)
        if args.minutes is not None:
            cfg = dataclasses.replace(cfg, minutes=args.minutes)
        path = train_generator(cfg)
    else:
        from .ship import ship

        path = ship(args.out or preset.generator.out)
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
