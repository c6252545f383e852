"""Python calls per unit of work: the loop's cost in a figure that a busy machine does not move.

Run from the repository root:  .venv/bin/python bench/calls.py
Against another version:       PYTHONPATH=/tmp/old/src .venv/bin/python bench/calls.py
(``git worktree add --detach /tmp/old 2852626`` gives issue 37's baseline.)

Counts every function call cProfile sees (Python functions and the built-ins they call) in the
workloads of bench.py's sections b) and c), with the agents built outside the counted region:
a model + async-tool cycle (200 per invocation, per cycle), an in-memory pause + resume, and a
pause, export -> JSON -> import into a fresh agent, resume. Timings drift with the machine;
call counts do not, so they say whether a change added work to the hot path.
"""

from __future__ import annotations

import cProfile
import json
import pstats
import sys
from collections.abc import Callable
from typing import Any

from bench import loop_agent, noop_async, paused_agent

CYCLES = 200
REPS = 20


def counted(make: Callable[[], Any], run: Callable[[Any], None], reps: int = REPS) -> float:
    """Calls per ``run(make())``, the objects made before counting starts (after a warm-up)."""
    for _ in range(3):
        run(make())
    made = [make() for _ in range(reps)]
    profile = cProfile.Profile()
    profile.enable()
    for obj in made:
        run(obj)
    profile.disable()
    return float(pstats.Stats(profile).total_calls) / reps


def _trip(agent: Any) -> None:
    paused = agent("go")
    agent.resume({paused.interrupts[0].id: True})


def _export_trip(pair: tuple[Any, Any]) -> None:
    agent, fresh = pair
    paused = agent("go")
    fresh.import_state(json.loads(json.dumps(agent.export_state())))
    fresh.resume({paused.interrupts[0].id: True})


def main() -> None:
    import interlude

    rows = [
        (
            f"model + async-tool cycle (of {CYCLES})",
            counted(lambda: loop_agent(CYCLES, noop_async), lambda a: a("go"), 5) / CYCLES,
        ),
        ("agent('go') + agent.resume({id: True})", counted(paused_agent, _trip)),
        (
            "pause, export -> JSON -> import into a fresh agent, resume",
            counted(lambda: (paused_agent(), paused_agent()), _export_trip),
        ),
    ]
    print(f"Python calls per unit, interlude from {interlude.__file__}")
    for name, calls in rows:
        print(f"  {calls:9,.1f}  {name}")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
