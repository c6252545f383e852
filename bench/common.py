"""What the benchmark modules share: result rows, tables, verdicts and a metered session store."""

from __future__ import annotations

import json
import os
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from interlude import Agent, ToolResult, ToolUse
from interlude.hooks import BeforeToolCallEvent

if TYPE_CHECKING:  # (names older versions lack: bench.py --ab-src runs against them)
    from interlude import AgentSession, AgentTool
    from interlude.sessions import PendingInterrupt, PendingQuery, SessionUpdate, StoredSession
    from interlude.testing import ModelRequest


@dataclass
class Row:
    name: str
    samples: Sequence[float]  # already in the unit shown
    unit: str
    target: float | None = None  # the median must be <= target
    block_medians: Sequence[float] = ()  # when measured in blocks: each block's median

    @property
    def median(self) -> float:
        return statistics.median(self.samples)

    def cells(self) -> list[str]:
        verdict, goal = "", ""
        if self.target is not None:
            goal = f"<= {self.target:g} {self.unit}"
            verdict = verdict_of(self.median, self.target)
        figures = (self.median, min(self.samples), max(self.samples))
        return [self.name, *(f"{x:,.1f}" for x in figures), self.unit, goal, verdict]


def verdict_of(figure: float, target: float) -> str:
    return "PASS" if figure <= target else "FAIL"


def print_grid(title: str, head: list[str], body: list[list[str]], right: set[int]) -> None:
    """A plain-text table: ``right`` holds the indexes of right-aligned (numeric) columns."""
    widths = [max(len(line[i]) for line in [head, *body]) for i in range(len(head))]

    def fmt(line: list[str]) -> str:
        return "  ".join(
            c.rjust(w) if i in right else c.ljust(w)
            for i, (c, w) in enumerate(zip(line, widths, strict=True))
        ).rstrip()

    print(f"\n{title}")
    print(fmt(head))
    print("  ".join("-" * w for w in widths))
    for line in body:
        print(fmt(line))


def print_table(title: str, rows: list[Row]) -> None:
    head = ["benchmark", "median", "min", "max", "unit", "target", ""]
    print_grid(title, head, [r.cells() for r in rows], {1, 2, 3})


def check(label: str, figure: float, target: float, unit: str = "", fmt: str = ",.2f") -> str:
    """One indented result line: '<label>: <figure> <unit>  target <= <target>  PASS|FAIL'."""
    unit = f" {unit}" if unit else ""
    return (
        f"   {label}: {figure:{fmt}}{unit}  target <= {target:{fmt}}{unit}  "
        f"{verdict_of(figure, target)}"
    )


def written_bytes() -> int | None:
    """Bytes this process has passed to write() so far (Linux /proc/self/io 'wchar'), or None
    where that is not available. Counts what SQLite really writes: WAL frames, page images."""
    try:
        with open(f"/proc/{os.getpid()}/io") as f:
            for line in f:
                if line.startswith("wchar:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


class Metered:
    """A session store wrapped to count its loads and saves and the wall time spent in them.

    It forwards the SessionStore protocol to ``store``; the wrapping costs one coroutine
    call per store call (about a microsecond). With ``record_pause``, each save also notes the
    JSON size of the pause slot it writes (``last_pause_bytes``), outside the timed region.
    """

    def __init__(self, store: Any, *, record_pause: bool = False) -> None:
        self.store = store
        self.record_pause = record_pause
        self.saves = 0
        self.save_seconds = 0.0
        self.save_durations: list[float] = []
        self.loads = 0
        self.load_seconds = 0.0
        self.last_pause_bytes = 0

    @property
    def bytes_written(self) -> int:
        return int(self.store.bytes_written)

    async def load(self, session_id: str) -> StoredSession | None:
        t0 = time.perf_counter()
        try:
            stored: StoredSession | None = await self.store.load(session_id)
            return stored
        finally:
            self.load_seconds += time.perf_counter() - t0
            self.loads += 1

    @property
    def _saves_inline(self) -> bool:  # the wrapped store's word: timing adds no await
        return bool(getattr(self.store, "_saves_inline", False))

    async def save(self, session_id: str, update: SessionUpdate) -> int:
        t0 = time.perf_counter()
        try:
            version: int = await self.store.save(session_id, update)
            return version
        finally:
            elapsed = time.perf_counter() - t0
            self.save_seconds += elapsed
            self.save_durations.append(elapsed)
            self.saves += 1
            if self.record_pause:
                self.last_pause_bytes = len(json.dumps(update.pause))

    async def pending_interrupts(self, query: PendingQuery | None = None) -> list[PendingInterrupt]:
        found: list[PendingInterrupt] = await self.store.pending_interrupts(query)
        return found

    async def list_sessions(self) -> list[str]:
        names: list[str] = await self.store.list_sessions()
        return names

    async def delete(self, session_id: str) -> None:
        await self.store.delete(session_id)

    def close(self) -> None:
        self.store.close()


# --- the agent the answer-path benches run ------------------------------------------------------


def _pay_reply(request: ModelRequest) -> Any:
    last = request.messages[-1]
    if any(isinstance(b, ToolResult) for b in last.content):
        return "done"
    return [ToolUse("p1", "pay", {"to": last.text})]


def _approve(event: BeforeToolCallEvent) -> None:
    if event.interrupt("approve") is not True:
        event.cancel("no")


def approval_agent(session: AgentSession, pay: AgentTool) -> Agent:
    """The agent of the answer-path benches on ``session``: its model asks for ``pay`` with the
    user's text, a before-tool hook asks for approval, then the model says "done"."""
    from interlude.testing import FunctionModel

    agent = Agent(
        FunctionModel(_pay_reply), tools=[pay], session=session.store, session_id=session.id
    )
    agent.hooks.add_callback(BeforeToolCallEvent, _approve)
    return agent
