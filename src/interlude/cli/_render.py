"""What the ``interlude`` command prints: rich text for people, JSON for scripts."""

from __future__ import annotations

import contextlib
import json
import shlex
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from ._hints import Hint, answer_hints, app_flag, app_missing, program, short_id, store_flag
from ._words import (
    _age,
    _decisions_and_votes,
    _interrupt_json,
    _named,
    _shown,
    _state_words,
    _transcript,
    audit_line,
    claim_words,
)

if TYPE_CHECKING:
    from .. import AgentResult, Interrupt
    from .._agent import Position
    from .._messages import Message
    from ..sessions import PendingInterrupt

__all__ = ["Output"]

ROW_WIDTH = 120  # `interlude pending` keeps its rows this narrow


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

    def error(self, message: str, *, session: str | None = None, code: str | None = None) -> None:
        """One line on stderr; with ``--json``, also ``{"error", "session"}`` on stdout, and
        ``code`` for a refused answer (the code every door gives it)."""
        line = " ".join(message.split())
        print(f"interlude: error: {line}", file=sys.stderr)
        if self.json_mode:
            self.error_json(line, session, code)

    def error_json(self, message: str, session: str | None = None, code: str | None = None) -> None:
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
        flags = store_flag(store) + app_flag(self.app)
        self._say(f"  {program()} pending{flags}")
        self.hints(answer_hints(session_id, result.interrupts, flags))

    def hints(self, lines: list[Hint]) -> None:
        """Print suggested commands (see ``_hints``)."""
        for line, style in lines:
            self._say(line, style)

    def pending(
        self,
        entries: list[PendingInterrupt],
        now: float,
        store: str,
        *,
        flags: str | None = None,
        agents: frozenset[str] | None = None,
    ) -> None:
        """``flags``: the options naming where the sessions are, for the answer command shown
        (default: ``--store``'s, unless it is the default store, and ``--app``'s); ``agents``:
        the agents of the app in use, when it matters (the sessions of others are answered
        with another --app, which is said)."""
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
        where = store_flag(store) + app_flag(self.app) if flags is None else flags
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
        self._pending_hints(entries, where, agents, expire=flags is None)

    def _pending_hints(
        self,
        entries: list[PendingInterrupt],
        flags: str,
        agents: frozenset[str] | None,
        *,
        expire: bool,
    ) -> None:
        """How to answer one of the questions listed (the first that the app in use can
        run), in full; and which sessions need another --app."""
        usable = [e for e in entries if agents is None or e.agent in agents]
        others = [e for e in entries if agents is not None and e.agent not in agents]
        self._say()
        if usable:
            first = usable[0]
            where = "the first" if first is entries[0] else f"{first.session_id}'s"
            self._say(
                f"Answer a question with its SESSION and ID, e.g. {where} (pending --json "
                "lists them in full):",
                "dim",
            )
            question = [first.interrupt]
            self.hints(answer_hints(first.session_id, question, flags, expire=expire, short=True))
        for agent in dict.fromkeys(e.agent for e in others):
            self._say(f"({app_missing(agent, agents or frozenset(), self.app)})", "dim")

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

    def moved(self, moved: dict[str, Any]) -> None:
        if self.json_mode:
            self._json(moved)
            return
        waiting = len(moved["interrupts"])
        self._say(
            f"session {moved['session']}: moved from {moved['from']} to {moved['to']}"
            + (f", {waiting} question(s) waiting there" if waiting else "")
            + "; answers sent to the old place are refused."
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
        store: str = "",
        agents: frozenset[str] = frozenset(),
    ) -> None:
        """A session: its conversation, state of play and audit trail (answers given), with
        what its chain says (``chain``), then the command that carries it on (``store``: the
        --store it is in; ``agents``: the agents of the app in use)."""
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
            self._say("\nA run stopped before it finished (its process ended).", "yellow")
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
        self._decisions_and_trail(decisions, audit, chain)
        if claim is None and (stopped or interrupts):
            self.next_steps(session_id, agent, store, interrupts, agents)

    def next_steps(
        self,
        session_id: str,
        agent: str | None,
        store: str,
        questions: list[Interrupt],
        agents: frozenset[str],
    ) -> None:
        """The commands that carry a session of ``agent`` on: answer its ``questions``, or,
        with none, recover its stopped run (in words when the app in use, whose ``agents``
        these are, lacks its agent)."""
        missing = app_missing(agent, agents, self.app)
        if missing is not None:
            what = "answer it" if questions else "carry it on"
            self._say(f"\nTo {what}: {missing}.", "dim")
            return
        flags = store_flag(store) + app_flag(self.app)
        if questions:
            self._say("\nAnswer with:")
            self.hints(answer_hints(session_id, questions, flags))
        else:
            self._say("\nCarry it on with:")
            self._say(f"  {program()} recover{flags} {shlex.quote(session_id)}", "cyan")

    def _decisions_and_trail(
        self,
        decisions: dict[str, dict[str, Any]],
        audit: list[dict[str, Any]],
        chain: str | None,
    ) -> None:
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
                f"Answers are recorded; run `{program()} worker{store_flag(store)}"
                f"{app_flag(self.app)}` to carry sessions on (or serve --worker).",
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
