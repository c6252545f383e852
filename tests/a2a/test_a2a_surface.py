"""interlude.a2a is light to import, and the inbox works without the [a2a] extra."""

from __future__ import annotations

import subprocess
import sys


def run(code: str, *args: str) -> str:
    command = [sys.executable, "-c", code, *args]
    out = subprocess.run(command, capture_output=True, text=True, check=True)
    return out.stdout.strip()


def test_the_sdk_is_imported_only_when_used() -> None:
    code = (
        "import sys, interlude; a = 'interlude.a2a' in sys.modules; import interlude.a2a as m; "
        "b = 'a2a' in sys.modules; m.RemoteAgent; c = 'a2a' in sys.modules; m.create_a2a_app; "
        "print(a, b, c, 'a2a' in sys.modules, m.__all__ == sorted(m.__all__))"
    )
    assert run(code) == "False False False True True"


def test_the_inbox_serves_without_the_extra() -> None:
    code = (
        "import sys\n"
        "if sys.argv[1] == 'without': sys.modules['a2a'] = None\n"  # as if not installed
        "from interlude import App\n"
        "from interlude.server import create_app\n"
        "app = App()\n"
        "app.agent('ops')(lambda session: None)\n"
        "asgi = create_app('memory:', app, tokens={'ana-token-0123456789abcdef': 'ana'})\n"
        "print([r.path for r in asgi.routes if r.path.startswith('/a2a')])"
    )
    assert run(code, "without") == "[]"
    assert run(code, "with") == "['/a2a/ops']"
