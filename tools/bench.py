"""Play-session benchmark: N headless Chromium players against a local server; prints JSON.

    python -m tools.bench [--sessions 1] [--seconds 20] [--json]
    python -m tools.bench --spectators 8 [--seconds 20] [--json]
    python -m tools.bench --prompt-every 2 [--seconds 20] [--json]

With --spectators N, one player opens a listed live room and N spectators' pages watch it on
the same engine worker: the bench first measures the player alone for --seconds, then with the
N spectators for --seconds, and reports the spectators' decoded fps, the player's
input-to-frame latency in both phases, and the server's CPU with and without the audience.

Everything runs on a throwaway SQLite database inside a private network namespace (root and
iproute2 needed, as for the WebRTC tests). The engine stamps each frame with the sequence number
of the last input it applied (WORLDSITE_BENCH_STAMP); the page reads the stamp back from every
decoded frame, so input-to-frame latency is measured from the key press in the page to the
first decoded frame that reflects it. Reported: decoded fps per session, latency p50/p95, and
CPU use of the machine and of the server process.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from tools.daphne import REPO, daphne_argv

PASSWORD = "bench-Pass-phrase-1"

# Reads the 16-block stamp from each decoded frame and matches it against key presses.
BENCH_PAGE_PROBE = """() => {
  const bench = { presses: [], latencies: [], frames: 0, lastSeq: 0, gaps: [], lastAt: null };
  window.bench = bench;
  const video = document.getElementById("stream");
  const canvas = document.createElement("canvas");
  const g = canvas.getContext("2d", { willReadFrequently: true });
  const note = (e) => {
    if (e.code !== "KeyW" || e.repeat) return;
    bench.presses.push({ t: performance.now(), seq: window.worldsite.seq + 1 });
  };
  document.addEventListener("keydown", note, true);
  document.addEventListener("keyup", note, true);
  const onFrame = (now) => {
    const w = video.videoWidth, h = video.videoHeight;
    if (w && h) {
      canvas.width = w; canvas.height = h;
      g.drawImage(video, 0, 0, w, h);
      const block = w / 16, row = Math.max(1, Math.floor(h / 32));
      const data = g.getImageData(0, row, w, 1).data;
      let seq = 0;
      for (let bit = 0; bit < 16; bit++) {
        const x = Math.floor(bit * block + block / 2) * 4;
        if ((data[x] + data[x + 1] + data[x + 2]) / 3 > 128) seq |= 1 << bit;
      }
      bench.frames += 1;
      if (bench.lastAt !== null) bench.gaps.push(now - bench.lastAt);
      bench.lastAt = now;
      bench.lastSeq = seq;
      while (bench.presses.length && bench.presses[0].seq <= seq) {
        bench.latencies.push(now - bench.presses.shift().t);
      }
    }
    video.requestVideoFrameCallback(onFrame);
  };
  video.requestVideoFrameCallback(onFrame);
}"""


# Counts the frames a spectator's page presents (the room page's <video>).
VIEWER_PAGE_PROBE = """() => {
  const bench = { frames: 0 };
  window.viewerBench = bench;
  const video = document.getElementById("stream");
  const onFrame = () => { bench.frames += 1; video.requestVideoFrameCallback(onFrame); };
  video.requestVideoFrameCallback(onFrame);
}"""


def _cpu_totals() -> tuple[int, int]:
    fields = [int(v) for v in Path("/proc/stat").read_text().split("\n")[0].split()[1:]]
    idle = fields[3] + fields[4]
    return sum(fields), idle


def _process_cpu_seconds(pid: int) -> float:
    stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = int(stat[11]) + int(stat[12])  # utime + stime
    return ticks / os.sysconf("SC_CLK_TCK")


def _browser_cpu_seconds() -> float:
    """CPU time of every Chromium process (the players' and spectators' pages)."""
    total = 0.0
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if b"chromium" not in (proc / "cmdline").read_bytes():
                continue
            total += _process_cpu_seconds(int(proc.name))
        except (OSError, ValueError):  # the process ended meanwhile
            continue
    return total


def _prepare_database(var_dir: Path, sessions: int, spectators: int = 0) -> list[str]:
    """A fresh database with the bench world, its players, and the spectators (with API keys,
    for spectators on the viewer WHEP URL)."""
    os.environ.update(_server_env(var_dir, sessions))
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    from gallery.models import World

    call_command("migrate", verbosity=0)
    call_command("collectstatic", "--noinput", verbosity=0)
    World.objects.update_or_create(
        slug="bench",
        defaults={"title": "Bench", "theme": "misty_coast", "seed": 5, "is_published": True},
    )
    for index in range(sessions):
        get_user_model().objects.create_user(f"bench{index}", password=PASSWORD)
    from accounts.services import api_key_create

    keys = []
    for index in range(spectators):
        viewer = get_user_model().objects.create_user(f"viewer{index}", password=PASSWORD)
        keys.append(api_key_create(owner=viewer, name="bench")[1])
    return keys


def _server_env(var_dir: Path, sessions: int) -> dict[str, str]:
    return {
        "DJANGO_SETTINGS_MODULE": "worldsite.settings",
        "WORLDSITE_VAR_DIR": str(var_dir),
        "DATABASE_URL": "",
        "REDIS_URL": "",
        "WORLDSITE_ENGINE_EMBEDDED": "1",
        "WORLDSITE_BENCH_STAMP": "1",
        "WORLDSITE_WEBRTC_LOOPBACK_ONLY": "1",
        "WORLDSITE_ENGINE_CAPACITY": str(sessions),
        "WORLDSITE_ENGINE_WORKER_CAPACITY": str(sessions),
        "WORLDSITE_QUOTA_CONCURRENT_SESSIONS": "1",
    }


@contextmanager
def _bench_server(workdir: Path, sessions: int) -> Iterator[tuple[subprocess.Popen, Any, int]]:
    """daphne inside a fresh network namespace, serving the bench's database: (process,
    namespace, port); stopped and the namespace removed on the way out, however the bench ends."""
    from tools.netns import NetworkNamespace

    namespace = NetworkNamespace(f"worldsite-bench-{os.getpid()}")
    port = 8765
    with (workdir / "daphne.log").open("w") as log:
        server = subprocess.Popen(
            namespace.wrap(daphne_argv(port)),
            cwd=REPO,
            env={**os.environ, **_server_env(workdir, sessions)},
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            namespace.wait_for_port(port)
            yield server, namespace, port
        finally:
            server.terminate()
            try:
                server.wait(timeout=10)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()
            namespace.remove()


def _percentile(values: list[float], q: float) -> float | None:
    return round(float(np.percentile(values, q)), 1) if values else None


# Sentences the player types during a --prompt-every run (each one the world acts on).
BENCH_SENTENCES = (
    "make it rain",
    "make it night",
    "cast fire magic",
    "summon a dragon",
    "let the sun come out",
    "plant a tree",
)
TYPE_SENTENCE = """(text) => {
  document.getElementById("prompt").value = text;
  document.getElementById("prompt-form").requestSubmit();
}"""


# The page's receivers: (seconds its video frames waited in the jitter buffer, frames emitted,
# the same for audio samples).
JITTER_BUFFER = """async () => {
  const out = [0, 0, 0, 0];
  (await window.worldsite.pc.getStats()).forEach((r) => {
    if (r.type === "inbound-rtp") {
      const at = r.kind === "video" ? 0 : 2;
      out[at] = r.jitterBufferDelay || 0; out[at + 1] = r.jitterBufferEmittedCount || 0;
    }
  });
  return out;
}"""


def _mean_ms(seconds: float, count: float) -> float | None:
    """Milliseconds per item of a total in seconds over `count` items (None: no items)."""
    return round(1000 * seconds / count, 1) if count else None


def _measure(
    server_pid: int,
    players: list,
    seconds: float,
    viewer_frames: Callable[[], list[int]] = list,
    prompt_every: float | None = None,
    viewer_pid: int | None = None,
) -> dict:
    """Press and release W on every player's page for `seconds` (and, with `prompt_every`,
    type a sentence into the prompt box that often, the field never taking the keyboard's
    focus); what the pages and the server did meanwhile."""
    for page in players:
        page.evaluate(
            "() => { const b = window.bench; b.latencies = []; b.presses = []; b.gaps = []; }"
        )
    before = [page.evaluate("window.bench.frames") for page in players]
    engine_before = sum(page.evaluate("window.worldsite.engineFrames || 0") for page in players)
    reports_before = [page.evaluate("window.worldsite.frameLateMs.length") for page in players]
    viewers_before = viewer_frames()
    cpu_before, server_before = _cpu_totals(), _process_cpu_seconds(server_pid)
    browsers_before = _browser_cpu_seconds()
    viewers_cpu_before = _process_cpu_seconds(viewer_pid) if viewer_pid else 0.0
    jitter_before = [page.evaluate(JITTER_BUFFER) for page in players]
    started = time.monotonic()
    held = False
    sentences = 0
    while time.monotonic() - started < seconds:
        if prompt_every and time.monotonic() - started >= sentences * prompt_every:
            for page in players:
                page.evaluate(TYPE_SENTENCE, BENCH_SENTENCES[sentences % len(BENCH_SENTENCES)])
            sentences += 1
        for page in players:
            (page.keyboard.up if held else page.keyboard.down)("w")
        held = not held
        time.sleep(0.5)
    elapsed = time.monotonic() - started
    cpu_after, server_after = _cpu_totals(), _process_cpu_seconds(server_pid)
    browsers_after = _browser_cpu_seconds()
    viewers_cpu_after = _process_cpu_seconds(viewer_pid) if viewer_pid else 0.0
    jitter_after = [page.evaluate(JITTER_BUFFER) for page in players]
    buffered = [
        sum(a[k] - b[k] for a, b in zip(jitter_after, jitter_before, strict=True)) for k in range(4)
    ]
    results = [page.evaluate("window.bench") for page in players]
    engine_after = sum(page.evaluate("window.worldsite.engineFrames || 0") for page in players)
    viewers_after = viewer_frames()
    time.sleep(1.2)  # the heartbeat that covers the last second
    late = [
        ms
        for page, seen in zip(players, reports_before, strict=True)
        for ms in page.evaluate("window.worldsite.frameLateMs")[seen:]
    ]
    latencies = [ms for result in results for ms in result["latencies"]]
    gaps = [ms for result in results for ms in result["gaps"]]
    total, idle = cpu_after[0] - cpu_before[0], cpu_after[1] - cpu_before[1]
    fps = [round((r["frames"] - b) / elapsed, 1) for r, b in zip(results, before, strict=True)]
    viewer_fps = [
        round((a - b) / elapsed, 1) for a, b in zip(viewers_after, viewers_before, strict=True)
    ]
    return {
        "seconds": round(elapsed, 1),
        "decoded_fps": fps,
        "viewer_decoded_fps": viewer_fps,
        "input_to_frame_ms_p50": _percentile(latencies, 50),
        "input_to_frame_ms_p95": _percentile(latencies, 95),
        "input_samples": len(latencies),
        # Time between consecutive frames the page presented: at 20 fps 50 ms; a frame that
        # arrives 100 ms late shows as a gap of 150 ms.
        "frame_gap_ms_p95": _percentile(gaps, 95),
        "frame_gap_ms_max": round(max(gaps), 1) if gaps else None,
        # The engine's own account (its heartbeat): the most any frame took from the start of
        # its turn until it was ready (generation included; a turn is 50 ms at 20 fps).
        "frame_late_ms_max": round(max(late), 1) if late else None,
        "frame_late_ms_p50": _percentile(late, 50),  # the median second's latest frame
        # How long the page's frames waited in its jitter buffer on average (it grows with the
        # jitter of their arrival: packets that come unevenly are held back to play evenly).
        "jitter_buffer_ms": _mean_ms(buffered[0], buffered[1]),
        "audio_jitter_buffer_ms": _mean_ms(buffered[2], buffered[3]),
        "sentences_typed": sentences * len(players),
        "cpu_machine_percent": round(100.0 * (total - idle) / total, 1) if total else None,
        "cpu_server_cores": round((server_after - server_before) / elapsed, 2),
        "cpu_browsers_cores": round((browsers_after - browsers_before) / elapsed, 2),
        "cpu_whep_viewers_cores": round((viewers_cpu_after - viewers_cpu_before) / elapsed, 2),
        # Frames the engine generated (its heartbeat, once a second): on a machine whose other
        # jobs take CPU from the server, CPU per generated frame compares phases fairly.
        "engine_fps": round((engine_after - engine_before) / elapsed, 1),
        "cpu_server_ms_per_frame": (
            round(1000 * (server_after - server_before) / (engine_after - engine_before), 1)
            if engine_after > engine_before
            else None
        ),
    }


class WhepSpectators:
    """tools.room_viewers in its own process (inside the namespace): aiortc spectators on the
    room's viewer WHEP URL, as a streamer's tool would pull it."""

    def __init__(self, namespace, port: int, whep_path: str, keys: list[str]) -> None:
        command = [sys.executable, "-m", "tools.room_viewers", "--host", f"127.0.0.1:{port}"]
        self.process = subprocess.Popen(
            namespace.wrap([*command, "--whep", whep_path, *keys]),
            cwd=REPO,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.process.stdout is not None and self.process.stdin is not None
        ready = self.process.stdout.readline().strip()
        if ready != "ready":
            raise SystemExit(f"the WHEP spectators did not start: {ready!r}")
        self.totals = [0] * len(keys)

    def frames(self) -> list[int]:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write("count\n")
        self.process.stdin.flush()
        counts = json.loads(self.process.stdout.readline())
        self.totals = [total + count for total, count in zip(self.totals, counts, strict=True)]
        return self.totals

    def close(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()


def run_room(
    spectators: int, seconds: float, screenshot: str | None = None, client: str = "browser"
) -> dict:
    """One player in a listed live room, measured alone, then with `spectators` watching:
    Chromium pages on the room's link (`browser`), or aiortc clients on its viewer WHEP URL
    (`whep`)."""
    from playwright.sync_api import sync_playwright

    from tools.netns import CHROMIUM_FLAGS, NetworkNamespace

    if not NetworkNamespace.available():
        raise SystemExit("tools.bench needs root and iproute2 (it uses a network namespace)")
    workdir = Path(tempfile.mkdtemp(prefix="worldsite-bench-"))
    keys = _prepare_database(workdir, 1, spectators)
    with (
        _bench_server(workdir, 1) as (server, namespace, port),
        sync_playwright() as playwright,
    ):
        base = f"http://127.0.0.1:{port}"
        browser = playwright.chromium.launch(
            executable_path=namespace.chromium_wrapper(workdir), args=CHROMIUM_FLAGS
        )
        host = _start_player(browser, base, 0)
        host.wait_for_function("() => window.worldsite && window.worldsite.live", timeout=180_000)
        host.evaluate(BENCH_PAGE_PROBE)
        host.select_option("#room-visibility", "listed")
        host.click("#room-submit")
        host.wait_for_function("() => !document.getElementById('room-live').hidden")
        link = host.locator("#room-link").inner_text()
        host.locator("#stream").focus()
        time.sleep(2.0)
        alone = _measure(server.pid, [host], seconds)
        viewers: list = []
        whep = None
        if client == "whep":
            code = link.rstrip("/").rsplit("/", 1)[1]
            whep = WhepSpectators(namespace, port, f"/api/v1/rooms/{code}/whep/", keys)
            viewer_frames = whep.frames
        else:
            for index in range(spectators):
                # Small windows: spectators' browsers would run on their own machines;
                # here they share the server's two cores, so each draws what it must.
                page = _logged_in(browser, base, f"viewer{index}", viewport=SPECTATOR_VIEWPORT)
                page.goto(link)
                viewers.append(page)
            for page in viewers:
                page.wait_for_function(
                    "() => window.liveRoom && window.liveRoom.framesDecoded > 20",
                    timeout=120_000,
                )
                page.evaluate(VIEWER_PAGE_PROBE)

            def viewer_frames() -> list[int]:
                return [page.evaluate("window.viewerBench.frames") for page in viewers]

        host.wait_for_function(f"() => window.liveRoom.viewerCount === {spectators}")
        host.locator("#stream").focus()
        time.sleep(2.0)
        watched = _measure(
            server.pid,
            [host],
            seconds,
            viewer_frames,
            viewer_pid=whep.process.pid if whep else None,
        )
        if screenshot:
            (viewers[0] if viewers else host).screenshot(path=screenshot)
        if whep is not None:
            whep.close()
        browser.close()
    alone_cpu, watched_cpu = alone["cpu_server_cores"], watched["cpu_server_cores"]
    alone_per_frame, watched_per_frame = (
        alone["cpu_server_ms_per_frame"],
        watched["cpu_server_ms_per_frame"],
    )
    viewer_fps = watched["viewer_decoded_fps"]
    return {
        "spectators": spectators,
        "spectator_client": client,
        "seconds": seconds,
        "viewer_decoded_fps": viewer_fps,
        "viewer_decoded_fps_min": min(viewer_fps) if viewer_fps else None,
        "host_decoded_fps": watched["decoded_fps"][0],
        "host_decoded_fps_alone": alone["decoded_fps"][0],
        "input_to_frame_ms_p50": watched["input_to_frame_ms_p50"],
        "input_to_frame_ms_p95": watched["input_to_frame_ms_p95"],
        "input_to_frame_ms_p50_alone": alone["input_to_frame_ms_p50"],
        "input_samples": watched["input_samples"],
        "cpu_server_cores_alone": alone_cpu,
        "cpu_server_cores": watched_cpu,
        "cpu_server_increase_percent": (
            round(100.0 * (watched_cpu - alone_cpu) / alone_cpu, 1) if alone_cpu else None
        ),
        "engine_fps_alone": alone["engine_fps"],
        "engine_fps": watched["engine_fps"],
        "cpu_server_ms_per_frame_alone": alone_per_frame,
        "cpu_server_ms_per_frame": watched_per_frame,
        "cpu_server_per_frame_increase_percent": (
            round(100.0 * (watched_per_frame - alone_per_frame) / alone_per_frame, 1)
            if alone_per_frame and watched_per_frame
            else None
        ),
        "cpu_browsers_cores_alone": alone["cpu_browsers_cores"],
        "cpu_browsers_cores": watched["cpu_browsers_cores"],
        "cpu_whep_viewers_cores": watched["cpu_whep_viewers_cores"] if whep else None,
        "frame_gap_ms_p95_alone": alone["frame_gap_ms_p95"],
        "frame_gap_ms_p95": watched["frame_gap_ms_p95"],
        "jitter_buffer_ms_alone": alone["jitter_buffer_ms"],
        "jitter_buffer_ms": watched["jitter_buffer_ms"],
        "audio_jitter_buffer_ms_alone": alone["audio_jitter_buffer_ms"],
        "audio_jitter_buffer_ms": watched["audio_jitter_buffer_ms"],
        # The latest frame of each second, from the start of its turn to ready (the engine's
        # heartbeat): whether the audience slows generation itself.
        "frame_late_ms_p50_alone": alone["frame_late_ms_p50"],
        "frame_late_ms_p50": watched["frame_late_ms_p50"],
        "frame_late_ms_max_alone": alone["frame_late_ms_max"],
        "frame_late_ms_max": watched["frame_late_ms_max"],
        "cpu_machine_percent_alone": alone["cpu_machine_percent"],
        "cpu_machine_percent": watched["cpu_machine_percent"],
        "load_average_1m": round(os.getloadavg()[0], 2),
        "cores": os.cpu_count(),
    }


def run(
    sessions: int,
    seconds: float,
    screenshot: str | None = None,
    prompt_every: float | None = None,
) -> dict:
    from playwright.sync_api import sync_playwright

    from tools.netns import CHROMIUM_FLAGS, NetworkNamespace

    if not NetworkNamespace.available():
        raise SystemExit("tools.bench needs root and iproute2 (it uses a network namespace)")
    workdir = Path(tempfile.mkdtemp(prefix="worldsite-bench-"))
    _prepare_database(workdir, sessions)
    with (
        _bench_server(workdir, sessions) as (server, namespace, port),
        sync_playwright() as playwright,
    ):
        base = f"http://127.0.0.1:{port}"
        browser = playwright.chromium.launch(
            executable_path=namespace.chromium_wrapper(workdir), args=CHROMIUM_FLAGS
        )
        pages = [_start_player(browser, base, index) for index in range(sessions)]
        for page in pages:
            page.wait_for_function(
                "() => window.worldsite && window.worldsite.live", timeout=180_000
            )
            page.evaluate(BENCH_PAGE_PROBE)
            page.locator("#stream").focus()
        time.sleep(2.0)  # let the jitter buffers settle
        measured = _measure(server.pid, pages, seconds, prompt_every=prompt_every)
        if screenshot:
            pages[0].screenshot(path=screenshot)
        browser.close()
    keep = (
        "seconds",
        "decoded_fps",
        "input_to_frame_ms_p50",
        "input_to_frame_ms_p95",
        "input_samples",
        "frame_gap_ms_p95",
        "frame_gap_ms_max",
        "frame_late_ms_max",
        "sentences_typed",
        "engine_fps",
        "cpu_machine_percent",
        "cpu_server_cores",
    )
    return {
        "sessions": sessions,
        **{key: measured[key] for key in keep},
        "decoded_fps_min": min(measured["decoded_fps"]),
        "prompt_every_s": prompt_every,
        "load_average_1m": round(os.getloadavg()[0], 2),
        "cores": os.cpu_count(),
    }


SPECTATOR_VIEWPORT = {"width": 560, "height": 420}


def _logged_in(browser, base: str, username: str, viewport: dict | None = None):
    context = browser.new_context(viewport=viewport or {"width": 1280, "height": 900})
    page = context.new_page()
    page.goto(base + "/accounts/login/")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url("**/worlds/")
    return page


def _start_player(browser, base: str, index: int):
    page = _logged_in(browser, base, f"bench{index}")
    page.goto(base + "/worlds/bench/")
    page.click("text=Play this world")
    page.wait_for_url("**/play/**")
    return page


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sessions", type=int, default=1)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--json", action="store_true", help="print only the JSON object")
    parser.add_argument(
        "--spectators",
        type=int,
        default=None,
        help="one player in a live room watched by this many spectators (instead of --sessions)",
    )
    parser.add_argument(
        "--spectator-client",
        choices=["browser", "whep"],
        default="browser",
        help="spectators as Chromium pages on the room's link, or aiortc clients on its WHEP URL",
    )
    parser.add_argument("--screenshot", help="save the first player's page as this PNG")
    parser.add_argument(
        "--prompt-every",
        type=float,
        default=None,
        metavar="SECONDS",
        help="each player also types a sentence this often (players only, not --spectators)",
    )
    args = parser.parse_args()
    if args.spectators is not None and args.prompt_every is not None:
        parser.error("--prompt-every measures players alone; leave out --spectators")
    if args.spectators is not None:
        result = run_room(
            args.spectators, args.seconds, args.screenshot, client=args.spectator_client
        )
    else:
        result = run(args.sessions, args.seconds, args.screenshot, args.prompt_every)
    print(json.dumps(result) if args.json else json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
