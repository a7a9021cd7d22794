"""CLI: `python -m engine.data generate ...` and `python -m engine.data stats ...`."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from engine.sim.constants import SUPPORTED_RESOLUTIONS
from engine.sim.themes import THEME_NAMES


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m engine.data")
    sub = parser.add_subparsers(dest="command", required=True)
    g = sub.add_parser("generate", help="write sharded episodes (resumable)")
    g.add_argument("--out", type=Path, default=Path("data/sim"))
    g.add_argument("--episodes", type=int, default=300)
    g.add_argument("--frames", type=int, default=200)
    g.add_argument("--resolution", type=int, default=128, choices=SUPPORTED_RESOLUTIONS)
    g.add_argument("--workers", type=int, default=2)
    g.add_argument("--episodes-per-shard", type=int, default=10)
    g.add_argument("--seed", type=int, default=0, help="episode i uses seed SEED + i")
    g.add_argument("--themes", nargs="+", choices=THEME_NAMES, default=None)
    g.add_argument("--prompt-rate", type=float, default=None,
                   help="sentences the agent types per frame (default 1/70: one every 3.5 s)")
    g.add_argument("--image-rate", type=float, default=None,
                   help="share of episodes in which a reference image arrives mid-way "
                        "(default 0.1)")
    g.add_argument("--quiet", action="store_true", help="no progress bar")
    s = sub.add_parser("stats", help="report a dataset's size and label distributions")
    s.add_argument("--root", type=Path, default=Path("data/sim"))
    args = parser.parse_args(argv)

    if args.command == "generate":
        from .generate import GenerateConfig, ManifestMismatch, generate

        config = GenerateConfig(args.episodes, args.frames, args.resolution,
                                args.episodes_per_shard, args.seed,
                                tuple(args.themes) if args.themes else None,
                                **({"prompt_rate": args.prompt_rate}
                                   if args.prompt_rate is not None else {}),
                                **({"image_rate": args.image_rate}
                                   if args.image_rate is not None else {}))
        try:
            result = generate(args.out, config, args.workers, progress=not args.quiet)
        except ManifestMismatch as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        print(json.dumps({**result, "workers": args.workers}))
        return 0

    from .stats import dataset_stats

    print(json.dumps(dataset_stats(args.root), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
