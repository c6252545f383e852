"""The embedded engine in a process of its own (to be killed inside a tool)::

python -m tests.engines.embedded_main STORE_URL AGENT SESSION_ID PROMPT
"""

from __future__ import annotations

import sys


def main(store: str, agent: str, session_id: str, prompt: str) -> None:
    from .agents import app

    app.start(agent, session_id, store)(prompt)


if __name__ == "__main__":
    main(*sys.argv[1:5])
