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

import os
import time

from ..errors import SessionConflictError
from ..sessions import Renewer, claim_is_live, describe_claim, machine_identity, new_claim

__all__ = ["Renewer", "check_free", "new_claim"]  # Renewer, new_claim: the sessions claim helpers


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
