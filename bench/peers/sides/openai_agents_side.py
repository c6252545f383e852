"""The OpenAI Agents SDK side of bench/peers: ``agents.Agent`` on the SDK's own
``agents.testing.ScriptedModel``, async function tools, ``Runner.run``, tracing disabled (it
would export to OpenAI). Approval is ``needs_approval=True``: the run stops with
``interruptions``, ``result.to_state()`` / ``RunState.approve`` resume it. The SDK persists
conversation items in ``SQLiteSession`` (saved per turn) but leaves the paused ``RunState`` to
the application: the SQLite round trips keep ``RunState.to_string()`` in a row of the session's
database file (one INSERT + COMMIT, one SELECT), the least an application must add."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from _harness import (
    Job,
    Result,
    Thunk,
    history_texts,
    import_time,
    main,
    measure,
    not_applicable,
)
from agents import Agent, Runner, RunState, SQLiteSession, function_tool, set_tracing_disabled
from agents.testing import ScriptedModel, assistant_message, function_call

set_tracing_disabled(True)
STATE_ROW = "SQLiteSession + RunState.to_string() in a SQLite row"


@function_tool
async def noop() -> str:
    """Do nothing."""
    return "ok"


@function_tool(needs_approval=True)
async def act(item: str) -> str:
    """Act on an item.

    Args:
        item: The item.
    """
    return f"did {item}"


def asks(n: int, tool: str = "noop", args: dict[str, Any] | None = None) -> list[Any]:
    return [[function_call(tool, args or {}, call_id=f"t{i}")] for i in range(n)]


DONE = [assistant_message("done")]


def cycle_agent(n: int) -> Agent[Any]:
    return Agent(name="bench", model=ScriptedModel([*asks(n), DONE]), tools=[noop])


def approval_agent(steps: list[Any]) -> Agent[Any]:
    return Agent(name="bench", model=ScriptedModel(steps), tools=[act])


ASK_ACT = asks(1, "act", {"item": "x"})


def _done(result: Any) -> None:
    assert not result.interruptions, result.interruptions
    assert result.final_output == "done", result.final_output


async def cycle(job: Job) -> Result:
    async def prepare(i: int) -> Thunk:
        agent = cycle_agent(job.per)

        async def run() -> None:
            _done(await Runner.run(agent, "go", max_turns=job.per + 5))

        return run

    api = "Agent + agents.testing.ScriptedModel, async no-op function_tool, Runner.run"
    return await measure(job, prepare, unit="us", api=api)


async def journaled(job: Job) -> Result:
    db = Path(job.tmp) / "journal.db"

    async def prepare(i: int) -> Thunk:
        agent = cycle_agent(job.per)
        session = SQLiteSession(f"c{i}", db)

        async def run() -> None:
            _done(await Runner.run(agent, "go", max_turns=job.per + 5, session=session))

        return run

    api = "Agent + ScriptedModel, SQLiteSession (conversation items saved per turn)"
    return await measure(job, prepare, unit="us", api=api)


async def approval_memory(job: Job) -> Result:
    async def prepare(i: int) -> Thunk:
        agent = approval_agent([*ASK_ACT, DONE])

        async def run() -> None:
            paused = await Runner.run(agent, "go")
            state = paused.to_state()
            for item in paused.interruptions:
                state.approve(item)
            _done(await Runner.run(agent, state))

        return run

    api = "function_tool(needs_approval=True); Runner.run, to_state(), approve, Runner.run(state)"
    return await measure(job, prepare, unit="us", api=api)


class StateRows:
    """Paused run states kept in a table of the session's SQLite file."""

    def __init__(self, db: Path) -> None:
        self.conn = sqlite3.connect(db, isolation_level=None)
        self.conn.execute("PRAGMA journal_mode = WAL")
        self.conn.execute("CREATE TABLE IF NOT EXISTS run_states (id TEXT PRIMARY KEY, state TEXT)")

    def put(self, sid: str, state: str) -> None:
        self.conn.execute("INSERT OR REPLACE INTO run_states VALUES (?, ?)", (sid, state))

    def get(self, sid: str) -> str:
        row = self.conn.execute("SELECT state FROM run_states WHERE id = ?", (sid,)).fetchone()
        return str(row[0])


async def pause(agent: Agent[Any], prompt: Any, session: SQLiteSession, rows: StateRows) -> None:
    paused = await Runner.run(agent, prompt, session=session)
    assert paused.interruptions, paused.final_output
    rows.put(session.session_id, paused.to_state().to_string())


async def resume(db: Path, sid: str, rows: StateRows) -> None:
    agent = approval_agent([DONE])
    state = await RunState.from_string(agent, rows.get(sid))
    for item in state.get_interruptions():
        state.approve(item)
    _done(await Runner.run(agent, state, session=SQLiteSession(sid, db)))


async def approval_sqlite(job: Job) -> Result:
    db = Path(job.tmp) / "approval.db"
    rows = StateRows(db)

    async def prepare(i: int) -> Thunk:
        async def run() -> None:
            sid = f"s{i}"
            await pause(approval_agent(ASK_ACT), "go", SQLiteSession(sid, db), rows)
            await resume(db, sid, rows)

        return run

    api = f"{STATE_ROW}; a fresh Agent resumes RunState.from_string"
    return await measure(job, prepare, unit="ms", api=api)


async def fresh_resume(job: Job) -> Result:
    db = Path(job.tmp) / "resume.db"
    rows = StateRows(db)
    talk = [{"role": role, "content": text} for role, text in history_texts(job.per)]

    async def prepare(i: int) -> Thunk:
        sid = f"r{i}"
        session = SQLiteSession(sid, db)
        await session.add_items(talk)  # type: ignore[arg-type]
        await pause(approval_agent(ASK_ACT), "one more", session, rows)
        return lambda: resume(db, sid, rows)

    api = f"{STATE_ROW}; a fresh Agent resumes a paused run"
    return await measure(job, prepare, unit="ms", api=api, per=1)


async def import_agent(job: Job) -> Result:
    return import_time(job, "from agents import Agent, Runner")


if __name__ == "__main__":
    main(
        "openai_agents",
        {
            "cycle": cycle,
            "journal": journaled,
            "approval-memory": approval_memory,
            "approval-sqlite": approval_sqlite,
            "graph-sqlite": not_applicable(
                "no graph of agents (handoffs and agents-as-tools, no two-node graph to pause)"
            ),
            "resume": fresh_resume,
            "postgres": not_applicable(
                "no PostgreSQL store among the pinned packages (SQLAlchemySession in "
                "agents.extensions needs SQLAlchemy and an async driver)"
            ),
            "import": import_agent,
        },
    )
