"""Agents as DBOS workflows on your own PostgreSQL: the loop in workflow code, model calls and
tool bodies as steps, pauses as durable waits for answers sent as messages
(``pip install 'interlude-agents[dbos]'``).

::

    with interlude.dbos.worker(app, "postgresql://...", executor_id="worker-1"):
        ...  # serves until the block ends (or run_worker(...) until SIGTERM)

    await interlude.dbos.start(url, "assistant", "s-1", "Book a flight")
    for p in await interlude.dbos.pending(url):
        await interlude.dbos.answer(url, p.session_id, {p.interrupt.id: True}, by="ana")

A paused run moves in and out (``interlude.operate.move(sid, source=DbosPlace(url),
target=...)``, ``interlude move``); ``start(url, agent, sid, state=...)`` carries on an
``export_state()``.

Only a worker launches DBOS; the other functions use a ``DBOSClient``. Everything written to
the system database is JSON (never pickle). See docs/dbos.md.
"""

from __future__ import annotations

from ._client import AnswerTimeoutError, answer, close_clients, pending, result, start
from ._common import QUEUE, TOPIC, VERSION, WORKFLOW
from ._executor import DBOSExecutor
from ._inbox import DBOSInbox, describe, view_of, wait_outcome
from ._moving import DbosPlace
from ._worker import run_worker, worker

__all__ = [
    "QUEUE",
    "TOPIC",
    "VERSION",
    "WORKFLOW",
    "AnswerTimeoutError",
    "DBOSExecutor",
    "DbosPlace",
    "DBOSInbox",
    "answer",
    "close_clients",
    "describe",
    "pending",
    "result",
    "run_worker",
    "start",
    "view_of",
    "wait_outcome",
    "worker",
]
