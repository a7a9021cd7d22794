"""CLI: `python -m engine.eval --json [--episodes FILE] [--weights DIR]` (DESIGN.md contract)."""

from __future__ import annotations

import argparse
import json
import math
import sys

import torch


def _clean(value):
    if isinstance(value, float):
        return None if math.isnan(value) or math.isinf(value) else round(value, 4)
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    return value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m engine.eval")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--episodes", default=None, help="JSON list of episode scripts")
    parser.add_argument("--weights", default=None, help="weights folder (engine/weights)")
    parser.add_argument("--fidelity-episodes", type=int, default=10)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)

    from engine.runtime.session import World
    from engine.sim.script import ScriptError, load_scripts

    from .run import evaluate, script_episode

    def log(msg: str) -> None:
        print(msg, file=sys.stderr)

    episodes = None
    if args.episodes:
        try:
            episodes = [script_episode(s) for s in load_scripts(args.episodes)]
        except (ScriptError, OSError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
    world = World.load(args.weights)
    result = _clean(evaluate(world, episodes, args.fidelity_episodes, log=log))
    if args.json:
        print(json.dumps(result))
    else:
        for key, value in result.items():
            print(f"{key:32s} {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
