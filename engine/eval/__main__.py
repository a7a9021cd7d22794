"""CLI (DESIGN.md contract):

    python -m engine.eval --json [--episodes FILE] [--prompts FILE] [--reference] [--weights DIR]
    python -m engine.eval --json --text-reading [--weights DIR]   # judge-free, a few minutes
    python -m engine.eval --build-judges      # (re)build the judges' data set and judges

Progress goes to stderr; the JSON object (or a table) to stdout.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import numpy as np
import torch


def _clean(value):
    if isinstance(value, float):
        return None if math.isnan(value) or math.isinf(value) else round(value, 4)
    if isinstance(value, np.floating | np.integer | np.bool_):
        return _clean(value.item())
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(v) for v in value]
    return value


def load_prompt_cases(path: str):
    """A JSON list of {"event": <event name>, "text": <any sentence>}; errors name the item."""
    from .protocols import JUDGEABLE_EVENTS, PromptCase

    items = json.loads(Path(path).read_text())
    if not isinstance(items, list) or not items:
        raise ValueError("--prompts: expected a non-empty JSON list of {event, text}")
    cases = []
    for i, item in enumerate(items):
        if not isinstance(item, dict) or set(item) != {"event", "text"}:
            raise ValueError(f"--prompts[{i}]: expected exactly the keys 'event' and 'text'")
        if item["event"] not in JUDGEABLE_EVENTS:
            raise ValueError(
                f"--prompts[{i}].event: {item['event']!r} is not one of "
                f"{', '.join(JUDGEABLE_EVENTS)}"
            )
        if not isinstance(item["text"], str) or not item["text"].strip():
            raise ValueError(f"--prompts[{i}].text: expected a non-empty sentence")
        cases.append(PromptCase(item["event"], item["text"]))
    return cases


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m engine.eval")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--episodes", default=None, help="JSON list of episode scripts")
    parser.add_argument(
        "--prompts",
        default=None,
        help='JSON list of {"event", "text"}: run only the prompt test, on exactly these cases',
    )
    parser.add_argument(
        "--reference",
        action="store_true",
        help="run only the reference-image test (no judges needed; about a minute)",
    )
    parser.add_argument(
        "--text-reading",
        action="store_true",
        help="run only the text-reading figure (no judges needed; a few minutes)",
    )
    parser.add_argument("--weights", default=None, help="weights folder (engine/weights)")
    parser.add_argument(
        "--build-judges",
        action="store_true",
        help="rebuild the judges' data set and judges, print their accuracy",
    )
    parser.add_argument("--fidelity-episodes", type=int, default=16)
    parser.add_argument("--gifts", type=int, default=10, help="gift cases per gift kind")
    parser.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch threads (1: next to other jobs on two cores, 2 threads "
        "ran the eval several times slower)",
    )
    parser.add_argument(
        "--partial",
        default=None,
        help="write the figures measured so far to this file after each part",
    )
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)

    def log(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    if args.build_judges:
        import shutil

        from .classifiers import cached_judges
        from .judge_data import JUDGE_DATA_VERSION
        from .run import CACHE, Progress

        shutil.rmtree(CACHE / f"judge_data_v{JUDGE_DATA_VERSION}", ignore_errors=True)
        judges = cached_judges(CACHE, Progress(log), rebuild=True)
        print(json.dumps(_clean(judges.accuracy)))
        return 0

    from engine.runtime.session import World
    from engine.sim.script import ScriptError, load_scripts

    from .episodes import script_episode
    from .run import evaluate, evaluate_prompts, evaluate_reference
    from .text_reading import reads_text, text_reading

    episodes = cases = None
    try:
        if args.episodes:
            episodes = [script_episode(s) for s in load_scripts(args.episodes)]
        if args.prompts:
            cases = load_prompt_cases(args.prompts)
    except (ScriptError, OSError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    world = World.load(args.weights)
    if args.text_reading and not reads_text(world):
        print("error: --text-reading needs a code model's weights", file=sys.stderr)
        return 2
    if args.text_reading:
        result = _clean(text_reading(world, log))
    elif args.reference:
        result = _clean(evaluate_reference(world, log=log))
    elif cases is not None:
        result = _clean(evaluate_prompts(world, cases, log=log))
    else:

        def keep(so_far: dict) -> None:
            if args.partial:
                Path(args.partial).write_text(json.dumps(_clean(so_far)))

        result = _clean(
            evaluate(
                world,
                episodes,
                args.fidelity_episodes,
                gifts_per_kind=args.gifts,
                log=log,
                on_section=keep,
            )
        )
    if args.json:
        print(json.dumps(result))
    else:
        for key, value in result.items():
            print(f"{key:40s} {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
