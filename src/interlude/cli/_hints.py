"""The commands the ``interlude`` command suggests as next steps.

Each is printed on a line of its own and complete: how this command was started, the
``--store`` and ``--app`` in use, and an answer the question takes. Run as printed, it works:
a step that cannot be written out that way (an agent the app in use lacks, a question whose
answer must be typed) is said in words instead.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .._interrupt import Interrupt
    from .._messages import JsonValue

__all__ = [
    "Hint",
    "answer_hints",
    "app_flag",
    "program",
    "sample_answer",
    "short_id",
    "show_command",
    "store_flag",
]

Hint = tuple[str, str | None]
"""A line to print and its style."""


def program() -> str:
    """How to run this command again from the same folder, for the commands it suggests.

    ``interlude`` when that name on PATH is this installation's; otherwise the way this
    process was started: ``.venv/bin/interlude`` when run by that path without activating the
    venv, ``.venv/bin/python -m interlude`` for ``-m``. A path inside the current folder is
    shown relative to it, as the user typed it."""
    import shutil

    here = os.path.dirname(os.path.abspath(sys.executable))  # a venv's bin, links unresolved
    on_path = shutil.which("interlude")
    if on_path is not None and os.path.dirname(os.path.abspath(on_path)) == here:
        return "interlude"
    argv0 = sys.argv[0] if sys.argv and sys.argv[0] else ""
    if os.path.basename(argv0) in ("interlude", "interlude.exe"):
        return _as_typed(argv0)
    if shutil.which("python3") == sys.executable or shutil.which("python") == sys.executable:
        return f"{os.path.basename(sys.executable)} -m interlude"
    return f"{_as_typed(sys.executable)} -m interlude"


def _as_typed(path: str) -> str:
    """``path`` quoted for a shell; relative (``./x``-free) when it lies inside this folder."""
    if os.path.isabs(path):
        rel = os.path.relpath(path)
        if not rel.startswith(os.pardir):
            path = rel
    elif os.sep not in path:
        path = os.path.join(os.curdir, path)  # a bare name in this folder is not on PATH
    return shlex.quote(path)


def app_flag(app: str | None) -> str:
    """`` --app X`` unless no --app is in use, or it comes from $INTERLUDE_APP."""
    if app is None or app == os.environ.get("INTERLUDE_APP"):
        return ""
    return f" --app {shlex.quote(app)}"


def store_flag(store: str) -> str:
    """`` --store 'URL'`` unless ``store`` is the default one ($INTERLUDE_STORE, else the
    demo's file), which a command run from the same shell finds without it."""
    if store == _default_store():
        return ""
    quoted = f"'{store}'" if "'" not in store else shlex.quote(store)
    return f" --store {quoted}"


def _default_store() -> str:
    from ._defaults import DEFAULT_STORE

    return os.environ.get("INTERLUDE_STORE", DEFAULT_STORE)


def show_command(session_id: str, store: str) -> str:
    """The command that shows a session (no --app: show reads the store only)."""
    return f"{program()} show{store_flag(store)} {shlex.quote(session_id)}"


def short_id(interrupt_id: str) -> str:
    """The 8-character id ``interlude pending`` shows and ``answer`` and ``fork`` accept."""
    import hashlib

    return hashlib.sha256(interrupt_id.encode()).hexdigest()[:8]


def sample_answer(question: Interrupt) -> tuple[JsonValue, ...]:
    """The answers to suggest for ``question``, first the one to print: ``true`` where it
    takes one (a yes/no question, or one with no response schema), else its schema's
    choices (``enum``, ``const``), else its default; for a call in doubt (no schema says
    what it takes), ``"fail"`` (the safe one), ``"rerun"`` or the result the call had. Empty
    when none of them is an answer its schema takes: the person has to write one."""
    from .._typed import answer_problem

    schema = question.response_schema
    if schema is None and question.source == "in_doubt" and question.name == "in_doubt":
        # a call stopped mid-run: its answers are checked by the loop, not by a schema
        return ("fail", "rerun", {"result": "..."})
    if schema is None:
        return (True, False)
    candidates: list[JsonValue] = [True, False]
    for node in [schema, *_alternatives(schema)]:
        if isinstance(node.get("enum"), list):
            candidates.extend(node["enum"])
        if "const" in node:
            candidates.append(node["const"])
    if question.has_default:
        candidates.append(question.default)
    taken: dict[str, JsonValue] = {}  # by their JSON: 1 and true are different answers
    for value in candidates:
        key = json.dumps(value, sort_keys=True)
        if key not in taken and answer_problem(schema, value) is None:
            taken[key] = value
    return tuple(taken.values())


def _alternatives(schema: dict[str, JsonValue]) -> list[dict[str, JsonValue]]:
    out: list[dict[str, JsonValue]] = []
    for key in ("anyOf", "oneOf"):
        options = schema.get(key)
        if isinstance(options, list):
            out.extend(o for o in options if isinstance(o, dict))
    return out


def answer_hints(
    session_id: str,
    questions: Sequence[Interrupt],
    flags: str,
    *,
    expire: bool = True,
    short: bool = False,
    lead: str = "",
) -> list[Hint]:
    """The commands that answer ``questions`` of ``session_id`` (one per question, by its
    ``short`` id or in full), with ``flags`` (``--store``/``--app``, or ``--temporal``) after
    the command's name and ``lead`` before it; an expired one is settled with ``expire``
    (unless ``expire`` is False: a workflow settles its own). Then a line saying what else
    each takes."""
    me = program() + lead
    session = shlex.quote(session_id)
    lines: list[Hint] = []
    notes: list[Hint] = []
    expired = False
    for q in questions:
        if expire and q.expires_at is not None and q.expires_at <= time.time():
            expired = True
            continue
        answers = sample_answer(q)
        if not answers:
            notes.append(
                (
                    f"(question {short_id(q.id)} takes an answer matching its response schema: "
                    f"`{me} show{flags} {session} --json` gives it)",
                    "dim",
                )
            )
            continue
        value = shlex.quote(json.dumps(answers[0], ensure_ascii=False))
        which = short_id(q.id) if short else shlex.quote(q.id)
        lines.append((f"  {me} answer{flags} {session} {which} {value}", "cyan"))
        notes.append((_takes(q, answers), "dim"))
    if expired:
        lines.append((f"  {me} expire{flags} {session}", "cyan"))
        notes.append(("(expire settles the questions whose deadline passed)", "dim"))
    return lines + list(dict.fromkeys(notes))


def _takes(question: Interrupt, answers: tuple[JsonValue, ...]) -> str:
    if answers[:2] == (True, False) and all(isinstance(a, bool) for a in answers[:2]):
        if question.response_schema is None:
            return "(answer false, or any JSON, to decline)"
        return "(answer false to decline)"
    shown = ", ".join(json.dumps(a, ensure_ascii=False) for a in answers)
    return f"({question.name} takes {shown})"


def app_missing(agent: str | None, agents: frozenset[str], app: str | None) -> str | None:
    """Why no command can be written out for a session of ``agent``: the app in use (``app``,
    None for the built-in demo app), whose ``agents`` these are, lacks it. None when it has
    it."""
    if agent is not None and agent in agents:
        return None
    if agent is None:
        return (
            "a session that records no agent name takes --app MODULE:ATTR naming your App "
            "and --agent NAME naming the agent that runs it"
        )
    if app is None:
        return (
            f"agent {agent!r} is not in the built-in demo app: add --app MODULE:ATTR naming "
            "the App that registers it"
        )
    return f"agent {agent!r} is not in --app {app}: pass the --app that registers it"
