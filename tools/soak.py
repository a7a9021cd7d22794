"""Soak test: players come and go at random against a local daphne with the embedded engine.

    python -m tools.soak [--players 4] [--seconds 240] [--seed 1] [--json]

N Python players (WebSocket signalling + aiortc, as the page does it) join, play, end, close
tabs, reload, keep two tabs open, walk away after pressing Play, and send malformed inputs,
at random, for `--seconds`; anonymous 20 MB POSTs are mixed in. Then it waits for the
lifecycle to settle and checks: no session is stuck, the site's capacity is back (a new player
is admitted and goes live), every recording decodes, and the server's memory grew by less than
MEMORY_BOUND_MB. It prints one JSON object (exit code 1 if a check failed).

Runs on a throwaway SQLite database with the dev requirements installed; media stays on
127.0.0.1. Default run: about 5-6 minutes including the model load and the settling.
"""

import argparse
import asyncio
import contextlib
import http.client
import json
import logging
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from tools.daphne import REPO, daphne_argv

MEMORY_BOUND_MB = 150  # server RSS growth allowed from the first live session to the end
GRACE_S = 4  # reconnect grace in the soak server (short, so closed tabs free slots fast)
START_TIMEOUT_S = 10  # -> abandoned sessions are swept after 20 s
SCENARIOS = {  # name -> weight
    "play_and_end": 3,
    "close_tab": 2,
    "reload": 2,
    "two_tabs": 1,
    "abandon": 1,
    "bad_inputs": 2,
}


def _server_env(var_dir: Path, capacity: int) -> dict[str, str]:
    return {
        "DJANGO_SETTINGS_MODULE": "worldsite.settings",
        "WORLDSITE_VAR_DIR": str(var_dir),
        "DATABASE_URL": "",
        "REDIS_URL": "",
        "WORLDSITE_ENGINE_EMBEDDED": "1",
        "WORLDSITE_ENGINE_WORKER_CAPACITY": str(capacity),
        "WORLDSITE_ENGINE_CAPACITY": str(capacity),
        "WORLDSITE_ENGINE_RECONNECT_GRACE": str(GRACE_S),
        "WORLDSITE_ENGINE_START_TIMEOUT": str(START_TIMEOUT_S),
        "WORLDSITE_ENGINE_IDLE_TIMEOUT": "30",
        "WORLDSITE_QUOTA_PLAY_SECONDS_PER_DAY": "100000",
        "WORLDSITE_QUOTA_MAX_SESSION_SECONDS": "60",
        "WORLDSITE_WEBRTC_LOOPBACK_ONLY": "1",
        "WORLDSITE_WORLD_MEDIA_AUTO": "0",
        "PYTHONUNBUFFERED": "1",
    }


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


class Soak:
    def __init__(self, players: int, seconds: float, seed: int, var_dir: Path) -> None:
        self.players, self.seconds = players, seconds
        self.rng = random.Random(seed)
        self.var_dir = var_dir
        self.host = ""
        self.server: subprocess.Popen | None = None
        self.counts: Counter = Counter()
        self.errors: Counter = Counter()
        self.users: list = []
        self.rss_first_live: float | None = None
        self.rss_peak = 0.0
        self.rss_samples: list[tuple[float, float]] = []  # (seconds into the run, MB)
        self.live_fps: list[float] = []

    # -- setup --------------------------------------------------------------------------------
    def prepare(self) -> None:
        import django

        os.environ.update(_server_env(self.var_dir, capacity=2))
        django.setup()
        from django.contrib.auth import get_user_model
        from django.core.management import call_command

        from gallery.models import World
        from sessions.worker.loopback import enable_loopback_candidates

        call_command("migrate", verbosity=0)
        call_command("collectstatic", "--noinput", verbosity=0)
        self.world, _ = World.objects.update_or_create(
            slug="soak",
            defaults={"title": "Soak", "theme": "misty_coast", "seed": 5, "is_published": True},
        )
        user_model = get_user_model()
        user_model.objects.bulk_create(
            [user_model(username=f"soak{i}", password="!") for i in range(400)]
        )
        self.users = list(user_model.objects.filter(username__startswith="soak"))
        self.rng.shuffle(self.users)
        enable_loopback_candidates(only=True)  # this process's aiortc players, too
        logging.getLogger().setLevel(logging.WARNING)  # ICE chatter of dozens of players

    def start_server(self) -> None:
        port = _free_port()
        log = (self.var_dir / "daphne.log").open("w")
        self.server = subprocess.Popen(
            daphne_argv(port),
            cwd=REPO,
            env={**os.environ},
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            with socket.socket() as sock:
                if sock.connect_ex(("127.0.0.1", port)) == 0:
                    self.host = f"127.0.0.1:{port}"
                    return
            time.sleep(0.2)
        raise RuntimeError("daphne did not start")

    # -- players ------------------------------------------------------------------------------
    async def _reserve(self):
        from sessions import services

        user = self.users.pop()
        reservation = await asyncio.to_thread(services.session_reserve, user=user, world=self.world)
        self.counts[f"reserve_{reservation.decision}"] += 1
        if reservation.session is None:
            return None, None
        cookie = await asyncio.to_thread(_login_cookie, user)
        return str(reservation.session.pk), cookie

    def _client(self, session_id: str, cookie: str):
        from tools.player import PlayClient

        return PlayClient(self.host, session_id, cookie, keep_frames=False)

    async def _until_live(self, player, timeout: float = 150) -> bool:
        live = asyncio.ensure_future(player.live.wait())
        final = asyncio.ensure_future(player.final.wait())
        done, pending = await asyncio.wait(
            {live, final}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED
        )
        for task in pending:
            task.cancel()
        if live in done:
            if self.rss_first_live is None:
                self.rss_first_live = _rss_mb(self.server.pid)
            return True
        self.counts["never_live"] += 1
        return False

    async def _play(self, player, seconds: float) -> None:
        start, frames = time.monotonic(), player.frame_count
        keys = self.rng.choice([[], ["W"], ["A"], ["W", "D"], ["S"]])
        await player.hold_for(keys, seconds, yaw=self.rng.uniform(-0.05, 0.05))
        self.live_fps.append((player.frame_count - frames) / (time.monotonic() - start))

    async def _end(self, player) -> None:
        with contextlib.suppress(Exception):
            await player.send({"type": "end"})
            await asyncio.wait_for(player.final.wait(), 20)

    async def _play_once(self, seconds: tuple[float, float], *, end: bool) -> None:
        """Reserve, connect, play for a random time, then end or just close the page."""
        session_id, cookie = await self._reserve()
        if session_id is None:
            return
        player = self._client(session_id, cookie)
        try:
            await player.connect()
            if await self._until_live(player):
                await self._play(player, self.rng.uniform(*seconds))
                if end:
                    await self._end(player)
        finally:
            await player.close()

    async def play_and_end(self) -> None:
        await self._play_once((3, 8), end=True)

    async def close_tab(self) -> None:
        # no "end": the worker ends it after the grace period
        await self._play_once((2, 5), end=False)

    async def reload(self) -> None:
        session_id, cookie = await self._reserve()
        if session_id is None:
            return
        first = self._client(session_id, cookie)
        try:
            await first.connect()
            live = await self._until_live(first)
            if live:
                await self._play(first, 2)
        finally:
            await first.close()
        if not live:
            return
        await asyncio.sleep(self.rng.uniform(0.2, 1.5))
        second = self._client(session_id, cookie)
        try:
            await second.connect()
            await self._wait_frames(second, "reload")
            await self._end(second)
        finally:
            await second.close()

    async def _wait_frames(self, player, what: str, frames: int = 20, timeout: float = 30) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and player.frame_count < frames:
            await asyncio.sleep(0.2)
        ok = player.frame_count >= frames
        self.counts[f"{what}_{'streams' if ok else 'no_video'}"] += 1
        return ok

    async def two_tabs(self) -> None:
        session_id, cookie = await self._reserve()
        if session_id is None:
            return
        old, new = self._client(session_id, cookie), self._client(session_id, cookie)
        try:
            await old.connect()
            if not await self._until_live(old):
                return
            await new.connect()
            await self._wait_frames(new, "second_tab")
            await old.close()  # the stale tab goes away; the new one must play on
            before = new.frame_count
            await new.hold_for(["W"], GRACE_S + 3)
            ok = new.frame_count - before > 10 * (GRACE_S + 3) and not new.final.is_set()
            self.counts[f"stale_tab_{'harmless' if ok else 'ended_the_new_one'}"] += 1
            await self._end(new)
        finally:
            await old.close()
            await new.close()

    async def abandon(self) -> None:
        await self._reserve()  # Play pressed, then the tab closed before it ever connected

    async def bad_inputs(self) -> None:
        from tools.fuzz import malformed_messages

        session_id, cookie = await self._reserve()
        if session_id is None:
            return
        player = self._client(session_id, cookie)
        try:
            await player.connect()
            if not await self._until_live(player):
                return
            for index, raw in enumerate(malformed_messages(400, seed=self.rng.randrange(10**6))):
                player.input.send(raw if isinstance(raw, str) else raw.decode("latin-1"))
                if index % 40 == 0:
                    await asyncio.sleep(0.05)
            for _ in range(5):
                await player.ws.send("[" * 20_000 + "]" * 20_000)
            self.counts["bad_messages_sent"] += 405
            await asyncio.sleep(1.0)
            before = player.frame_count
            await player.hold_for(["D"], 2.0)
            ok = player.frame_count - before >= 20
            self.counts[f"after_bad_inputs_{'streams' if ok else 'no_video'}"] += 1
            await self._end(player)
        finally:
            await player.close()

    async def _player_loop(self, deadline: float) -> None:
        names, weights = zip(*SCENARIOS.items(), strict=True)
        while time.monotonic() < deadline and len(self.users) > 10:
            name = self.rng.choices(names, weights)[0]
            self.counts[f"scenario_{name}"] += 1
            try:
                await asyncio.wait_for(getattr(self, name)(), 240)
            except Exception as exc:  # a client-side failure is counted, and the soak goes on
                self.errors[f"{name}: {type(exc).__name__}: {str(exc)[:80]}"] += 1
            self.rss_peak = max(self.rss_peak, _rss_mb(self.server.pid))
            await asyncio.sleep(self.rng.uniform(0, 2))

    async def _sample_memory(self, deadline: float, started: float) -> None:
        while time.monotonic() < deadline:
            self.rss_samples.append((time.monotonic() - started, _rss_mb(self.server.pid)))
            await asyncio.sleep(5)

    async def _big_posts(self, deadline: float) -> None:
        while time.monotonic() < deadline:
            await asyncio.sleep(self.rng.uniform(10, 25))
            status = await asyncio.to_thread(_post, self.host, 20 * 1024 * 1024)
            self.counts[f"big_post_{status}"] += 1

    # -- checks -------------------------------------------------------------------------------
    async def settle(self, timeout: float) -> int:
        from sessions.models import PlaySession

        deadline = time.monotonic() + timeout
        while True:
            active = await asyncio.to_thread(
                PlaySession.objects.filter(state__in=PlaySession.ACTIVE_STATES).count
            )
            if active == 0 or time.monotonic() > deadline:
                return active
            await asyncio.sleep(1.0)

    async def capacity_back(self) -> bool:
        """Fill every slot again: each new player is admitted at once and goes live."""
        from sessions import selectors, services

        clients = []
        try:
            for _ in range(2):
                user = self.users.pop()
                reservation = await asyncio.to_thread(
                    services.session_reserve, user=user, world=self.world
                )
                if reservation.decision != services.Decision.ADMIT:
                    return False
                cookie = await asyncio.to_thread(_login_cookie, user)
                player = self._client(str(reservation.session.pk), cookie)
                clients.append(player)
                await player.connect()
            lived = await asyncio.gather(*(self._until_live(p, 90) for p in clients))
            running = await asyncio.to_thread(selectors.running_session_count)
            return all(lived) and running == 2
        finally:
            for player in clients:
                await self._end(player)
                await player.close()

    def recordings(self) -> dict:
        from worldsite.engine_gateway.recording import (
            RecordingError,
            decode_recording,
            open_recording,
        )

        checked, bad = 0, []
        for folder in sorted((self.var_dir / "recordings").glob("*")):
            checked += 1
            try:
                recording = open_recording(folder)
                frames, _ = decode_recording(recording)
                if len(frames) != recording.meta.get("frames") or not recording.meta.get(
                    "end_reason"
                ):
                    bad.append(folder.name)
            except RecordingError:
                bad.append(folder.name)
        return {"checked": checked, "unreadable": bad}

    async def run(self) -> dict:
        started = time.monotonic()
        deadline = started + self.seconds
        tasks = [asyncio.ensure_future(self._player_loop(deadline)) for _ in range(self.players)]
        tasks.append(asyncio.ensure_future(self._big_posts(deadline)))
        tasks.append(asyncio.ensure_future(self._sample_memory(deadline, started)))
        await asyncio.gather(*tasks)
        played = time.monotonic() - started
        stuck = await self.settle(timeout=GRACE_S + 2 * START_TIMEOUT_S + 45)
        capacity = await self.capacity_back() if stuck == 0 else False
        await self.settle(timeout=30)
        rss_end = _rss_mb(self.server.pid)
        from sessions.models import PlaySession

        reasons = Counter(
            await asyncio.to_thread(
                lambda: list(PlaySession.objects.values_list("end_reason", flat=True))
            )
        )
        signalled = time.monotonic()
        self.server.send_signal(signal.SIGTERM)
        exit_code = await asyncio.to_thread(self.server.wait, 30)
        recordings = await asyncio.to_thread(self.recordings)
        growth = rss_end - (self.rss_first_live or rss_end)
        # Steady state: from a quarter into the run (every slot and code path warmed up) on.
        warm = [mb for t, mb in self.rss_samples if t >= played / 4] or [rss_end]
        steady_growth = rss_end - warm[0]
        fps = sorted(self.live_fps)
        result = {
            "players": self.players,
            "seconds_played": round(played, 1),
            "sessions": sum(reasons.values()),
            "end_reasons": dict(reasons.most_common()),
            "events": dict(sorted(self.counts.items())),
            "client_errors": dict(self.errors),
            "stuck_sessions": stuck,
            "capacity_back": capacity,
            "recordings_checked": recordings["checked"],
            "recordings_unreadable": recordings["unreadable"],
            "live_fps_median": round(fps[len(fps) // 2], 1) if fps else None,
            "live_fps_p10": round(fps[len(fps) // 10], 1) if fps else None,
            "server_rss_mb_first_live": round(self.rss_first_live or 0, 1),
            "server_rss_mb_end": round(rss_end, 1),
            "server_rss_mb_peak": round(max(self.rss_peak, rss_end), 1),
            "server_rss_growth_mb": round(growth, 1),
            "server_rss_growth_after_warmup_mb": round(steady_growth, 1),
            "server_rss_mb_every_5s": [round(mb) for _, mb in self.rss_samples],
            "memory_bound_mb": MEMORY_BOUND_MB,
            "sigterm_exit_s": round(time.monotonic() - signalled, 1),
            "sigterm_exit_code": exit_code,
        }
        result["ok"] = bool(
            stuck == 0
            and capacity
            and not recordings["unreadable"]
            and growth <= MEMORY_BOUND_MB
            and exit_code == 0
            and not any("no_video" in key or "ended_the_new_one" in key for key in self.counts)
        )
        return result


def _login_cookie(user) -> str:
    from django.test import Client

    client = Client()
    client.force_login(user)
    return client.cookies["sessionid"].value


def _post(host: str, size: int) -> int:
    name, port = host.split(":")
    connection = http.client.HTTPConnection(name, int(port), timeout=60)
    try:
        connection.request(
            "POST",
            "/beta/apply/",
            body=b"a=1&" * (size // 4),
            headers={"Content-Type": "application/x-www-form-urlencoded"},
        )
        return connection.getresponse().status
    except OSError:
        return 0
    finally:
        connection.close()


def run(players: int = 4, seconds: float = 240, seed: int = 1) -> dict:
    with tempfile.TemporaryDirectory(prefix="worldsite-soak-") as tmp:
        soak = Soak(players, seconds, seed, Path(tmp))
        soak.prepare()
        soak.start_server()
        try:
            return asyncio.run(soak.run())
        finally:
            if soak.server.poll() is None:
                soak.server.kill()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--players", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=240)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", action="store_true", help="print only the JSON object")
    args = parser.parse_args()
    result = run(args.players, args.seconds, args.seed)
    if args.json:
        print(json.dumps(result))
    else:
        print(json.dumps(result, indent=1))
    sys.exit(0 if result["ok"] else 1)


if __name__ == "__main__":
    main()
