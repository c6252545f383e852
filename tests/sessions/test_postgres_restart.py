"""PostgresStore across a server restart (a throwaway cluster, never the shared server): dead
pooled connections are replaced before use, and an outage is StoreUnavailableError, quickly,
never "no such session"."""

from __future__ import annotations

import asyncio
import time

import pytest

from interlude import Inbox
from tests.support.postgres import cluster


def test_a_restart_costs_no_call_and_an_outage_is_unavailable_quickly() -> None:
    from interlude.sessions import PostgresStore
    from interlude.testing.conformance._support import _text, _update

    with cluster() as db:
        store = PostgresStore(db.dsn, min_size=2, max_size=2)
        asyncio.run(store.save("s", _update(0, 0, [_text(0)])))
        for mode in ("fast", "immediate"):
            db.restart(mode)
            for _ in range(3):  # every pooled connection died with the server
                assert asyncio.run(store.load("s")) is not None
        from interlude.errors import StoreUnavailableError

        db.stop("immediate")
        started = time.monotonic()
        with pytest.raises(StoreUnavailableError, match="unavailable"):
            asyncio.run(store.load("s"))
        with pytest.raises(StoreUnavailableError):
            Inbox(store).session("s")  # not "no session 's' in the store"
        # two calls, each waiting the pool's 3 s at most: well under 30 s on a busy machine,
        # where a call that waited for the server to come back would never end
        assert time.monotonic() - started < 30
        db.start()
        assert asyncio.run(store.load("s")) is not None
        store.close()
