"""Local state and recordings are readable by the site's own account only."""

import os
import stat
import subprocess
import sys

from worldsite.engine_gateway.recording import RecordingWriter


def _mode(path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_recordings_are_owner_only_whatever_the_umask(tmp_path):
    previous = os.umask(0o022)
    try:
        root = tmp_path / "recordings"
        recorder = RecordingWriter(root / "s1", fps=20, width=16, height=16, spec={})
        recorder.close("done")
    finally:
        os.umask(previous)
    assert _mode(root) == 0o700 and _mode(root / "s1") == 0o700


def test_the_var_folder_is_created_owner_only(tmp_path):
    var = tmp_path / "var"
    env = {
        **os.environ,
        "WORLDSITE_VAR_DIR": str(var),
        "DJANGO_SECRET_KEY": "",
        "DJANGO_SETTINGS_MODULE": "worldsite.settings",
    }
    subprocess.run(
        [sys.executable, "-c", "import django; django.setup()"],
        env=env,
        check=True,
        cwd=".",
    )
    assert _mode(var) == 0o700
    assert _mode(var / "secret_key") == 0o600
