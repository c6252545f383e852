"""Run claims as stores keep them: whether one still holds, who holds it, and the run marker
that sessions written before the journal kept in the pause slot.

A claim is a JSON object stored beside the pause (``StoredSession.claim``): who runs the
session (``owner``, ``host:pid``), the machine (host name, kernel boot id, process-id
namespace), the process id, since when and until when (``expires_at``). The agent makes and
renews claims; stores only keep them, and operators (the inbox, the command) read them.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import Awaitable, Callable
from typing import Any

from ..errors import SessionConflictError, SessionError

__all__ = ["claim_is_live", "describe_claim", "machine_identity", "split_marker"]

_IDENTITY: tuple[str, str] | None = None


def machine_identity() -> tuple[str, str]:
    """(this machine's identity, "host:pid"). The machine is the host name, the kernel's boot
    id and the process-id namespace: where two claims share it, a process id means the same
    process, so a dead owner is known at once."""
    global _IDENTITY
    if _IDENTITY is None or not _IDENTITY[1].endswith(f":{os.getpid()}"):
        import socket

        parts = [socket.gethostname()]
        try:
            with open("/proc/sys/kernel/random/boot_id") as f:
                parts.append(f.read().strip())
            parts.append(os.readlink("/proc/self/ns/pid"))
        except OSError:
            pass
        _IDENTITY = ("/".join(parts), f"{parts[0]}:{os.getpid()}")
    return _IDENTITY


def new_claim(held: object, lease: float) -> dict[str, Any]:
    """This process's claim on a session, valid for ``lease`` seconds from now: who holds it
    (owner, machine, process id), since when (kept while this process already holds ``held``)
    and until when (``expires_at``). Agents' and orchestrations' runs make theirs with it."""
    now = time.time()
    machine, owner = machine_identity()
    since = now
    if isinstance(held, dict) and held.get("pid") == os.getpid() and held.get("machine") == machine:
        kept = held.get("since")
        since = kept if isinstance(kept, float) else now
    return {
        "owner": owner,
        "machine": machine,
        "pid": os.getpid(),
        "since": since,
        "expires_at": now + lease,
    }


def claim_is_live(claim: dict[str, Any], now: float | None = None) -> bool:
    """Whether a stored claim still holds: its lease has not run out and, when it was made on
    this machine, its process still exists."""
    expires = claim.get("expires_at")
    if not isinstance(expires, int | float) or expires <= (time.time() if now is None else now):
        return False
    pid = claim.get("pid")
    if claim.get("machine") == machine_identity()[0] and isinstance(pid, int):
        return _process_exists(pid)
    return True


def _process_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a killed process its parent has not reaped yet is a zombie: gone all the same
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[-1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


def describe_claim(claim: dict[str, Any]) -> str:
    """Who holds a claim, and since when, for messages."""
    since = claim.get("since")
    age = f" for {time.time() - since:.0f} s" if isinstance(since, int | float) else ""
    return f"{claim.get('owner')!r}{age}"


# --- the pre-journal run marker -----------------------------------------------------------------

_RUNNING = "running"


def split_marker(
    stored_pause: dict[str, object] | None,
) -> tuple[dict[str, object] | None, dict[str, object] | None]:
    """(the pause, the run marker) of a stored pause slot: one of them, or neither. Sessions
    written before the journal kept a run's marker in the pause slot."""
    if isinstance(stored_pause, dict):
        marker = stored_pause.get(_RUNNING)
        if isinstance(marker, dict):
            return None, marker
    return stored_pause, None


class Renewer:
    """Keeps a run's claim live: every third of ``lease`` it calls ``renew()`` (which saves the
    session again with a fresh claim). A renewal that finds the session taken over
    (SessionConflictError) is kept in ``lost`` and cancels the task that started the renewer; a
    store that is unwell is tried again at the next turn (the run's own saves will say so).
    Agents' session links and orchestrations both use it."""

    def __init__(self, lease: float, renew: Callable[[], Awaitable[None]]) -> None:
        self._lease, self._renew = lease, renew
        self.lost: SessionConflictError | None = None
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Start renewing, for the current task."""
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
                continue

    async def stop(self) -> None:
        """Stop renewing (and wait until a renewal under way has ended)."""
        task, self._task = self._task, None
        if task is not None and task is not asyncio.current_task():
            task.cancel()
            with contextlib.suppress(BaseException):
                await task
