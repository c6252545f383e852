"""The command's one error (CliError), and a failed run turned into one that says what became
of the session."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from ..errors import InterludeError, ResumeError, SessionConflictError, SessionError
from ._hints import show_command
from ._render import Output

T = TypeVar("T")

__all__ = ["CliError", "_run", "_what"]


class CliError(InterludeError):
    """A problem to report in one line (exit code 1), about ``session`` if it names one; part
    of the one error tree, so code that calls the command catches it with InterludeError."""

    def __init__(
        self, message: str, *, session: str | None = None, refusal: str | None = None
    ) -> None:
        super().__init__(message)
        self.session = session
        self.refusal = refusal
        """The refusal code of the answer this error refuses (``errors.refusal_code``)."""


def _run(out: Output, call: Callable[[], T], session_id: str, store: str, opened: object) -> T:
    """Run the session's agent, graph or swarm (``opened``); a failure becomes a CliError
    that says what became of the session."""
    try:
        with out.working(f"the {getattr(opened, 'kind', 'agent')} is working"):
            return call()
    except Exception as exc:
        where = f"session {session_id!r}"
        see = f"see `{show_command(session_id, store)}`"
        if isinstance(exc, ResumeError):
            message = f"{where}: the answer was refused ({_what(exc)}); the session is unchanged"
            raise CliError(message, session=session_id, refusal=exc.code) from None
        elif isinstance(exc, SessionConflictError) and not _lost_mid_run(opened):
            message = (
                f"{where}: another process answered/ran this session first; nothing was run "
                f"here ({exc}): {see}"
            )
        elif isinstance(exc, SessionError):
            message = (
                f"{where}: the store failed during the run ({_what(exc)}); what was saved "
                f"before that is kept: {see}"
            )
        else:
            message = f"{where}: the run failed ({_what(exc)}); what completed is saved: {see}"
        raise CliError(message, session=session_id) from None


def _lost_mid_run(opened: object) -> bool:
    """Whether another process took the session over while this run was going (rather than
    winning the race to start it, when this process ran nothing)."""
    link = getattr(opened, "_session", None)
    return getattr(link, "lost", None) is not None


def _what(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"
