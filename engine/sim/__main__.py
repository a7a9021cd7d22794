"""CLI: `python -m engine.sim bench --json` and `python -m engine.sim render ...`."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from .constants import SUPPORTED_RESOLUTIONS
from .themes import THEME_NAMES


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m engine.sim")
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("bench", help="measure single-threaded step() frames/s")
    b.add_argument("--json", action="store_true", help="print one JSON object")
    b.add_argument("--resolution", type=int, default=128, choices=SUPPORTED_RESOLUTIONS)
    b.add_argument("--frames", type=int, default=400)
    b.add_argument("--repeats", type=int, default=5)
    r = sub.add_parser("render", help="write an MP4 (with audio) and a contact sheet")
    r.add_argument("--seed", type=int, default=0)
    r.add_argument("--frames", type=int, default=400)
    r.add_argument("--out", type=Path, default=Path("artifacts/sim"))
    r.add_argument("--theme", default="ember_forest", choices=THEME_NAMES)
    r.add_argument("--script", type=Path, help="episode script JSON (default: showcase tour)")
    r.add_argument("--resolution", type=int, default=None, choices=SUPPORTED_RESOLUTIONS)
    r.add_argument("--scale", type=int, default=2, help="MP4 upscale factor")
    args = parser.parse_args(argv)

    if args.command == "bench":
        from .bench import bench

        result = bench(args.resolution, args.frames, args.repeats)
        if args.json:
            print(json.dumps(result))
        else:
            print(
                f"{result['fps']} frames/s at {result['resolution']}x{result['resolution']}"
                f" (runs: {result['fps_runs']})"
            )
        return 0

    from .script import ScriptError, load_script, run_script
    from .showcase import showcase_script
    from .video import contact_sheet, save_png, write_mp4

    try:
        script = (
            load_script(args.script)
            if args.script
            else showcase_script(args.seed, args.theme, args.frames)
        )
    except ScriptError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    frames, audio = [], []
    for frame in run_script(script, args.resolution):
        frames.append(frame.rgb)
        audio.append(frame.audio)
    video, sound = np.stack(frames), np.stack(audio)
    name = f"{script.theme}_seed{script.seed}"
    write_mp4(args.out / f"{name}.mp4", video, sound, scale=args.scale)
    save_png(args.out / f"{name}_sheet.png", contact_sheet(video, count=16, columns=4))
    print(
        json.dumps(
            {
                "mp4": str(args.out / f"{name}.mp4"),
                "contact_sheet": str(args.out / f"{name}_sheet.png"),
                "frames": len(frames),
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
