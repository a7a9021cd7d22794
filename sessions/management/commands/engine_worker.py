"""Run an engine worker process (the scaled configuration: needs REDIS_URL)."""

import asyncio
import contextlib
import signal

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from sessions.worker.bootstrap import build_worker, default_worker_name, preload_engine

STOPPED_REASON = (
    "The world engine worker was stopped, so this session was ended. Everything up to now is "
    "recorded."
)


class Command(BaseCommand):
    help = "Serve play sessions from the shared Redis channel layer."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--name", default=default_worker_name())
        parser.add_argument("--capacity", type=int, default=settings.ENGINE_WORKER_CAPACITY)

    def handle(self, *args, **options) -> None:
        if not settings.REDIS_URL:
            raise CommandError(
                "engine_worker needs REDIS_URL: without it the engine runs inside daphne."
            )
        if options["capacity"] < 1:
            raise CommandError("--capacity must be at least 1")
        asyncio.run(self._serve(options["name"], options["capacity"]))

    async def _serve(self, name: str, capacity: int) -> None:
        self.stdout.write(f"Loading the world model for worker {name}...")
        await preload_engine()
        worker = build_worker(name=name, capacity=capacity)
        loop = asyncio.get_running_loop()
        task = asyncio.ensure_future(worker.run())

        async def stop() -> None:  # SIGTERM: end every session cleanly, then exit
            await worker.shutdown(STOPPED_REASON, failed=False)
            task.cancel()

        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, lambda: asyncio.ensure_future(stop()))
        self.stdout.write(self.style.SUCCESS(f"Engine worker {name} ready, capacity {capacity}."))
        with contextlib.suppress(asyncio.CancelledError):
            await task
