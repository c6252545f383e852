"""Undo: what planning and running an undo cost, and what it writes.

Run alone with  .venv/bin/python bench/undo.py [--quick]

i) Plan: ``agent.undo(to=..., dry_run=True)`` on a SQLite session of N tool calls (200 and
   2,000 calls: 401 and 4,001 messages), the agent loaded; every call after the checkpoint is
   planned (half of them). No peer SDK ties compensations to a run's record, so there is no
   peer side here: the figure to compare is the time a person waits for the plan.
ii) Run: a five-call run on SQLite (and on PostgreSQL when one is reachable at
   $INTERLUDE_TEST_POSTGRES or the local default), undone to after its second call: the three
   compensations (each journaled: a save before and one after its body) and the one rewind
   save; wall time per undo, and the bytes the store wrote for it, beside the bytes the
   original five-call run wrote.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from common import Row, print_table

from interlude import Agent, ToolResult, ToolUse, tool
from interlude.sessions import SQLiteStore
from interlude.testing import FunctionModel

EFFECTS = {"done": 0, "undone": 0}


def _undo(input: dict[str, Any], result: Any) -> str:
    EFFECTS["undone"] += 1
    return "undone"


@tool(compensate=_undo, inline=True)
def act(n: int) -> dict[str, int]:
    """Act."""
    EFFECTS["done"] += 1
    return {"n": n}


def _model(calls: int) -> FunctionModel:
    def reply(request: Any) -> Any:
        done = sum(isinstance(b, ToolResult) for m in request.messages for b in m.content)
        if done < calls:
            return [ToolUse(f"c{done + 1}", "act", {"n": done})]
        return "done"

    return FunctionModel(reply)


def _run(store: Any, sid: str, calls: int) -> Agent:
    agent = Agent(_model(calls), tools=[act], session=store, session_id=sid, max_cycles=calls + 1)
    agent("go")
    return agent


def bench_plan(rounds: int, folder: Path) -> list[Row]:
    rows = []
    for calls in (200, 2000):
        store = SQLiteStore(folder / f"plan-{calls}.db")
        _run(store, "s", calls)
        to = f"m{calls}"  # half-way: the model reply of call calls/2 + 1
        samples = []
        for _ in range(rounds):
            agent = Agent(_model(calls), tools=[act], session=store, session_id="s")
            assert agent.messages  # loaded: the plan alone is timed
            started = time.perf_counter()
            plan = agent.undo(to=to, dry_run=True)
            samples.append((time.perf_counter() - started) * 1e3)
            assert len(plan.steps) == calls // 2, len(plan.steps)
        rows.append(Row(f"plan, {calls} calls ({calls // 2} to undo), SQLite", samples, "ms"))
        store.close()
    return rows


def _postgres_url() -> str | None:
    url = os.environ.get("INTERLUDE_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")
    try:
        import psycopg

        psycopg.connect(url, connect_timeout=2).close()
    except Exception:
        return None
    return url


def bench_run(rounds: int, folder: Path) -> tuple[list[Row], list[str]]:
    from interlude.sessions import open_store

    kinds = [("SQLite", lambda: SQLiteStore(folder / "run.db"))]
    url = _postgres_url()
    notes = []
    if url is not None:
        kinds.append(("PostgreSQL", lambda: open_store(url)))
    else:
        notes.append("PostgreSQL: not reachable, skipped")
    rows = []
    for name, make in kinds:
        store = make()
        samples, undo_bytes, run_bytes = [], [], []
        for i in range(rounds):
            sid = f"bench-undo-{os.getpid()}-{i}"
            before = store.bytes_written
            agent = _run(store, sid, 5)
            run_bytes.append(store.bytes_written - before)
            before = store.bytes_written
            started = time.perf_counter()
            result = agent.undo(to="m4", by="bench")
            samples.append((time.perf_counter() - started) * 1e3)
            undo_bytes.append(store.bytes_written - before)
            assert result.stop_reason == "undone" and len(agent.messages) == 5
            if hasattr(store, "delete"):
                import asyncio

                asyncio.run(store.delete(sid))
        rows.append(Row(f"undo 3 of 5 calls, {name}", samples, "ms"))
        notes.append(
            f"{name}: the undo wrote {statistics.median(undo_bytes):,.0f} bytes "
            f"(the five-call run wrote {statistics.median(run_bytes):,.0f})"
        )
        close = getattr(store, "close", None)
        if close is not None:
            close()
    return rows, notes


def run(quick: bool) -> None:
    rounds = 5 if quick else 30
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        print_table(f"undo i) plan (dry run), {rounds} rounds", bench_plan(rounds, folder))
        rows, notes = bench_run(rounds, folder)
        print_table(f"undo ii) running an undo, {rounds} rounds", rows)
        for note in notes:
            print(f"   {note}")
        print(f"   load average at the end: {os.getloadavg()[0]:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="few rounds: a smoke run")
    run(parser.parse_args().quick)


if __name__ == "__main__":
    main()
