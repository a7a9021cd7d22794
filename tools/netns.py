"""A private network namespace with only `lo`, for WebRTC on loopback (tests and the bench).

A server and Chromium started inside it talk over 127.0.0.1, and no ICE candidate can point
anywhere else. Needs root and iproute2.
"""

import os
import shutil
import subprocess
import sys
import time


class NetworkNamespace:
    def __init__(self, name: str) -> None:
        self.name = name
        subprocess.run(["ip", "netns", "add", name], check=True)
        subprocess.run(self.wrap(["ip", "link", "set", "lo", "up"]), check=True)

    @staticmethod
    def available() -> bool:
        return os.geteuid() == 0 and shutil.which("ip") is not None

    def wrap(self, command: list[str]) -> list[str]:
        return ["ip", "netns", "exec", self.name, *command]

    def wait_for_port(self, port: int, timeout: float = 60) -> None:
        probe = f"import socket; socket.create_connection(('127.0.0.1', {port}), 1)"
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            probe_run = subprocess.run(
                self.wrap([sys.executable, "-c", probe]), capture_output=True
            )
            if probe_run.returncode == 0:
                return
            time.sleep(0.3)
        raise TimeoutError(f"nothing listened on port {port} inside {self.name}")

    def chromium_wrapper(self, folder, chromium: str = "/usr/bin/chromium") -> str:
        """An executable that starts Chromium inside the namespace (for Playwright)."""
        path = os.path.join(folder, "chromium-in-netns")
        with open(path, "w") as script:
            script.write(f'#!/bin/sh\nexec ip netns exec {self.name} {chromium} "$@"\n')
        os.chmod(path, 0o755)
        return path

    def remove(self) -> None:
        subprocess.run(["ip", "netns", "delete", self.name], check=False)


# Flags that let headless Chromium stream WebRTC on loopback in a namespace (DESIGN.md).
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--autoplay-policy=no-user-gesture-required",
    "--use-fake-ui-for-media-stream",
    "--use-fake-device-for-media-stream",
    "--allow-loopback-in-peer-connection",
    "--disable-features=WebRtcHideLocalIpsWithMdns",
]
