"""``import interlude`` never imports dbos (about half a second of imports): only
``import interlude.dbos`` does."""

from __future__ import annotations

import subprocess
import sys


def test_import_interlude_does_not_import_dbos() -> None:
    code = (
        "import sys, interlude; print(sorted(m for m in sys.modules if m.split('.')[0] == 'dbos'))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
