"""The embedded default: one engine worker inside the daphne process, started on first use."""

import asyncio
import logging

from sessions.worker.bootstrap import build_worker, preload_engine

logger = logging.getLogger(__name__)
_task: asyncio.Task | None = None
_ready = False


def ensure_embedded_worker() -> None:
    """Start the in-process worker on the running loop unless it is already running."""
    global _task
    if _task is not None and not _task.done():
        return
    _task = asyncio.ensure_future(_run())


def embedded_worker_loading() -> bool:
    """True while the in-process worker is still loading the model (seconds on first use)."""
    return _task is not None and not _task.done() and not _ready


async def _run() -> None:
    global _ready
    try:
        await preload_engine()
        _ready = True
        await build_worker(name="embedded").run()
    except asyncio.CancelledError:
        raise
    except Exception:
        logger.exception("the embedded engine worker stopped")
    finally:
        _ready = False
