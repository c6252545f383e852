"""The run claim of a graph or swarm: who carries its session on, until when.

As for an agent's session (see ``interlude._agent``'s ``SessionLink``): a run's first save of
the orchestration's record is its *claim* (the claim object stored beside the record: owner,
machine, process id, since, until), made before any node does anything, and every save is a
compare-and-swap on the session's version. So of two processes resuming or recovering the same
session, one's claim lands and the other gets SessionConflictError with nothing run. A claim
whose lease ran out, or whose process is gone (known at once on the same machine), is free.
While the run goes the claim is renewed every third of the lease; the last save of a run (a
pause, or the end) lets it go.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import Awaitable, Callable
from typing import Any

from ..errors import SessionConflictError, SessionError
from ..sessions._claims import claim_is_live, describe_claim, machine_identity, new_claim

__all__ = ["Renewer", "check_free", "new_claim"]


def check_free(claim: object, session_id: str, kind: str) -> None:
    """SessionConflictError if ``claim`` (as stored) is another live run's."""
    if not isinstance(claim, dict) or not claim_is_live(claim):
        return
    if claim.get("pid") == os.getpid() and claim.get("machine") == machine_identity()[0]:
        return  # this process's own (a run of this process that is going on is refused earlier)
    expires = claim.get("expires_at")
    left = expires - time.time() if isinstance(expires, int | float) else 0.0
    raise SessionConflictError(
        f"{kind} session {session_id!r} is being run by {describe_claim(claim)}; wait for it "
        f"to finish, or if that process died, for its claim to run out (in {max(left, 0):.0f} s)"
    )


class Renewer:
    """Renews a run's claim every third of ``lease`` (``renew()`` saves the record again with a
    fresh claim); a renewal that finds the session taken over cancels the run's task."""

    def __init__(self, lease: float, renew: Callable[[], Awaitable[None]]) -> None:
        self._lease, self._renew = lease, renew
        self.lost: SessionConflictError | None = None
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self.lost = None
        self._task = asyncio.ensure_future(self._loop(asyncio.current_task()))

    async def _loop(self, owner: asyncio.Task[Any] | None) -> None:
        while True:
            await asyncio.sleep(self._lease / 3)
            try:
                await self._renew()
            except SessionConflictError as exc:
                self.lost = exc
                if owner is not None:
                    owner.cancel()
                return
            except SessionError:
                continue  # the store is unwell; the run's own saves will say so

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None and task is not asyncio.current_task():
            task.cancel()
            with contextlib.suppress(BaseException):
                await task
