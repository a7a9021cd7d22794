"""`python -m engine.play --world THEME --out DIR`: a scripted session, model next to simulator.

Writes model.mp4 (what the runtime generates, with its audio), sim.mp4 (the simulator under
the same inputs), side_by_side.mp4 (sim left, model right, model audio) and contact.png
(sim row above model row). The model plays the simulator's episode through the eval's player
(the runtime API). By default it starts from the simulator's first frames (--prime) so the two
are comparable; --no-prime starts as the product does, from the theme's opening keyframes.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import torch

from engine.eval.episodes import PRIME_FRAMES, ModelPlayer, SimEpisode
from engine.runtime import World
from engine.sim import FrameInputs, WorldSpec
from engine.sim.constants import KEY_BITS
from engine.sim.themes import THEME_NAMES
from engine.sim.video import contact_sheet, save_png, write_mp4

# (frame, event) pairs: walk, look around, three sentences, walk on.
DEMO_SCRIPT: list[tuple[int, dict]] = [
    (0, {"kind": "action", "keys": ["W"]}),
    (30, {"kind": "action", "keys": ["W", "LEFT"]}),
    (50, {"kind": "action", "keys": []}),
    (55, {"kind": "prompt", "text": "make it rain"}),
    (90, {"kind": "action", "keys": ["RIGHT"]}),
    (110, {"kind": "action", "keys": ["W"]}),
    (130, {"kind": "prompt", "text": "cast fire magic"}),
    (170, {"kind": "prompt", "text": "make it night"}),
    (200, {"kind": "action", "keys": ["W", "RIGHT"]}),
]


def sim_inputs(frames: int, offset: int) -> list[FrameInputs]:
    by_t: dict[int, list[dict]] = {}
    for t, ev in DEMO_SCRIPT:
        by_t.setdefault(t + offset, []).append(ev)
    out, held = [], 0
    for t in range(frames):
        inp = FrameInputs()
        for ev in by_t.get(t, ()):
            if ev["kind"] == "action":
                held = sum(KEY_BITS[k] for k in ev["keys"])
            else:
                inp.prompts = (*inp.prompts, ev["text"])
        inp.keys = held
        out.append(inp)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m engine.play")
    parser.add_argument("--world", choices=THEME_NAMES, default=THEME_NAMES[0])
    parser.add_argument("--seed", type=int, default=1_000_123)
    parser.add_argument("--frames", type=int, default=240)
    parser.add_argument("--out", type=Path, default=Path("artifacts/play"))
    parser.add_argument("--weights", default=None)
    parser.add_argument("--no-prime", dest="prime", action="store_false")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args(argv)

    world = World.load(args.weights, threads=args.threads)
    context = PRIME_FRAMES if args.prime else 0
    total = context + args.frames
    ep = SimEpisode(WorldSpec(args.seed, args.world), sim_inputs(total, context)).simulate()
    player = ModelPlayer(world)
    session = player.start(ep, context) if context else player.open(ep)
    with torch.inference_mode():
        model_frames, wave = player.play(session, ep, context, total)
    model_audio = wave.reshape(args.frames, -1)
    truth, truth_audio = ep.frames[context:], ep.audio[context:]

    args.out.mkdir(parents=True, exist_ok=True)
    write_mp4(args.out / "model.mp4", model_frames, model_audio)
    write_mp4(args.out / "sim.mp4", truth, truth_audio)
    write_mp4(
        args.out / "side_by_side.mp4", np.concatenate([truth, model_frames], axis=2), model_audio
    )
    idx = [int(i) for i in np.linspace(0, args.frames - 1, 8)]
    sheet = np.concatenate(
        [
            contact_sheet(truth, indices=idx, columns=8),
            contact_sheet(model_frames, indices=idx, columns=8),
        ],
        axis=0,
    )
    save_png(args.out / "contact.png", sheet)
    print(
        json.dumps(
            {
                "out": str(args.out),
                "frames": args.frames,
                "theme": args.world,
                "primed_frames": context,
                "files": ["model.mp4", "sim.mp4", "side_by_side.mp4", "contact.png"],
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
