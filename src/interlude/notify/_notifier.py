"""The notifier: fills a store's outbox with the notifications due for what it holds, and
delivers them, at least once, to every target."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

from ..errors import ConfigurationError, NotificationError
from ..sessions import Notification, NotificationOutbox, PendingIndex, SessionStore
from ._events import closing, due_events, notification

__all__ = ["NotificationTarget", "Notifications", "Notifier", "target_from_url"]

_log = logging.getLogger("interlude.notify")


@runtime_checkable
class NotificationTarget(Protocol):
    """Where notifications go: :class:`~interlude.notify.Webhook`, :class:`~interlude.notify.Email`,
    or your own. ``send`` delivers one message (a JSON object) or raises NotificationError
    (``permanent=True`` when trying again cannot help; any other exception is tried again)."""

    name: str

    async def send(self, message: Mapping[str, Any]) -> None: ...


def target_from_url(url: str, *, secret: str | None = None) -> NotificationTarget:
    """The target a ``--notify URL`` names: ``http(s)://...`` a :class:`Webhook` (signed with
    ``secret``); ``smtp://[user:password@]host[:port]?from=ADDRESS&to=ADDRESS[,ADDRESS]`` an
    :class:`Email` (``&starttls=require`` to insist on TLS)."""
    from urllib.parse import parse_qs, unquote, urlsplit

    parts = urlsplit(url)
    if parts.scheme in ("http", "https"):
        from ._webhook import Webhook

        return Webhook(url, secret=secret)
    if parts.scheme == "smtp":
        from ._email import Email

        query = parse_qs(parts.query)
        to = [a for v in query.get("to", []) for a in v.split(",") if a]
        sender = (query.get("from") or [""])[0]
        require = (query.get("starttls") or [""])[0] == "require"
        return Email(
            parts.hostname or "",
            parts.port or 25,
            sender=sender,
            to=to,
            username=unquote(parts.username) if parts.username else None,
            password=unquote(parts.password) if parts.password else None,
            starttls=True if require else None,
        )
    raise ConfigurationError(
        f"a notification URL is http(s)://... (a webhook) or smtp://host?from=..&to=.., got {url!r}"
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class Notifications:
    """What an :class:`~interlude.App` notifies, and how (``App(notify=...)``).

    ``targets`` receive every notification; ``inbox_url`` is the inbox's address (links point
    to ``<inbox_url>/sessions/<id>``). ``warn_before`` is when a question with a deadline that
    sets no ``warn_before`` of its own gets ``deadline_near`` (seconds before it; None: not).
    A delivery that fails is tried again after ``retry_base`` seconds, doubling up to
    ``retry_cap``, with jitter, up to ``max_attempts`` times, then kept as failed. ``lease`` is
    how long a notifier holds a notification it is delivering before another may take it (a
    notifier that died mid-delivery leaves it to be delivered again after that).
    """

    targets: tuple[NotificationTarget, ...] = ()
    inbox_url: str | None = None
    warn_before: float | None = None
    retry_base: float = 5.0
    retry_cap: float = 3600.0
    max_attempts: int = 15
    lease: float = 60.0
    secret: str | None = field(default=None, repr=False)
    """The webhook secret for targets given as URLs."""

    @classmethod
    def of(
        cls, notify: Notifications | Sequence[NotificationTarget | str] | None, **changes: Any
    ) -> Notifications:
        """``notify`` as Notifications (targets given as URLs made with ``target_from_url``)."""
        base = notify if isinstance(notify, Notifications) else cls()
        targets: list[NotificationTarget | str] = list(base.targets)
        if isinstance(notify, str):
            targets.append(notify)
        elif notify is not None and not isinstance(notify, Notifications):
            targets += list(notify)
        changes = {k: v for k, v in changes.items() if v is not None}
        secret = changes.get("secret", base.secret)
        made = tuple(
            target_from_url(t, secret=secret) if isinstance(t, str) else t for t in targets
        )
        for t in made:
            if not isinstance(t, NotificationTarget):
                raise ConfigurationError(f"{t!r} is not a notification target (name, send)")
        from dataclasses import replace

        return replace(base, **changes, targets=made)


class Notifier:
    """Notifications about the questions in ``store``, delivered to ``notify``'s targets.

    :meth:`run_once` adds to the store's outbox the notifications due now (by deterministic
    id, so adding one twice stores it once), then delivers the due ones, and returns how many
    were delivered. A worker (``interlude worker``, ``serve --worker``, :class:`~interlude.Worker`
    of an App with ``notify=``) runs it on each pass; :meth:`run` runs it alone. ``sent``,
    ``retried`` and ``failed`` count deliveries; failed ones are kept in the store and logged.
    """

    def __init__(
        self,
        store: SessionStore,
        notify: Notifications | Sequence[NotificationTarget | str],
        *,
        inbox_url: str | None = None,
        clock: Callable[[], float] | None = None,
        batch: int = 100,
        concurrency: int = 8,
    ) -> None:
        if not isinstance(store, NotificationOutbox) or not isinstance(store, PendingIndex):
            raise ConfigurationError(
                f"notifications need a store with an outbox and a pending index, and "
                f"{type(store).__name__} lacks one"
            )
        self.store: Any = store
        self.settings = Notifications.of(notify, inbox_url=inbox_url)
        self.clock = clock or time.time
        self.batch = batch
        self.concurrency = max(1, concurrency)
        self.sent = self.retried = self.failed = 0
        self._known: set[str] = set()  # ids this notifier knows are stored: not added again

    async def run(self, stop: asyncio.Event | None = None, *, poll: float = 1.0) -> None:
        """Run passes every ``poll`` seconds until ``stop`` is set (store errors are logged
        and the pass tried again later)."""
        stop = stop or asyncio.Event()
        while not stop.is_set():
            try:
                await self.run_once()
            except Exception as exc:
                _log.warning("notification pass failed: %s: %s", type(exc).__name__, exc)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), poll)

    async def run_once(self) -> int:
        """Add the notifications due now, deliver the due ones; how many were delivered."""
        if not self.settings.targets:
            return 0
        now = self.clock()
        await self.enqueue(now)
        return await self.deliver(now)

    # -- filling the outbox --------------------------------------------------------------------

    async def enqueue(self, now: float) -> list[str]:
        """Add the notifications due at ``now`` for what the store holds; the ids added."""
        pending = await self.store.pending_interrupts()
        waiting = {(p.session_id, p.interrupt.id) for p in pending}
        new: list[Notification] = []
        for p in pending:
            question = p.interrupt.to_dict()
            for event, at in due_events(p, now, self.settings.warn_before):
                new.append(
                    notification(
                        event,
                        session_id=p.session_id,
                        interrupt_id=p.interrupt.id,
                        agent=p.agent,
                        question=question,
                        at=at,
                        now=now,
                    )
                )
        new += await self._closed(waiting, now)
        fresh = [n for n in new if n.id not in self._known]
        added = await self.store.add_notifications(fresh) if fresh else []
        if len(self._known) > 100_000:  # a cache only: the store's ids are what counts
            self._known.clear()
        self._known.update(n.id for n in fresh)
        return list(added)

    async def _closed(self, waiting: set[tuple[str, str]], now: float) -> list[Notification]:
        """The closing notifications of the questions notified as asked that no longer wait.
        A question asked after ``waiting`` was read is left for the next pass (5 s of margin
        for the clocks of other notifiers), so it is not taken for withdrawn."""
        found = []
        audits: dict[str, list[Any]] = {}
        for asked in await self.store.open_questions(limit=self.batch * 10):
            key = (asked.session_id, asked.interrupt_id)
            recent = asked.created_at > now - 5.0 and asked.id not in self._known
            if key in waiting or recent:
                continue
            sid = asked.session_id
            if sid not in audits:
                audits[sid] = await self.store.audit_trail(sid)
            event, extra = closing(asked, audits[sid])
            payload = asked.payload
            question = payload.get("question")
            at = extra["answer"]["at"] if extra else now
            found.append(
                notification(
                    event,
                    session_id=sid,
                    interrupt_id=asked.interrupt_id,
                    agent=payload.get("agent") if isinstance(payload.get("agent"), str) else None,
                    question=question if isinstance(question, dict) else {},
                    at=at if isinstance(at, int | float) else now,
                    now=now,
                    extra=extra,
                )
            )
        return found

    # -- delivering ----------------------------------------------------------------------------

    def message(self, n: Notification) -> dict[str, Any]:
        """What the targets get: the stored payload and the link to the question's page."""
        from urllib.parse import quote

        base = self.settings.inbox_url
        url = (
            None if base is None else f"{base.rstrip('/')}/sessions/{quote(n.session_id, safe='')}"
        )
        return {**n.payload, "id": n.id, "url": url}

    async def deliver(self, now: float) -> int:
        """Deliver the notifications due at ``now``; how many were delivered."""
        s = self.settings
        due = await self.store.claim_notifications(now, lease=s.lease, limit=self.batch)
        gate = asyncio.Semaphore(self.concurrency)

        async def one(n: Notification) -> bool:
            async with gate:
                return await self._deliver(n)

        results = await asyncio.gather(*(one(n) for n in due))
        return sum(results)

    async def _deliver(self, n: Notification) -> bool:
        message = self.message(n)
        outcomes = await asyncio.gather(*(self._send(t, message) for t in self.settings.targets))
        problems = [why for _, why in outcomes if why]
        if not problems:
            await self.store.settle_notification(n.id, "sent")
            self.sent += 1
            return True
        why = "; ".join(problems)
        outcome: Literal["retry", "failed"] = "retry"
        if all(permanent for permanent, why in outcomes if why):
            outcome = "failed"
        if n.attempts + 1 >= self.settings.max_attempts:
            outcome = "failed"
        if outcome == "failed":
            self.failed += 1
            _log.error(
                "notification %s (%s of %s) failed for good: %s", n.id, n.event, n.session_id, why
            )
            await self.store.settle_notification(n.id, "failed", error=why)
            return False
        self.retried += 1
        retry_at = self.clock() + self._backoff(n.attempts + 1)
        _log.warning(
            "notification %s (%s of %s) not delivered, trying again: %s",
            n.id,
            n.event,
            n.session_id,
            why,
        )
        await self.store.settle_notification(n.id, "retry", retry_at=retry_at, error=why)
        return False

    @staticmethod
    async def _send(target: NotificationTarget, message: dict[str, Any]) -> tuple[bool, str]:
        """(permanent, why) of a failed send; (False, "") when it went through."""
        try:
            await target.send(message)
        except NotificationError as exc:
            return exc.permanent, str(exc)
        except Exception as exc:  # a target of the application's: tried again
            return False, f"{getattr(target, 'name', target)!s}: {type(exc).__name__}: {exc}"
        return False, ""

    def _backoff(self, failures: int) -> float:
        """Doubling from ``retry_base`` up to ``retry_cap``, half of it random."""
        s = self.settings
        delay = min(s.retry_cap, s.retry_base * 2 ** min(failures - 1, 30))
        return float(delay / 2 + random.uniform(0, delay / 2))
