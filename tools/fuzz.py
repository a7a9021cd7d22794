"""A fast generator of malformed play messages (mutations of valid ones): floods through live
handlers in the tests and the soak, where Hypothesis's per-example cost is too high."""

import json
import random

VALID = [
    {"type": "input", "keys": ["W", "LEFT"], "yaw": 0.1, "pitch": -0.05, "seq": 7},
    {"type": "input", "keys": 9, "yaw": 0.0, "pitch": 0.0, "seq": 1},
    {"type": "prompt", "text": "make it rain"},
    {"type": "ping", "t": 12.5},
    {"type": "end"},
]
ODD_VALUES = [
    None,
    True,
    -1,
    2**64,
    10**400,
    -(10**400),
    1e308,
    "NaN",
    "",
    "W" * 500,
    [],
    {},
    [[[]]],
    "\u202e\ud7ff",
    0.5000001,
    float("1e-320"),
]


def malformed_messages(count: int, seed: int = 0) -> list[str | bytes]:
    rng = random.Random(seed)
    out: list[str | bytes] = []
    for _ in range(count):
        base = dict(rng.choice(VALID))
        mutation = rng.randrange(7)
        if mutation == 0:  # a field gets an odd value
            base[rng.choice([*base, "type", "keys", "yaw", "seq"])] = rng.choice(ODD_VALUES)
            text = json.dumps(base).replace("Infinity", "1" + "0" * 400)
        elif mutation == 1:  # deep nesting
            depth = rng.randrange(100, 3000)
            text = "[" * depth + "]" * depth
        elif mutation == 2:  # a huge integer literal in a number field
            text = (
                json.dumps(base)[:-1]
                + f', "{rng.choice(["yaw", "pitch", "t"])}": '
                + "9" * rng.randrange(300, 1500)
                + "}"
            )
        elif mutation == 3:  # truncated
            text = json.dumps(base)[: rng.randrange(0, 20)]
        elif mutation == 4:  # flipped bytes
            raw = bytearray(json.dumps(base).encode())
            for _ in range(rng.randrange(1, 5)):
                raw[rng.randrange(len(raw))] = rng.randrange(256)
            out.append(bytes(raw))
            continue
        elif mutation == 5:  # not an object
            text = json.dumps(rng.choice([list(base.values()), "input", 3, None]))
        else:  # too large
            text = json.dumps({**base, "pad": "x" * rng.randrange(2100, 4000)})
        out.append(text)
    return out
