"""DBOS benchmark (issue 41): pause + answer on DBOS beside the embedded PostgreSQL path.

Three round trips of the same approval agent (bench/common.py's ``approval_agent``: the model
asks for ``pay``, a before-tool hook asks for approval, the answer lets the tool run, the model
says "done"), measured side by side in interleaved rounds (the order rotates each round), on
one PostgreSQL server:

- **embedded**: a ``PostgresStore`` agent pauses on the approval (pause leg), then a freshly
  built agent resumes it and the tool runs (answer leg), in this process (as bench/sessions.py).
- **interlude on DBOS**: a worker process (``interlude.dbos.worker`` on a throwaway database
  ``bench_dbos_*``) runs the same agent; this process is the client: ``interlude.dbos.start``
  until ``pending`` lists the question (pause leg), ``answer`` until the run has ended (answer
  leg).
- **DBOS minimal**: DBOS's own least cycle, the floor, with the dbos API directly in the same
  worker: a workflow started on the same queue takes one step, publishes an event, waits in
  ``recv``; the client sees the event, ``send``s, and the workflow ends.

The client polls (every ``POLL_MS``) for the pause and for the end alike on both DBOS paths;
both start on the queue a worker polls every 0.1 s, so the pause leg includes the wait for that
poll (shown apart: DBOS's ``dequeued_at - created_at``). Load averages are printed beside the
figures. The issue's budget: DBOS's pause + answer at most 1.5x the embedded path.

Run alone with  .venv/bin/python bench/dbos_bench.py [--quick] [-n ROUNDS]
(bench/bench.py --only dbos runs it too). Skipped, with a message, without PostgreSQL or dbos.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from common import Row, approval_agent, print_table, verdict_of

from interlude import AgentSession, App, tool

PG_DSN = os.environ.get("INTERLUDE_TEST_POSTGRES_DSN", "postgresql://postgres@127.0.0.1:5432/test")
RATIO_TARGET = 1.5  # issue 41: DBOS's pause + answer / the embedded PostgreSQL path
POLL_MS = 2.0  # the client's polling interval for a pause and for a run's end
WARM_UP = 3  # rounds not counted
MINIMAL = "bench.minimal"  # the minimal workflow's name
MINIMAL_TOPIC = "bench.answer"
MINIMAL_EVENT = "bench.waiting"
HERE = Path(__file__).resolve().parent
RAN: dict[str, int] = {}  # who -> how often the tool ran (in this process)

app = App()


@tool
def pay(to: str) -> str:
    """Pay someone.

    Args:
        to: Who.
    """
    RAN[to] = RAN.get(to, 0) + 1
    return "paid"


@app.agent("bench")
def _build(session: AgentSession) -> Any:
    return approval_agent(session, pay)


# --- the worker process --------------------------------------------------------------------


def _register_minimal() -> None:
    """DBOS's minimal cycle as a workflow of the worker (registered before it launches)."""
    from dbos import DBOS

    async def step() -> float:
        return time.time()

    @DBOS.workflow(name=MINIMAL)
    async def minimal(who: str) -> dict[str, Any]:
        await DBOS.run_step_async({"name": "bench.step"}, step)
        await DBOS.set_event_async(MINIMAL_EVENT, True)
        message = await DBOS.recv_async(MINIMAL_TOPIC, timeout_seconds=600)
        return {"who": who, "answer": message}


def worker_main(url: str, executor_id: str) -> None:
    """``bench/dbos_bench.py --worker URL ID``: serve until SIGTERM, then print the tool's runs."""
    import signal
    import threading

    from interlude.dbos import worker

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    _register_minimal()
    with worker(app, url, executor_id=executor_id):
        print("ready", flush=True)
        stop.wait()
    print(json.dumps({"ran": RAN}), flush=True)


# --- the client side -----------------------------------------------------------------------


@dataclass
class Trips:
    """One path's round trips: wall ms of each leg, client CPU ms, and (DBOS) the queue wait."""

    pause: list[float] = field(default_factory=list)
    answer: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)
    queued: list[float] = field(default_factory=list)
    net: list[float] = field(default_factory=list)  # pause + answer less the queue wait
    answered: list[float] = field(default_factory=list)  # answer(): ms until it returned
    worker_cpu_s: float = 0.0

    @property
    def total(self) -> list[float]:
        return [p + a for p, a in zip(self.pause, self.answer, strict=True)]


def _proc_cpu(pid: int) -> float:
    """CPU seconds (user + system, all threads) of process ``pid`` so far."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def _poll(check: Callable[[], Awaitable[bool]], what: str, within: float = 60.0) -> None:
    deadline = time.monotonic() + within
    while not await check():
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what} did not happen within {within} s")
        await asyncio.sleep(POLL_MS / 1e3)


class Bench:
    def __init__(self, url: str, store: Any, worker_pid: int) -> None:
        from dbos import DBOSClient, DBOSPortableJSONSerializer

        self.url, self.store, self.worker_pid = url, store, worker_pid
        self.client = DBOSClient(system_database_url=url, serializer=DBOSPortableJSONSerializer())
        self.found = {k: Trips() for k in ("embedded", "interlude", "minimal")}
        self.answered_ms = 0.0  # the last interlude trip's answer(): ms until it returned

    async def _status(self, sid: str) -> Any:
        found = await self.client.list_workflows_async(
            workflow_ids=[sid], load_input=False, load_output=False
        )
        return found[0] if found else None

    async def _ended(self, sid: str) -> None:
        async def done() -> bool:
            status = await self._status(sid)
            if status is not None and status.status not in ("PENDING", "ENQUEUED"):
                if status.status != "SUCCESS":
                    raise RuntimeError(f"{sid} ended {status.status}: {status.error!r}")
                return True
            return False

        await _poll(done, f"the end of {sid}")

    async def embedded(self, who: str) -> tuple[float, float]:
        """(pause leg ms, answer leg ms)."""
        session = AgentSession(id=f"e-{who}", store=self.store)
        t0 = time.perf_counter()
        paused = await approval_agent(session, pay).invoke_async(who)
        t1 = time.perf_counter()
        fresh = approval_agent(session, pay)
        result = await fresh.resume_async({paused.interrupts[0].id: True})
        t2 = time.perf_counter()
        assert result.stop_reason == "end_turn" and str(result) == "done", result
        return (t1 - t0) * 1e3, (t2 - t1) * 1e3

    async def interlude(self, who: str) -> tuple[float, float]:
        from interlude.dbos import answer, pending, start

        sid = f"i-{who}"
        found: list[Any] = []

        async def paused() -> bool:
            found[:] = [p for p in await pending(self.url, agent="bench") if p.session_id == sid]
            return bool(found)

        t0 = time.perf_counter()
        await start(self.url, "bench", sid, who)
        await _poll(paused, f"the pause of {sid}")
        t1 = time.perf_counter()
        await answer(self.url, sid, {found[0].interrupt.id: True}, by="bench")
        self.answered_ms = (time.perf_counter() - t1) * 1e3
        await self._ended(sid)
        t2 = time.perf_counter()
        return (t1 - t0) * 1e3, (t2 - t1) * 1e3

    async def minimal(self, who: str) -> tuple[float, float]:
        from interlude.dbos import QUEUE, VERSION

        sid = f"m-{who}"

        async def waiting() -> bool:
            got = await self.client.get_event_async(sid, MINIMAL_EVENT, timeout_seconds=0)
            return got is True

        t0 = time.perf_counter()
        options: Any = {
            "workflow_name": MINIMAL,
            "queue_name": QUEUE,
            "workflow_id": sid,
            "app_version": VERSION,
        }
        await self.client.enqueue_async(options, who)
        await _poll(waiting, f"the wait of {sid}")
        t1 = time.perf_counter()
        await self.client.send_async(sid, {"approved": True}, MINIMAL_TOPIC)
        await self._ended(sid)
        t2 = time.perf_counter()
        return (t1 - t0) * 1e3, (t2 - t1) * 1e3

    async def one(self, kind: str, who: str, keep: bool) -> None:
        gc.collect()
        cpu0, worker0 = time.process_time(), _proc_cpu(self.worker_pid)
        pause_ms, answer_ms = await getattr(self, kind)(who)
        cpu = (time.process_time() - cpu0) * 1e3
        worker_s = _proc_cpu(self.worker_pid) - worker0
        if not keep:
            return
        trips = self.found[kind]
        trips.pause.append(pause_ms)
        trips.answer.append(answer_ms)
        trips.cpu.append(cpu)
        if kind == "interlude":
            trips.answered.append(self.answered_ms)
        if kind != "embedded":
            trips.worker_cpu_s += worker_s
            status = await self._status(f"{kind[0]}-{who}")
            if status is not None and status.dequeued_at and status.created_at:
                queued = float(status.dequeued_at - status.created_at)
                trips.queued.append(queued)
                trips.net.append(pause_ms + answer_ms - queued)
        else:
            trips.net.append(pause_ms + answer_ms)

    async def rounds(self, n: int, loads: list[float]) -> None:
        kinds = list(self.found)
        for r in range(-WARM_UP, n):
            order = kinds[r % 3 :] + kinds[: r % 3]  # rotate: none always runs first
            for kind in order:
                await self.one(kind, f"r{r + WARM_UP}", keep=r >= 0)
            loads.append(os.getloadavg()[0])


def _server_url(database: str) -> str:
    base, _, query = PG_DSN.partition("?")
    return f"{base.rsplit('/', 1)[0]}/{database}" + (f"?{query}" if query else "")


def _skip_reason() -> str | None:
    try:
        import dbos  # noqa: F401
        import psycopg
    except ImportError as exc:
        return f"skipped: dbos or psycopg is missing ({exc}): pip install 'interlude-agents[dbos]'"
    try:
        psycopg.connect(PG_DSN, connect_timeout=3).close()
    except Exception as exc:
        detail = " ".join(str(exc).split())
        return f"skipped: PostgreSQL is not reachable at {PG_DSN} ({type(exc).__name__}: {detail})"
    return None


def _start_worker(url: str) -> subprocess.Popen[str]:
    argv = [sys.executable, str(HERE / "dbos_bench.py"), "--worker", url, "bench-worker-1"]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()  # "ready" once it serves (blocks until then)
    if line.strip() != "ready":
        proc.kill()
        raise RuntimeError(f"the DBOS worker did not start (said {line!r})")
    return proc


def _stop_worker(proc: subprocess.Popen[str]) -> dict[str, int]:
    proc.terminate()
    try:
        out, _ = proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        return {}
    for line in out.splitlines():
        if line.startswith("{"):
            return dict(json.loads(line)["ran"])
    return {}


def measure(n: int) -> tuple[dict[str, Trips], dict[str, Any]] | str:
    """The three paths, ``n`` interleaved rounds: their trips, and facts for the report."""
    skipped = _skip_reason()
    if skipped:
        return skipped
    import psycopg

    from interlude.dbos import close_clients
    from interlude.sessions import PostgresStore

    database = f"bench_dbos_{uuid.uuid4().hex[:10]}"
    schema = f"bench_dbos_{os.getpid()}"
    url = _server_url(database)
    facts: dict[str, Any] = {"load_before": os.getloadavg(), "loads": []}
    with psycopg.connect(PG_DSN, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{database}"')
    store = PostgresStore(PG_DSN, schema=schema)
    proc = None
    try:
        t0 = time.perf_counter()
        proc = _start_worker(url)
        facts["worker_start_s"] = time.perf_counter() - t0
        bench = Bench(url, store, proc.pid)
        try:
            asyncio.run(bench.rounds(n, facts["loads"]))
        finally:
            bench.client.destroy()
            close_clients()
        facts["load_after"] = os.getloadavg()
        facts["ran_worker"] = _stop_worker(proc)
        proc = None
        facts["ran_embedded"] = dict(RAN)
        return bench.found, facts
    finally:
        if proc is not None:
            proc.kill()
            proc.wait()
        store.close()
        with psycopg.connect(PG_DSN, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
            conn.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')


def _fmt_load(load: tuple[float, float, float]) -> str:
    return "/".join(f"{x:.2f}" for x in load)


def run(quick: bool, rounds: int | None = None) -> None:
    n = rounds or (10 if quick else 40)
    title = (
        f"l) DBOS: pause + answer of one approval, {n} interleaved rounds, beside the embedded "
        "PostgreSQL path (bench/dbos_bench.py)"
    )
    found = measure(n)
    if isinstance(found, str):
        print(f"\n{title}\n   {found}")
        return
    trips, facts = found
    med = statistics.median
    emb, itl, mini = trips["embedded"], trips["interlude"], trips["minimal"]
    names = {
        "embedded": "embedded PostgresStore",
        "interlude": "interlude on DBOS",
        "minimal": "DBOS minimal",
    }
    rows = []
    for kind, t in trips.items():
        rows.append(Row(f"{names[kind]}: pause + answer", t.total, "ms"))
        rows.append(Row("  pause leg (start -> question pending)", t.pause, "ms"))
        rows.append(Row("  answer leg (answer -> run finished)", t.answer, "ms"))
    if itl.answered:
        rows.append(Row("interlude on DBOS: answer() returned (outcome event)", itl.answered, "ms"))
    for kind in ("interlude", "minimal"):
        if trips[kind].queued:
            queued = trips[kind].queued
            rows.append(Row(f"{names[kind]}: queue wait, in the pause leg", queued, "ms"))
            rows.append(
                Row(f"{names[kind]}: pause + answer less queue wait", trips[kind].net, "ms")
            )
    for kind, t in trips.items():
        rows.append(Row(f"{names[kind]}: client CPU per trip, polls included", t.cpu, "ms"))
    print_table(title, rows)
    loads = facts["loads"]
    print(
        f"   load average (1/5/15 min) {_fmt_load(facts['load_before'])} before, "
        f"{_fmt_load(facts['load_after'])} after; 1-min load over the rounds "
        f"{min(loads):.2f}-{max(loads):.2f} (median {med(loads):.2f}); {os.cpu_count()} CPUs; "
        f"worker started in {facts['worker_start_s']:.1f} s; the client polls every {POLL_MS:g} ms"
    )
    for kind in ("interlude", "minimal"):
        t = trips[kind]
        print(
            f"   worker CPU per trip ({names[kind]}, mean, all its threads incl. idle polling): "
            f"{t.worker_cpu_s * 1e3 / len(t.pause):.1f} ms"
        )
    ran_w, ran_e = facts["ran_worker"], facts["ran_embedded"]
    off = sorted(w for w, k in {**ran_w, **ran_e}.items() if k != 1)
    print(
        f"   tool runs: {sum(ran_e.values())} embedded and {sum(ran_w.values())} on DBOS for "
        f"{n + WARM_UP} rounds each (not exactly once: {off or 'none'})"
    )
    legs = (("pause + answer", "total"), ("pause leg", "pause"), ("answer leg", "answer"))
    for label, attr in legs:
        e, i, m = (med(getattr(t, attr)) for t in (emb, itl, mini))
        print(
            f"   {label}: interlude on DBOS / embedded {i / e:.2f}x, "
            f"DBOS minimal / embedded {m / e:.2f}x, interlude on DBOS / DBOS minimal {i / m:.2f}x"
        )
    if itl.net and mini.net:
        e, i, m = med(emb.net), med(itl.net), med(mini.net)
        print(
            "   pause + answer less the queue wait (the 0.1 s poll of a worker for new runs; "
            f"per trip): interlude on DBOS / embedded {i / e:.2f}x, "
            f"DBOS minimal / embedded {m / e:.2f}x, interlude on DBOS / DBOS minimal {i / m:.2f}x"
        )
    ratio = med(itl.total) / med(emb.total)
    print(
        f"   issue 41 budget: DBOS pause + answer / embedded PostgreSQL path: {ratio:.2f}x  "
        f"target <= {RATIO_TARGET}x  {verdict_of(ratio, RATIO_TARGET)}"
    )
    own, how = med(itl.total) / med(mini.total), "pause + answer"
    if itl.net and mini.net:
        own, how = med(itl.net) / med(mini.net), "pause + answer less the queue wait"
    print(
        f"   (information, not the issue's budget) interlude on DBOS / DBOS's own minimal "
        f"cycle, {how}: {own:.2f}x (the research note's proposed target: <= {RATIO_TARGET}x)"
    )


def main() -> None:
    global POLL_MS
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="few rounds: a smoke run")
    parser.add_argument("-n", type=int, default=None, help="rounds (default 40, quick 10)")
    parser.add_argument(
        "--poll-ms",
        type=float,
        default=POLL_MS,
        help=f"the client's polling interval for a pause and a run's end (default {POLL_MS:g})",
    )
    parser.add_argument("--worker", nargs=2, metavar=("URL", "EXECUTOR_ID"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker_main(*args.worker)
        return
    POLL_MS = args.poll_ms
    run(args.quick, args.n)


if __name__ == "__main__":
    main()
