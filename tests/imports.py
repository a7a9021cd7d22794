"""What importing a module drags in, measured in a fresh interpreter."""

import json
import subprocess
import sys


def modules_loaded_by(module: str, *, under: tuple[str, ...]) -> list[str]:
    """The modules whose dotted names start with one of `under` that a fresh
    `import module` loads (so the caller can assert a module stays import-light)."""
    code = (
        f"import json, sys, {module}; "
        f"print(json.dumps(sorted(m for m in sys.modules if m.startswith({under!r}))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.splitlines()[-1])
