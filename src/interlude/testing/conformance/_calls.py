"""Call claims (``CallClaims``, optional): of the sessions that share a tool call (a fork and
the session it was forked from), the first to claim it runs it. The session the call was
asked in does not claim it; its save that starts the call names it (``SessionUpdate.starts``)
and is refused while another session holds it, and a claim reads that session in the same
atomic step as it claims, so a save and a claim racing each other never both go through
unseen by the other."""

from __future__ import annotations

import asyncio
import json
import threading
from dataclasses import replace
from pathlib import Path
from typing import Any

from ...errors import CallTakenError, SessionConflictError
from ...sessions import CallClaims, open_store
from ._base import StoreHooks
from ._support import _loaded, _text, _update

__all__ = ["CallClaimChecks"]


def _key(origin: str, index: int, call: str) -> str:
    return json.dumps([origin, index, call])


class CallClaimChecks(StoreHooks):
    """``claim_call`` and ``SessionUpdate.starts``."""

    def test_the_first_claim_on_a_call_holds_it(self, tmp_path: Path) -> None:
        store: Any = self.store_for(CallClaims, tmp_path)
        key, other = _key("p", 1, "t1"), _key("p", 1, "t2")

        async def go() -> None:
            v = await store.save("p", _update(0, 0, [_text(0), _text(1)], state={"n": 1}))
            holder, origin = await store.claim_call(key, "f1", origin="p")
            assert holder == "f1"
            assert origin is not None and origin.version == v and len(origin.messages) == 2
            assert (await store.claim_call(key, "f2", origin="p"))[0] == "f1"  # taken
            assert (await store.claim_call(key, "f1", origin="p"))[0] == "f1"  # held: again
            # The origin's save that starts a call another session holds writes nothing.
            try:
                await store.save("p", replace(_update(v, 2, [_text(2)]), starts=[other, key]))
            except CallTakenError as exc:
                assert exc.holder == "f1" and exc.key == key and "f1" in str(exc)
                assert isinstance(exc, SessionConflictError)
            else:
                raise AssertionError("a save started a call a fork holds")
            after = await _loaded(store, "p")
            assert after.version == v and len(after.messages) == 2
            # A call no one holds, or one this session holds, starts.
            v = await store.save("p", replace(_update(v, 2, [_text(2)]), starts=[other]))
            assert (await store.claim_call(other, "f1", origin="p"))[0] == "f1"
            mine = _key("f1", 3, "t9")
            assert (await store.claim_call(mine, "f1", origin="f1"))[0] == "f1"
            await store.save("f1", replace(_update(0, 0, [_text(0)]), starts=[mine]))
            # A claim on a call of a session that is not there (deleted): no session read.
            assert await store.claim_call(_key("gone", 0, "t"), "f1", origin="gone") == ("f1", None)
            # Claims go with the session their calls were asked in.
            await store.delete("p")
            await store.save("p", _update(0, 0, [_text(0)]))
            assert (await store.claim_call(key, "f2", origin="p"))[0] == "f2"

        asyncio.run(go())

    def test_a_claim_and_a_save_racing_never_both_pass_unseen(self, tmp_path: Path) -> None:
        """The origin saves "started" (naming the call) while a fork claims it and reads the
        origin: either the save is refused, or the claim's read of the origin shows it (then
        the fork asks before running), never neither. Threads on one store object, and, for
        a store with a URL, a second store object as another process would open it."""
        store: Any = self.store_for(CallClaims, tmp_path)
        url = self.store_url(tmp_path)
        second: Any = open_store(url) if url is not None else store
        rounds = 30
        outcomes: list[tuple[bool, int | None, int]] = []

        async def prepare() -> list[int]:
            versions = []
            for i in range(rounds):
                versions.append(await store.save(f"p{i}", _update(0, 0, [_text(0)])))
            return versions

        versions = asyncio.run(prepare())

        def saver(i: int, ready: threading.Barrier, out: dict[str, Any]) -> None:
            ready.wait()
            update = replace(_update(versions[i], 1, [_text(1)]), starts=[_key(f"p{i}", 0, "t")])
            try:
                asyncio.run(store.save(f"p{i}", update))
                out["saved"] = True
            except CallTakenError:
                out["saved"] = False

        def claimer(i: int, ready: threading.Barrier, out: dict[str, Any]) -> None:
            ready.wait()
            holder, seen = asyncio.run(
                second.claim_call(_key(f"p{i}", 0, "t"), "f", origin=f"p{i}")
            )
            out["holder"], out["seen"] = holder, None if seen is None else len(seen.messages)

        for i in range(rounds):
            ready = threading.Barrier(2)
            out: dict[str, Any] = {}
            threads = [
                threading.Thread(target=saver, args=(i, ready, out)),
                threading.Thread(target=claimer, args=(i, ready, out)),
            ]
            for t in threads:
                t.start()
            for t in threads:
                t.join(60)
            assert out["holder"] == "f"  # the origin never takes a claim itself
            outcomes.append((out["saved"], out["seen"], i))
        for saved, seen, i in outcomes:
            # Saved after the claim would have been refused; so a save that passed came first
            # and the claim's read of the origin holds its message.
            assert not saved or seen == 2, f"round {i}: the save and the claim both passed unseen"
