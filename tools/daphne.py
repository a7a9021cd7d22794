"""How the tools start the site: one daphne command line, served from the repository root."""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def daphne_argv(port: int, host: str = "127.0.0.1") -> list[str]:
    """The command that serves the ASGI app on host:port with this interpreter."""
    return [
        sys.executable,
        "-m",
        "daphne",
        "-b",
        host,
        "-p",
        str(port),
        "worldsite.asgi:application",
    ]
