"""The conformance suite every session store passes.

Subclass :class:`SessionStoreConformance` in a pytest test module and say how to make your
store; pytest then runs every check below against it::

    from interlude.testing.conformance import SessionStoreConformance

    class TestMyStore(SessionStoreConformance):
        def make_store(self, tmp_path):
            return MyStore(tmp_path / "sessions")

        def store_url(self, tmp_path):  # for the checks that use several processes
            return None  # or a URL that interlude.sessions.open_store() understands

        def corrupt(self, store, tmp_path, session_id):
            ...  # damage the stored session (garbage JSON where a message is kept)

The checks come in parts, one per protocol of ``interlude.sessions``:

- ``SessionStore`` (required, ``REQUIRED``): round trip, run claims, append-only writes,
  compare-and-swap conflicts, resume by a fresh agent, two resumers racing (processes when the
  store has a URL), two store objects on one place (a stale save loses), two processes saving
  over one version (one wins), a process killed right after a pause, listing and deleting, bad ids,
  corrupt data and unknown versions, agent names and audit trails (appended with the save,
  kept across store objects, gone with the session), and forks (``fork``: a new session from
  the start of another, which never changes; a store without the method gets a copy).
- ``rewind`` (an optional operation, skipped for a store without it): a save that first cuts
  the conversation back (kept messages then the new ones, the rest of the save as a save, the
  audit trail appended), refused whole when stale, past the stored messages or for a missing
  session, saves appending at the new count after it, the pending index replaced.
- ``PendingIndex`` (optional): pending-interrupt queries (``PendingQuery``) and expired
  interrupts (earliest deadline first); one corrupt session hides no other's question (a store
  that leaves a session out of ``pending_interrupts`` names it in ``store.skipped``, a sequence
  of ``(session_id, why)``).
- ``AnswerQueue`` (optional): recorded answers (seq order, the first answer wins, cleared up
  to a seq that is never reused, gone with the session, untouched by saves but removed by the
  save that applies them, ``SessionUpdate.applied_answers``, corrupt ones reported) and the
  sessions a worker has to resume. For a store with ``reserves_work = True``, the sessions
  reserved for a worker as they are selected (``reserve_for=``): passed by other workers
  until the lease lapses, the same worker's again, ignored by calls that do not reserve, and
  never reserved for two processes at once.
- ``NotificationOutbox`` (optional): notifications added once by id (only for sessions that
  exist), claimed when due (earliest first, each leased so other notifiers pass it by, due
  again when the lease runs out), settled (sent, retried later, failed for good, never
  due again), the open questions (asked, not closed by answered, expired or withdrawn), and
  gone with their session.
- ``CallClaims`` (optional): claims on tool calls that a fork and the session it was forked
  from share (``claim_call``): the first claim holds, a save that starts a call another session
  holds is refused and writes nothing (``SessionUpdate.starts``), claims go with the session
  the call was asked in, and a claim racing a save never misses it.

An optional part's checks run when the store meets its protocol and are skipped otherwise; a
test class may say instead which optional parts its store provides (``provides = (PendingIndex,)``),
and those checks then fail if the store does not meet them.
The checks are sync functions (they drive the async store API with ``asyncio.run``), so no
pytest plugin is needed. Stores must count the JSON bytes they write in ``bytes_written``.
"""

from __future__ import annotations

from ._answers import AnswerChecks
from ._audit import AuditChecks
from ._base import OPTIONAL, REQUIRED
from ._calls import CallClaimChecks
from ._corruption import CorruptionChecks
from ._deadlines import DeadlineChecks
from ._forking import ForkChecks
from ._outbox import OutboxChecks
from ._pending import PendingChecks
from ._processes import ProcessChecks
from ._reserving import ReservationChecks
from ._rewinding import RewindChecks
from ._saving import SavingChecks
from ._support import build_agent

__all__ = ["OPTIONAL", "REQUIRED", "SessionStoreConformance", "build_agent"]


# pytest collects inherited checks base class first, so the groups are listed last-run-first.
class SessionStoreConformance(
    RewindChecks,
    CallClaimChecks,
    ForkChecks,
    ReservationChecks,
    OutboxChecks,
    CorruptionChecks,
    AnswerChecks,
    DeadlineChecks,
    AuditChecks,
    PendingChecks,
    ProcessChecks,
    SavingChecks,
):
    """Checks a session store must pass. Subclass it and implement ``make_store`` and
    ``corrupt`` (``store_url``, ``corrupt_answers`` and ``provides`` are optional); the checks
    come from one class per topic in this package, each checking one part of the protocol."""
