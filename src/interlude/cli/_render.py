"""What the ``interlude`` command prints: rich text for people, JSON for scripts."""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from .._messages import Image, Json, Message, Reasoning, Text, ToolResult, ToolUse

if TYPE_CHECKING:
    from .. import AgentResult, Interrupt
    from .._agent import Position
    from ..sessions import PendingInterrupt

__all__ = ["Output", "audit_line", "claim_words", "program", "short_id", "show_command"]

ROW_WIDTH = 120  # `interlude pending` keeps its rows this narrow


def program() -> str:
    """How to run this command again from the same folder, for the commands it suggests.

    ``interlude`` when that name on PATH is this installation's; otherwise the way this
    process was started: ``.venv/bin/interlude`` when run by that path without activating the
    venv, ``.venv/bin/python -m interlude`` for ``-m``. A path inside the current folder is
    shown relative to it, as the user typed it."""
    import os
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
    import os
    import shlex

    if os.path.isabs(path):
        rel = os.path.relpath(path)
        if not rel.startswith(os.pardir):
            path = rel
    elif os.sep not in path:
        path = os.path.join(os.curdir, path)  # a bare name in this folder is not on PATH
    return shlex.quote(path)


def _printable(text: str) -> str:
    """``text`` with lone surrogates (a model's reply can hold one) written as ``\\udxxx``:
    UTF-8 output cannot carry them, and printing one would end the command with a traceback."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


class Output:
    """Prints for a person (colour and a spinner when ``rich`` is installed and on a terminal)
    or, with ``json_mode``, one JSON document per command for scripts."""

    def __init__(self, *, json_mode: bool, app: str | None = None) -> None:
        self.json_mode = json_mode
        self.app = app  # the --app in use (flag or $INTERLUDE_APP), for suggested commands
        self._console: Any = None
        try:
            from rich.console import Console

            self._console = Console(highlight=False, soft_wrap=True)
        except ImportError:  # pragma: no cover - rich is in the [cli] extra
            pass

    # --- plumbing ------------------------------------------------------------------------

    def _say(self, text: str = "", style: str | None = None) -> None:
        text = _printable(text)
        if self._console is not None:
            self._console.print(text, style=style, markup=False)
        else:  # pragma: no cover
            print(text)

    def _json(self, data: Any) -> None:
        print(_printable(json.dumps(data, indent=2, ensure_ascii=False)))

    def error(
        self, message: str, *, session: str | None = None, code: str | None = None
    ) -> None:
        """One line on stderr; with ``--json``, also ``{"error", "session"}`` on stdout, and
        ``code`` for a refused answer (the code every door gives it)."""
        line = " ".join(message.split())
        print(f"interlude: error: {line}", file=sys.stderr)
        if self.json_mode:
            self.error_json(line, session, code)

    def error_json(
        self, message: str, session: str | None = None, code: str | None = None
    ) -> None:
        body: dict[str, Any] = {"error": message, "session": session}
        if code is not None:
            body["code"] = code
        self._json(body)

    @contextlib.contextmanager
    def working(self, label: str) -> Iterator[None]:
        """A spinner on stderr while the agent runs (only on a terminal, never with --json)."""
        if self.json_mode or self._console is None or not sys.stderr.isatty():
            yield
            return
        from rich.console import Console

        with Console(stderr=True).status(label):
            yield

    # --- commands ------------------------------------------------------------------------

    def intro(self, store: str, session_id: str, prompt: str) -> None:
        if self.json_mode:
            return
        self._say("Interlude demo: an agent that stops to ask before a risky tool.", "bold")
        self._say(f"store: {store}   session: {session_id}\n", "dim")

    def answering(self, question: Interrupt) -> None:
        """The question an answer goes to, as the session's pause holds it (not the pending
        index, which is not signed)."""
        if not self.json_mode:
            self._say(f"answering {question.name}: {_shown(question)}", "dim")

    def outcome(
        self, session_id: str, result: AgentResult, new: list[Message], store: str, *, first: bool
    ) -> None:
        """How a run ended; ``new`` are the messages it added."""
        if self.json_mode:
            self._json(
                {
                    "session": session_id,
                    "stop_reason": result.stop_reason,
                    "reply": str(result),
                    "interrupts": [_interrupt_json(i) for i in result.interrupts],
                }
            )
            return
        if not first:
            self._say(f"session {session_id}: resumed")
        for line in _transcript(new):
            self._say(line)
        if result.stop_reason != "interrupt":
            self._say(f"\nThe run ended ({result.stop_reason}).", "bold green")
            return
        self._say(f"\nPaused: {len(result.interrupts)} question(s) wait for a person.", "bold")
        for i in result.interrupts:
            self._say(f"  {i.name}: {_shown(i)}")
            self._say(f"    id: {i.id}", "dim")
        self._say(
            "\nThe pause is saved in the store; this process can end now. From any other process:"
        )
        flag = _store_flag(store)
        me = program()
        self._say(f"  {me} pending{flag}")
        for i in result.interrupts:
            self._say(f"  {me} answer{flag}{_app_flag(self.app)} {session_id} {i.id} true", "cyan")
        self._say("(answer false, or any JSON, to decline)", "dim")

    def pending(
        self, entries: list[PendingInterrupt], now: float, store: str, *, flags: str | None = None
    ) -> None:
        """``flags``: the options naming where the sessions are, for the answer command shown
        (default: ``--store``'s, unless it is the default store)."""
        if self.json_mode:
            self._json(
                [
                    {
                        "session": e.session_id,
                        **_interrupt_json(e.interrupt),
                        "short_id": short_id(e.interrupt.id),
                        "raised_at": e.raised_at,
                        "age_seconds": round(now - e.raised_at, 1),
                    }
                    for e in entries
                ]
            )
            return
        if not entries:
            self._say("No interrupts are waiting for an answer.")
            return
        where = _store_flag(store) if flags is None else flags
        head = ("ID", "SESSION", "NAME", "AGE", "WHAT WAS SHOWN")
        rows = [
            (
                short_id(e.interrupt.id),
                e.session_id,
                _named(e.interrupt),
                _age(now - e.raised_at),
                _shown(e.interrupt),
            )
            for e in entries
        ]
        widths = [max(len(r[k]) for r in [head, *rows]) for k in range(4)]
        for r in [head, *rows]:
            cells = [c.ljust(w) for c, w in zip(r[:4], widths, strict=True)]
            line = "  ".join(cells) + "  "
            room = max(ROW_WIDTH - len(line), 20)
            what = r[4] if len(r[4]) <= room else r[4][: room - 3] + "..."
            self._say((line + what).rstrip(), "bold" if r is head else None)
        self._say(
            f"\nAnswer: {program()} answer{where}{_app_flag(self.app)} SESSION ID "
            "true|false|JSON"
            " (pending --json lists all in full)",
            "dim",
        )

    def sessions(self, rows: list[dict[str, Any]]) -> None:
        if self.json_mode:
            self._json(rows)
            return
        if not rows:
            self._say("The store holds no sessions.")
            return
        head = ("SESSION", "STATE", "MESSAGES")
        table = [head] + [
            (r["session"], _state_words(r["state"], r["questions"]), str(r["messages"]))
            for r in rows
        ]
        widths = [max(len(r[k]) for r in table) for k in range(2)]
        for r in table:
            line = "  ".join([r[0].ljust(widths[0]), r[1].ljust(widths[1]), r[2]])
            self._say(line.rstrip(), "bold" if r is head else None)

    def discarded(self, session_id: str, what: str, interrupts: list[str]) -> None:
        if self.json_mode:
            self._json({"session": session_id, "discarded": what, "interrupts": interrupts})
            return
        self._say(
            f"session {session_id}: discarded the {what}; its open tool calls are now "
            "cancelled, and the session takes new prompts."
        )

    def deleted(self, session_id: str) -> None:
        if self.json_mode:
            self._json({"session": session_id, "deleted": True})
            return
        self._say(f"session {session_id}: deleted.")

    def show(
        self,
        session_id: str,
        version: int,
        messages: list[Message],
        pause: Position | None,
        state: dict[str, Any],
        *,
        claim: dict[str, Any] | None = None,
        agent: str | None = None,
        audit: list[dict[str, Any]] | None = None,
        chain: str | None = None,
    ) -> None:
        """A session: its conversation, state of play and audit trail (answers given), with
        what its chain says (``chain``)."""
        audit = audit or []
        interrupts = [] if pause is None else pause.interrupts
        stopped = pause is not None and not interrupts and claim is None
        decisions, votes = _decisions_and_votes(pause, audit)
        if self.json_mode:
            self._json(
                {
                    "session": session_id,
                    "version": version,
                    "messages": [m.to_dict() for m in messages],
                    "paused": bool(interrupts),
                    "running": claim,
                    "stopped": stopped,
                    "interrupts": [_interrupt_json(i) for i in interrupts],
                    "state": state,
                    "agent": agent,
                    "audit": audit,
                    "audit_chain": chain,
                    "decisions": decisions,
                    "votes": {k: {"answer": a, "by": list(b)} for k, (a, b) in votes.items()},
                }
            )
            return
        who = "no agent name" if agent is None else f"agent {agent}"
        self._say(
            f"session {session_id} ({who}, version {version}, {len(messages)} messages)", "bold"
        )
        for line in _transcript(messages):
            self._say(line)
        if claim is not None:
            self._say(f"\nA run is in progress: {claim_words(claim)}.", "yellow")
        elif stopped:
            self._say(
                "\nA run stopped before it finished (its process ended); carry it on with "
                f"`{program()} recover{_app_flag(self.app)} {session_id}`.",
                "yellow",
            )
        elif pause is None:
            self._say("\nNot paused.")
        else:
            self._say(f"\nPaused, waiting on {len(interrupts)} question(s):", "bold")
            for i in interrupts:
                self._say(f"  {i.name}: {_shown(i)}")
                voters = votes.get(i.id, (None, ()))[1]
                if i.quorum > 1:
                    names = f": {', '.join(voters)}" if voters else ""
                    self._say(f"    {len(voters)} of {i.quorum} approvals{names}")
                self._say(f"    id: {i.id}", "dim")
        if decisions:
            self._say("\nRemembered decisions:", "bold")
            for tool, d in sorted(decisions.items()):
                verdict = "approve" if d.get("approve") else "decline"
                note = f" (note: {d['note']})" if d.get("note") else ""
                self._say(f"  {tool}: {verdict}, for the {d.get('scope')}{note}")
        if audit:
            self._say(f"\nAudit trail ({len(audit)}):", "bold")
            for entry in audit:
                self._say(f"  {audit_line(entry)}")
            if chain is not None:
                broken = chain.startswith("broken")
                self._say(f"  chain: {chain}", "red" if broken else "dim")

    def serving(self, url: str, token: str | None, name: str, store: str, *, worker: bool) -> None:
        """Where the inbox listens, and how to sign in (a made-up token is printed once)."""
        if self.json_mode:
            info = {"url": url, "login": f"{url}/login", "token": token, "worker": worker}
            print(json.dumps(info), flush=True)  # one line: the server keeps running after it
            return
        self._say(f"Interlude inbox on {url}  (store: {store})", "bold")
        self._say(f"Open {url}/login and sign in with a token.")
        if token is not None:
            self._say(f"  token for {name} (this run only, shown once): {token}", "cyan")
            self._say(
                "  (set INTERLUDE_TOKENS=token=name or --tokens FILE to keep tokens across runs)",
                "dim",
            )
        if worker:
            self._say("A worker in this process carries sessions on once answered.", "dim")
        else:
            self._say(
                f"Answers are recorded; run `{program()} worker{_store_flag(store)}"
                f"{_app_flag(self.app)}` to carry sessions on (or serve --worker).",
                "dim",
            )
        self._say("Ctrl-C stops.", "dim")
        sys.stdout.flush()

    def working_forever(self, store: str, which: str) -> None:
        if not self.json_mode:
            self._say(f"Worker on {store} ({which}); Ctrl-C stops.", "bold")

    def worked(self, handled: int, failed: dict[str, str]) -> None:
        """What a worker did: sessions carried on, and the ones that failed."""
        if self.json_mode:
            self._json({"handled": handled, "failed": failed})
            return
        self._say(f"worker: carried on {handled} session(s).")
        for session_id, why in failed.items():
            self._say(f"  session {session_id}: failed: {why}", "red")


def _decisions_and_votes(
    pause: Position | None, audit: list[dict[str, Any]]
) -> tuple[dict[str, dict[str, Any]], dict[str, tuple[Any, tuple[str, ...]]]]:
    """The approval decisions remembered (as ``Agent.decisions`` gives them, every audit entry
    counted: ``show`` has no signing key) and the votes so far toward a quorum."""
    from .._agent import remembered_decisions
    from .._audit import AuditEntry
    from ..errors import StateFormatError

    entries = []
    for entry in audit:
        try:
            entries.append(AuditEntry.from_dict(entry))
        except StateFormatError:
            continue  # the chain line reports a damaged trail
    run = {} if pause is None else pause.progress.decisions
    votes = {} if pause is None else dict(pause.progress.votes)
    return remembered_decisions(entries, run, False), votes


def audit_line(entry: dict[str, Any]) -> str:
    """One audit entry in words: ``2026-11-23 17:40:02  ana answered approve: true  (shown
    sha256:1a2b3c4d)``."""
    at = entry.get("at")
    when = _clock(at) if isinstance(at, int | float) else "(no time)"
    name = entry.get("name") or entry.get("interrupt_id") or "?"
    answer = json.dumps(entry.get("answer"), ensure_ascii=False)
    if len(answer) > 80:
        answer = answer[:77] + "..."
    by = entry.get("by") or "unknown"
    if entry.get("expired"):
        line = f"{when}  {name} expired unanswered: {answer}"
    else:
        line = f"{when}  {by} answered {name}: {answer}"
        vote = entry.get("vote")
        if isinstance(vote, list) and len(vote) == 2:
            line += f" (vote {vote[0]} of {vote[1]})"
    shown = entry.get("shown")
    if isinstance(shown, str) and shown:
        algorithm, _, digest = shown.rpartition(":")
        line += f"  (shown {algorithm + ':' if algorithm else ''}{digest[:8]})"
    return line


def show_command(session_id: str, store: str) -> str:
    """The command that shows a session."""
    return f"{program()} show{_store_flag(store)} {session_id}"


def short_id(interrupt_id: str) -> str:
    """The 8-character id ``interlude pending`` shows and ``interlude answer`` accepts."""
    import hashlib

    return hashlib.sha256(interrupt_id.encode()).hexdigest()[:8]


def claim_words(claim: dict[str, Any], now: float | None = None) -> str:
    """Who holds a run claim, since when and until when, in words."""
    import time

    now = time.time() if now is None else now
    parts = [f"held by {claim.get('owner') or 'an unnamed process'}"]
    since = claim.get("since")
    if isinstance(since, int | float):
        parts.append(f"since {_clock(since)} ({_age(now - since)} ago)")
    expires = claim.get("expires_at")
    if isinstance(expires, int | float):
        parts.append(
            f"its claim runs out at {_clock(expires)} (in {_age(expires - now)}) unless renewed"
        )
    return ", ".join(parts)


def _clock(when: float) -> str:
    import time

    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(when))


def _state_words(state: str, questions: int) -> str:
    if state == "paused":
        return f"paused: {questions} question{'' if questions == 1 else 's'}"
    return {"stopped": "stopped run", "running": "running", "idle": "idle"}.get(state, state)


def _app_flag(app: str | None) -> str:
    """`` --app X`` unless no --app is in use, or it comes from $INTERLUDE_APP."""
    import os
    import shlex

    if app is None or app == os.environ.get("INTERLUDE_APP"):
        return ""
    return f" --app {shlex.quote(app)}"


def _store_flag(store: str) -> str:
    return "" if store == _default_store() else f" --store '{store}'"


def _default_store() -> str:
    import os

    from ._defaults import DEFAULT_STORE

    return os.environ.get("INTERLUDE_STORE", DEFAULT_STORE)


def node_of(i: Interrupt) -> str | None:
    """The node of a graph (or swarm) that asked ``i`` ("writer"; "outer/inner" through a
    nested one), None for an agent's own question."""
    if not any(u.id.startswith("node:") for u in i.via):
        return None  # the usual case: interlude.multiagent is not imported for it
    from ..multiagent import describe_node

    return describe_node(i)


def _interrupt_json(i: Interrupt) -> dict[str, Any]:
    node = node_of(i)
    return {
        "id": i.id,
        "name": i.name,
        **({"node": node} if node is not None else {}),
        "reason": i.reason,
        "source": i.source,
        "tool": None if i.tool_use is None else i.tool_use.name,
        "input": None if i.tool_use is None else i.tool_use.input,
        "shown": i.digest,
        "response_schema": i.response_schema,
        "expires_at": i.expires_at,
        **({"default": i.default} if i.has_default else {}),
    }


def _named(i: Interrupt) -> str:
    """A question's name, with the node that asked it ("city (node writer)")."""
    node = node_of(i)
    return i.name if node is None else f"{i.name} (node {node})"


def _shown(i: Interrupt) -> str:
    what = "" if i.tool_use is None else f"{i.tool_use.name} {json.dumps(i.tool_use.input)}"
    reason = "" if i.reason is None else json.dumps(i.reason, ensure_ascii=False)
    shown = " - ".join(x for x in (what, reason) if x) or "(no details)"
    if i.expires_at is not None:
        import time

        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(i.expires_at))
        passed = i.expires_at <= time.time()  # first, so that a narrow row keeps it
        shown = (
            f"[expired {when}: settle with expire] {shown}"
            if passed
            else (f"[deadline {when}] {shown}")
        )
    return shown


def _age(seconds: float) -> str:
    seconds = max(seconds, 0.0)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{int(seconds // size)}{unit}"
    return f"{int(seconds)}s"


def _transcript(messages: list[Message]) -> Iterator[str]:
    for m in messages:
        for block in m.content:
            if isinstance(block, Text) and block.text:
                yield f"{m.role}: {block.text}"
            elif isinstance(block, ToolUse):
                yield f"  -> {block.name} {json.dumps(block.input)}"
            elif isinstance(block, ToolResult):
                yield f"  <- {block.status}: {_result_text(block)}"
            elif isinstance(block, Reasoning):
                yield f"  (thinking) {block.text[:80]}"
            elif isinstance(block, Image):
                yield f"{m.role}: [image {block.media_type}]"


def _result_text(result: ToolResult) -> str:
    parts = [
        b.text if isinstance(b, Text) else json.dumps(b.value) if isinstance(b, Json) else "[image]"
        for b in result.content
    ]
    text = " ".join(parts)
    return text if len(text) <= 160 else text[:157] + "..."
