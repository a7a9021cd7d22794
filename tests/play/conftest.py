"""Real server processes for play tests: daphne (with the embedded engine or without), engine
workers, all on the test database, with media kept on the loopback interface."""

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.db import connection

from tests.browser.conftest import CHROMIUM
from tools.netns import CHROMIUM_FLAGS, NetworkNamespace

REPO = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for_port(port: int, process: subprocess.Popen, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"server exited early with code {process.returncode}")
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.2)
    raise TimeoutError(f"nothing listened on port {port} within {timeout} s")


def _database_env() -> dict[str, str]:
    """Point a child process at the database this test run created."""
    db = connection.settings_dict
    if connection.vendor == "postgresql":
        user = db.get("USER") or "postgres"
        host = db.get("HOST") or "127.0.0.1"
        port = db.get("PORT") or 5432
        return {"DATABASE_URL": f"postgres://{user}@{host}:{port}/{db['NAME']}"}
    return {"DATABASE_URL": "", "WORLDSITE_SQLITE_PATH": str(db["NAME"])}


@pytest.fixture(autouse=True)
def _client_ice_on_loopback():
    """This process's aiortc peers offer only 127.0.0.1 too."""
    import aioice.ice

    from sessions.worker.loopback import enable_loopback_candidates

    original = aioice.ice.get_host_addresses
    enable_loopback_candidates(only=True)
    yield
    aioice.ice.get_host_addresses = original


@pytest.fixture(scope="session")
def collected_static() -> None:
    """Server processes serve hashed static files, as in production: collect them once."""
    subprocess.run(
        [sys.executable, "manage.py", "collectstatic", "--noinput", "-v", "0"], cwd=REPO, check=True
    )


@pytest.fixture
def server_env(transactional_db, tmp_path, settings, collected_static) -> dict[str, str]:
    env = dict(os.environ)
    env.update(_database_env())
    env.update(
        {
            "WORLDSITE_WEBRTC_LOOPBACK_ONLY": "1",
            "WORLDSITE_RECORDINGS_ROOT": str(tmp_path / "recordings"),
            "WORLDSITE_ENGINE_IDLE_TIMEOUT": "60",
            "WORLDSITE_ENGINE_HEARTBEAT_TIMEOUT": "4",
            "PYTHONUNBUFFERED": "1",
        }
    )
    settings.RECORDINGS_ROOT = tmp_path / "recordings"
    return env


class Servers:
    """Processes started for one test; all are stopped (SIGKILL if need be) afterwards."""

    def __init__(self, env: dict[str, str], logs: Path) -> None:
        self.env = env
        self.logs = logs
        self.processes: list[subprocess.Popen] = []

    def start(
        self,
        name: str,
        args: list[str],
        env: dict[str, str] | None = None,
        namespace: "NetworkNamespace | None" = None,
    ):
        log = (self.logs / f"{name}.log").open("w")
        command = [sys.executable, *args]
        if namespace is not None:
            command = namespace.wrap(command)
        process = subprocess.Popen(
            command,
            cwd=REPO,
            env={**self.env, **(env or {})},
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        self.processes.append(process)
        return process

    def daphne(
        self, env: dict[str, str] | None = None, namespace: "NetworkNamespace | None" = None
    ) -> str:
        port = free_port()
        process = self.start(
            f"daphne-{port}",
            ["-m", "daphne", "-b", "127.0.0.1", "-p", str(port), "worldsite.asgi:application"],
            env,
            namespace,
        )
        if namespace is None:
            wait_for_port(port, process)
        else:
            namespace.wait_for_port(port)
        return f"127.0.0.1:{port}"

    def engine_worker(self, name: str, capacity: int = 1):
        return self.start(
            f"worker-{name}",
            ["manage.py", "engine_worker", "--name", name, "--capacity", str(capacity)],
        )

    def log(self, name: str) -> str:
        return (self.logs / f"{name}.log").read_text()

    def wait_for_log(self, name: str, text: str, timeout: float = 90) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if text in self.log(name):
                return
            time.sleep(0.3)
        raise TimeoutError(f"{name} never logged {text!r}:\n{self.log(name)[-2000:]}")

    def stop(self) -> None:
        for process in self.processes:
            if process.poll() is None:
                process.terminate()
        for process in self.processes:
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()


@pytest.fixture
def servers(server_env, tmp_path):
    logs = tmp_path / "logs"
    logs.mkdir()
    running = Servers(server_env, logs)
    yield running
    running.stop()


@pytest.fixture
def netns():
    if not NetworkNamespace.available():
        if os.environ.get("CI"):
            pytest.fail("network-namespace tests need root and iproute2 in CI")
        pytest.skip("network namespaces need root and iproute2")
    namespace = NetworkNamespace(f"worldsite-{os.getpid()}")
    yield namespace
    namespace.remove()


def database_env_for_namespace() -> dict[str, str]:
    """Inside the namespace 127.0.0.1 is the namespace's own: reach PostgreSQL by its socket."""
    env = _database_env()
    if connection.vendor == "postgresql":
        db = connection.settings_dict
        user = db.get("USER") or "postgres"
        env["DATABASE_URL"] = f"postgres://{user}@%2Fvar%2Frun%2Fpostgresql/{db['NAME']}"
    return env


@pytest.fixture
def embedded_server(servers):
    return servers.daphne(env={"REDIS_URL": "", "WORLDSITE_ENGINE_EMBEDDED": "1"})


@pytest.fixture(params=["embedded", "scaled"])
def any_server(request, servers, settings):
    """The embedded default, and the scaled one: daphne plus an engine-worker process on Redis."""
    if request.param == "embedded":
        return request.getfixturevalue("embedded_server")
    if not settings.REDIS_URL:
        pytest.skip("set REDIS_URL to test engine workers as separate processes")
    host = servers.daphne()
    servers.engine_worker("api")
    servers.wait_for_log("worker-api", "ready")
    return host


@pytest.fixture
def chromium_in(netns, tmp_path):
    """Headless Debian Chromium started inside the test's network namespace."""
    if not os.path.exists(CHROMIUM):
        pytest.fail("Debian chromium is missing") if os.environ.get("CI") else pytest.skip(
            "Debian chromium is not installed (make test installs it)"
        )
    wrapper = netns.chromium_wrapper(tmp_path, CHROMIUM)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=wrapper, args=CHROMIUM_FLAGS)
        yield browser
        browser.close()
