"""Opening the ``--store`` and reading what a stored session holds: its conversation and
pause, and the claim of a run that holds it now."""

from __future__ import annotations

import os
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any, TypeVar

from .._sync import run_sync
from ..errors import InterludeError
from ._defaults import DEFAULT_STORE
from ._errors import CliError
from ._words import claim_words

if TYPE_CHECKING:
    from .._agent import Position
    from .._messages import Message
    from ..sessions import InboxStore, StoredSession

__all__ = ["DEFAULT_STORE", "_await", "_decode", "_live_claim", "_refuse_if_running", "_store"]

T = TypeVar("T")


def _store(url: str, *, create: bool = False) -> InboxStore:
    """The store at ``url``; unless ``create``, a SQLite or file store must already exist."""
    from ..sessions import local_store_path, open_store

    local = local_store_path(url)  # a malformed URL: ConfigurationError, one line
    if local is not None and not create:
        kind, path, _ = local
        if not (os.path.isfile(path) if kind == "sqlite" else os.path.isdir(path)):
            hint = (
                "pass --store URL (or set INTERLUDE_STORE) naming your store, or run "
                "`interlude demo` to create the demo's"
                if url == DEFAULT_STORE
                else "check --store"
            )
            raise CliError(f"no store at {path} ({url}): {hint}")
    try:
        return open_store(url)
    except InterludeError:
        raise
    except Exception as exc:  # a driver's own connection error
        raise CliError(f"cannot open store {url}: {exc}") from None


def _decode(stored: StoredSession) -> tuple[list[Message], Position | None]:
    """A stored session's conversation and pause (None while a run's journal is stored)."""
    from .._agent import decode_stored

    state = decode_stored(stored)
    return state.messages, state.pause


def _live_claim(stored: StoredSession) -> dict[str, Any] | None:
    """The claim of the run that holds the session now, if one does."""
    from ..sessions import claim_is_live, split_marker

    _, marker = split_marker(stored.pause)
    claim = stored.claim if marker is None else marker
    return dict(claim) if claim is not None and claim_is_live(claim) else None


def _refuse_if_running(session_id: str, claim: dict[str, Any] | None) -> None:
    if claim is not None:
        raise CliError(
            f"session {session_id!r} is being run by another process ({claim_words(claim)}); "
            "nothing was done here: wait for the run to finish",
            session=session_id,
        )


def _await(coro: Coroutine[Any, Any, T]) -> T:

    return run_sync(coro)
