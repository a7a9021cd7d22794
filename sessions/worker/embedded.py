"""The embedded default: one engine worker inside the daphne process, started on first use."""

import asyncio
import logging

from sessions.worker.bootstrap import build_worker, preload_engine
from sessions.worker.engine_worker import EngineWorker

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


SHUTDOWN_REASON = (
    "The server is restarting, so this session was ended. Everything up to now is recorded."
)
SHUTDOWN_GRACE_S = 8.0


def _end_sessions_before_the_server_stops(worker: EngineWorker) -> None:
    """On SIGTERM daphne stops Twisted's reactor: first end every session (players told,
    recordings closed, rows finished), within SHUTDOWN_GRACE_S, while the sockets still work."""
    from twisted.internet import defer, reactor

    def before_shutdown():
        # (daphne's own trigger cancels the page consumers at the same moment: the worker
        # tells each player over the data channel instead.)
        ending = asyncio.wait_for(worker.shutdown(SHUTDOWN_REASON, failed=False), SHUTDOWN_GRACE_S)
        return defer.Deferred.fromFuture(asyncio.ensure_future(ending))

    if getattr(reactor, "running", False):
        # (twisted's interface stub lists `self` as a parameter, shifting every argument by one)
        reactor.addSystemEventTrigger("before", "shutdown", before_shutdown)  # type: ignore[arg-type]


async def _run() -> None:
    global _ready
    try:
        await preload_engine()
        _ready = True
        worker = build_worker(name="embedded")
        _end_sessions_before_the_server_stops(worker)
        await worker.run()
    except asyncio.CancelledError:
        raise
    except Exception:
        logger.exception("the embedded engine worker stopped")
    finally:
        _ready = False
