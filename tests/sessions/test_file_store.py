"""FileStore specifics: its files, crash leftovers, corruption, path safety, processes."""

from __future__ import annotations

import asyncio
import json
import os
import re
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

import pytest

from interlude._interrupt import Interrupt
from interlude.errors import (
    InvalidSessionIdError,
    SessionConflictError,
    SessionCorruptError,
    StateFormatError,
)
from interlude.sessions import FileStore, PendingInterrupt, PendingQuery

from .records import interrupt, msg, update


def files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path / "store"


@pytest.fixture
def store(root: Path) -> FileStore:
    return FileStore(root)


def test_round_trip_and_layout(store: FileStore, root: Path) -> None:
    assert asyncio.run(store.load("s1")) is None
    assert not (root / "s1").exists()  # a load creates nothing
    pause = {"step": {"kind": "tool_batch"}}
    pend = [interrupt("i1", "approve", 5.0, tool="record")]
    new = update(0, 0, [msg("a"), msg("b")], pause=pause, pending=pend, state={"k": 1})
    assert asyncio.run(store.save("s1", new)) == 1
    s = asyncio.run(store.load("s1"))
    assert s is not None
    assert (s.session_id, s.version, s.format_version) == ("s1", 1, 1)
    assert (s.messages, s.state, s.pause, s.tools) == (
        [msg("a"), msg("b")],
        {"k": 1},
        pause,
        ["record"],
    )
    lines = (root / "s1" / "messages.jsonl").read_text().splitlines()
    assert [json.loads(line) for line in lines] == [msg("a"), msg("b")]
    head = json.loads((root / "s1" / "head.json").read_text())
    assert head["version"] == 1 and head["message_count"] == 2
    assert head["pending"] == [p.to_dict() for p in pend] and head["state"] == {"k": 1}
    # state=None keeps the stored state; pause None clears the pause
    assert asyncio.run(store.save("s1", update(1, 2, [msg("c")]))) == 2
    s = asyncio.run(store.load("s1"))
    assert s is not None and s.state == {"k": 1} and s.pause is None and len(s.messages) == 3


async def test_append_only_and_conflicts_write_nothing(store: FileStore, root: Path) -> None:
    await store.save("s", update(0, 0, [msg("a"), msg("b")]))
    first = (root / "s" / "messages.jsonl").read_bytes()
    await store.save("s", update(1, 2, [msg("c")], state={"n": 2}))
    second = (root / "s" / "messages.jsonl").read_bytes()
    assert second.startswith(first) and second.count(b"\n") == 3
    snapshot, written = files(root / "s"), store.bytes_written

    pend = [interrupt("i", "approve", 1.0)]
    with pytest.raises(SessionConflictError, match=r"'s'.*version 2, not 1"):
        await store.save("s", update(1, 3, [msg("x")], pending=pend))
    with pytest.raises(SessionConflictError, match=r"'s' holds 3 messages.*appends at 2"):
        await store.save("s", update(2, 2, [msg("x")], pending=pend))
    with pytest.raises(SessionConflictError, match=r"'s'.*version 2, not 0"):
        await store.save("s", update(0, 0, [msg("x")]))
    assert files(root / "s") == snapshot and store.bytes_written == written
    with pytest.raises(SessionConflictError, match="'new' holds 0 messages"):
        await store.save("new", update(0, 1, [msg("x")]))
    assert await store.load("new") is None
    assert await store.list_sessions() == ["s"]
    bad = update(2, 3, [msg("x")])
    object.__setattr__(bad, "pending", [{"id": "i", "name": "n"}])  # no source
    with pytest.raises(StateFormatError):
        await store.save("s", bad)
    assert files(root / "s") == snapshot


async def test_crash_leftovers_are_ignored_then_truncated(store: FileStore, root: Path) -> None:
    await store.save("s", update(0, 0, [msg("a")]))
    path = root / "s" / "messages.jsonl"
    good = path.read_bytes()
    with path.open("ab") as f:  # a save that appended, then died before replacing head.json
        f.write(json.dumps(msg("lost")).encode() + b"\n" + b'{"role": "us')
    s = await store.load("s")
    assert s is not None and s.messages == [msg("a")]
    await store.save("s", update(1, 1, [msg("b")]))
    assert path.read_bytes() == good + json.dumps(msg("b")).encode() + b"\n"
    s = await store.load("s")
    assert s is not None and s.messages == [msg("a"), msg("b")]
    # a first save that died before its head: no session, and the next first save starts clean
    (root / "t").mkdir()
    (root / "t" / "messages.jsonl").write_bytes(b"garbage\n")
    assert await store.load("t") is None and await store.list_sessions() == ["s"]
    await store.save("t", update(0, 0, [msg("t")]))
    t = await store.load("t")
    assert t is not None and t.messages == [msg("t")]


async def test_pending_filters_and_replacement(store: FileStore) -> None:
    a1 = interrupt("a1", "approve", 100.0, tool="record")
    a2 = interrupt("a2", "confirm", 300.0)
    b1 = interrupt("b1", "approve", 200.0, tool="delete")
    c1 = interrupt("c1", "approve", 100.0, tool="record")
    await store.save("a", update(0, 0, [], pause={"p": 1}, pending=[a1, a2]))
    await store.save("b", update(0, 0, [], pause={"p": 1}, pending=[b1]))
    await store.save("c", update(0, 0, [], pause={"p": 1}, pending=[c1]))

    def ids(found: list[PendingInterrupt]) -> list[tuple[str, str]]:
        return [(p.session_id, p.interrupt.id) for p in found]

    everything = await store.pending_interrupts()
    assert ids(everything) == [("a", "a1"), ("c", "c1"), ("b", "b1"), ("a", "a2")]
    assert everything[0] == PendingInterrupt("a", a1, 100.0)
    assert ids(await store.pending_interrupts(PendingQuery(tool_name="delete"))) == [("b", "b1")]
    assert ids(await store.pending_interrupts(PendingQuery(name="approve", older_than=150))) == [
        ("a", "a1"),
        ("c", "c1"),
    ]
    newer = await store.pending_interrupts(
        PendingQuery(newer_than=datetime.fromtimestamp(150.0), limit=1)
    )
    assert ids(newer) == [("b", "b1")]
    await store.save("a", update(1, 0, [], pending=[]))
    assert ids(await store.pending_interrupts()) == [("c", "c1"), ("b", "b1")]


async def test_list_and_delete(store: FileStore, root: Path) -> None:
    for sid in ["b", "a", "c:1"]:
        await store.save(sid, update(0, 0, [msg(sid)]))
    (root / "no-head").mkdir()
    (root / ".deleted-x-0").mkdir()
    (root / ".deleted-x-0" / "head.json").write_text("{}")
    assert await store.list_sessions() == ["a", "b", "c:1"]
    await store.delete("b")
    await store.delete("b")  # absent: no error
    assert await store.list_sessions() == ["a", "c:1"]
    assert await store.load("b") is None
    assert not (root / "b").exists()
    assert not [name for name in os.listdir(root) if name.startswith(".deleted-b")]
    assert await store.save("b", update(0, 0, [msg("again")])) == 1


@pytest.mark.parametrize("bad", ["", "../x", "/abs", "a/b", ".hidden", "..", "x" * 201, "a\x00b"])
async def test_bad_ids_are_refused(store: FileStore, root: Path, bad: str) -> None:
    with pytest.raises(InvalidSessionIdError):
        await store.load(bad)
    with pytest.raises(InvalidSessionIdError):
        await store.save(bad, update(0, 0, []))
    with pytest.raises(InvalidSessionIdError):
        await store.delete(bad)
    assert sorted(os.listdir(root)) == []


async def test_a_symlinked_session_folder_cannot_escape(
    store: FileStore, root: Path, tmp_path: Path
) -> None:
    (tmp_path / "outside").mkdir()
    (root / "evil").symlink_to(tmp_path / "outside")
    with pytest.raises(InvalidSessionIdError, match="outside"):
        await store.save("evil", update(0, 0, [msg("x")]))
    assert list((tmp_path / "outside").iterdir()) == []


def _bad_state(raw: bytes) -> bytes:
    head = json.loads(raw)
    head["state"] = "nope"
    return json.dumps(head).encode()


def _bad_claim(raw: bytes) -> bytes:
    head = json.loads(raw)
    head["claim"] = ["host:1"]
    return json.dumps(head).encode()


def _bad_line_2(raw: bytes) -> bytes:
    first, second, rest = raw.split(b"\n", 2)
    return first + b"\n" + b"\xff" * len(second) + b"\n" + rest


@pytest.mark.parametrize(
    ("target", "damage", "detail"),
    [
        ("head.json", lambda raw: b"\xff\xfe garbage", "not valid JSON"),
        ("head.json", lambda raw: b"[1, 2]", "not an object"),
        ("head.json", lambda raw: b'{"format_version": 1}', "version None"),
        ("head.json", _bad_state, "state"),
        ("head.json", _bad_claim, "claim"),
        ("messages.jsonl", _bad_line_2, "line 2 is not valid JSON"),
        ("messages.jsonl", lambda raw: b"{}\n", "holds 3 bytes"),
        ("messages.jsonl", lambda raw: raw.replace(b"\n", b" "), "does not hold the 2 lines"),
    ],
)
async def test_corrupt_files_raise_naming_session_and_file(
    store: FileStore, root: Path, target: str, damage: Callable[[bytes], bytes], detail: str
) -> None:
    await store.save("hurt", update(0, 0, [msg("a"), msg("b")], pending=[interrupt("i", "n", 1)]))
    path = root / "hurt" / target
    path.write_bytes(damage(path.read_bytes()))
    with pytest.raises(SessionCorruptError, match=f"'hurt'.*{target}.*{detail}"):
        await store.load("hurt")
    await store.save("fine", update(0, 0, [], pending=[interrupt("f", "n", 2)]))
    found = await store.pending_interrupts()  # one corrupt session hides no other
    if target == "head.json":
        assert [p.session_id for p in found] == ["fine"]
        assert [sid for sid, _ in store.skipped] == ["hurt"]
        assert f"{target}" in store.skipped[0][1] and detail.split()[0] in store.skipped[0][1]
    else:  # the pending index is in head.json, which is fine
        assert [p.session_id for p in found] == ["hurt", "fine"] and store.skipped == ()


async def test_claim_is_kept_in_the_head_and_old_heads_have_none(
    store: FileStore, root: Path
) -> None:
    claim = {"owner": "host:1", "token": "t", "since": 1.0, "expires_at": 2.0}
    await store.save("s", update(0, 0, [msg("a")], pause={"p": 1}, claim=claim))
    path = root / "s" / "head.json"
    head = json.loads(path.read_text())
    assert head["claim"] == claim and head["pause"] == {"p": 1}
    before = store.bytes_written
    await store.save("s", update(1, 1, [], claim=claim))
    unclaimed = store.bytes_written
    await store.save("s", update(2, 1, []))
    assert unclaimed - before - (store.bytes_written - unclaimed) == len(json.dumps(claim)) - 4
    assert json.loads(path.read_text())["claim"] is None
    head = json.loads(path.read_text())
    del head["claim"]  # a head written before claims were stored
    path.write_text(json.dumps(head))
    old = await store.load("s")
    assert old is not None and old.claim is None and old.messages == [msg("a")]
    assert await store.save("s", update(3, 1, [], claim={"owner": "me"})) == 4
    again = await store.load("s")
    assert again is not None and again.claim == {"owner": "me"}


async def test_corrupt_pending_entry(store: FileStore, root: Path) -> None:
    await store.save("hurt", update(0, 0, [], pending=[interrupt("i", "n", 1)]))
    path = root / "hurt" / "head.json"
    head = json.loads(path.read_text())
    head["pending"] = [{"id": "i"}, interrupt("j", "n", 3).to_dict()]
    path.write_text(json.dumps(head))
    await store.save("fine", update(0, 0, [], pending=[interrupt("f", "n", 2)]))
    found = await store.pending_interrupts()
    assert [(p.session_id, p.interrupt.id) for p in found] == [("fine", "f"), ("hurt", "j")]
    assert len(store.skipped) == 1 and store.skipped[0][0] == "hurt"
    assert re.search(r"'hurt'.*head\.json.*pending\[0\]", store.skipped[0][1])
    assert [p.session_id for p in await store.pending_interrupts(PendingQuery(name="other"))] == []
    assert [sid for sid, _ in store.skipped] == ["hurt"]  # unreadable: cannot be filtered out
    path.write_text(json.dumps({**head, "pending": []}))
    await store.pending_interrupts()
    assert store.skipped == ()  # set by each call


# --- symbolic links: nothing is read or written through one -----------------------------------

LINK_NAMES = ["messages.jsonl", "audit.jsonl", "head.json", ".head.json.tmp", ".lock", "notes.txt"]


@pytest.mark.parametrize("name", LINK_NAMES)
async def test_a_link_in_a_new_session_folder_is_refused_and_nothing_outside_is_written(
    store: FileStore, root: Path, tmp_path: Path, name: str
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "victim").write_bytes(b"precious\n")
    (root / "s").mkdir()
    (root / "s" / name).symlink_to(outside / "victim")
    if name == "notes.txt":
        (root / "s" / "dangling").symlink_to(outside / "new")
    with pytest.raises(SessionCorruptError, match=r"'s'.*symbolic link"):
        await store.save("s", update(0, 0, [msg("a")], pending=[interrupt("i", "n", 1)]))
    with pytest.raises(SessionCorruptError, match=r"'s'.*symbolic link"):
        await store.load("s")
    assert (outside / "victim").read_bytes() == b"precious\n"
    assert sorted(p.name for p in outside.iterdir()) == ["victim"]
    assert await store.list_sessions() == ["s"]  # listed, as load does not say "no session"
    await store.save("fine", update(0, 0, [], pending=[interrupt("f", "n", 2)]))
    assert [p.session_id for p in await store.pending_interrupts()] == ["fine"]
    assert [sid for sid, _ in store.skipped] == ["s"] and "symbolic link" in store.skipped[0][1]
    await store.delete("s")  # removes the links, not what they point to
    assert not (root / "s").exists() and (outside / "victim").read_bytes() == b"precious\n"
    assert await store.list_sessions() == ["fine"]


@pytest.mark.parametrize("name", LINK_NAMES)
async def test_a_link_planted_in_a_stored_session_is_refused(
    store: FileStore, root: Path, tmp_path: Path, name: str
) -> None:
    await store.save("s", update(0, 0, [msg("a")], pending=[interrupt("i", "n", 1)]))
    folder = root / "s"
    copy = tmp_path / "copy"
    copy.mkdir()
    target = copy / name.lstrip(".")
    if (folder / name).exists():
        target.write_bytes((folder / name).read_bytes())
        (folder / name).unlink()
    else:
        target.write_bytes(b"precious\n")
    before = target.read_bytes()
    (folder / name).symlink_to(target)
    snapshot = files(folder)
    with pytest.raises(SessionCorruptError, match=f"'s'.*{re.escape(name)}.*symbolic link"):
        await store.load("s")
    with pytest.raises(SessionCorruptError, match=f"'s'.*{re.escape(name)}.*symbolic link"):
        await store.save("s", update(1, 1, [msg("b")], pending=[]))
    assert target.read_bytes() == before and files(folder) == snapshot
    assert sorted(p.name for p in copy.iterdir()) == [target.name]
    assert await store.pending_interrupts() == []
    assert [sid for sid, _ in store.skipped] == ["s"]


async def test_a_session_folder_that_is_a_link_inside_the_store_is_refused(
    store: FileStore, root: Path
) -> None:
    await store.save("real", update(0, 0, [msg("a")], pending=[interrupt("r", "n", 1)]))
    (root / "alias").symlink_to(root / "real")
    before = files(root / "real")
    with pytest.raises(SessionCorruptError, match=r"'alias'.*symbolic link, not a session folder"):
        await store.load("alias")
    with pytest.raises(SessionCorruptError, match="'alias'"):
        await store.save("alias", update(1, 1, [msg("b")]))
    assert files(root / "real") == before
    assert await store.list_sessions() == ["alias", "real"]
    assert [p.session_id for p in await store.pending_interrupts()] == ["real"]
    assert [sid for sid, _ in store.skipped] == ["alias"]
    await store.delete("alias")  # the link goes, the session it pointed to stays
    assert await store.list_sessions() == ["real"] and files(root / "real") == before


async def test_a_session_folder_linked_outside_is_skipped_by_pending(
    store: FileStore, root: Path, tmp_path: Path
) -> None:
    await store.save("real", update(0, 0, [msg("a")], pending=[interrupt("r", "n", 1)]))
    elsewhere = FileStore(tmp_path / "elsewhere")
    await elsewhere.save("evil", update(0, 0, [msg("x")], pending=[interrupt("e", "n", 0.5)]))
    (root / "evil").symlink_to(tmp_path / "elsewhere" / "evil")
    with pytest.raises(InvalidSessionIdError, match="outside"):
        await store.load("evil")
    assert [p.session_id for p in await store.pending_interrupts()] == ["real"]
    assert [sid for sid, _ in store.skipped] == ["evil"] and "outside" in store.skipped[0][1]


# --- agent name and audit trail ------------------------------------------------------------------


async def test_audit_is_an_append_only_jsonl_beside_the_messages(
    store: FileStore, root: Path
) -> None:
    await store.save("s", update(0, 0, [msg("a")], agent="triage", audit=[{"n": 1}]))
    await store.save("s", update(1, 1, [], audit=[{"n": 2}, {"n": 3, "x": "é"}]))
    path = root / "s" / "audit.jsonl"
    lines = path.read_bytes().splitlines()
    assert [json.loads(line) for line in lines] == [{"n": 1}, {"n": 2}, {"n": 3, "x": "é"}]
    head = json.loads((root / "s" / "head.json").read_text())
    assert (head["agent"], head["audit_count"], head["audit_bytes"]) == (
        "triage",
        3,
        len(path.read_bytes()),
    )
    assert (root / "s" / "messages.jsonl").read_bytes().count(b"\n") == 1  # no audit in it
    await store.save("t", update(0, 0, [msg("a")]))
    assert not (root / "t" / "audit.jsonl").exists()  # made by the first entry only


async def test_a_torn_audit_line_is_ignored_then_truncated(store: FileStore, root: Path) -> None:
    await store.save("s", update(0, 0, [msg("a")], audit=[{"n": 1}]))
    path = root / "s" / "audit.jsonl"
    good = path.read_bytes()
    with path.open("ab") as f:  # a save that appended, then died before replacing head.json
        f.write(b'{"n": "lost"}\n{"n": "to')
    s = await store.load("s")
    assert s is not None and s.audit == [{"n": 1}]
    await store.save("s", update(1, 1, [msg("b")]))  # nothing to append: the leftovers stay
    assert await store.audit_trail("s") == [{"n": 1}]
    await store.save("s", update(2, 2, [], audit=[{"n": 2}]))
    assert path.read_bytes() == good + b'{"n": 2}\n'
    assert await store.audit_trail("s") == [{"n": 1}, {"n": 2}]


@pytest.mark.parametrize(
    ("damage", "detail"),
    [
        (lambda raw: b"\xff" + raw[1:], "line 1 is not valid JSON"),
        (lambda raw: b'["n", 1]' + raw[8:], "line 1 is a list, not an object"),
        (lambda raw: raw[:-3], "holds"),
    ],
)
async def test_a_corrupt_audit_trail_is_reported(
    store: FileStore, root: Path, damage: Callable[[bytes], bytes], detail: str
) -> None:
    await store.save("hurt", update(0, 0, [msg("a")], audit=[{"n": 1}, {"n": 2}]))
    path = root / "hurt" / "audit.jsonl"
    path.write_bytes(damage(path.read_bytes()))
    with pytest.raises(SessionCorruptError, match=f"'hurt'.*audit.jsonl.*{detail}"):
        await store.load("hurt")
    with pytest.raises(SessionCorruptError, match=f"'hurt'.*audit.jsonl.*{detail}"):
        await store.audit_trail("hurt")
    if detail == "holds":  # shorter than head.json says: a save will not append after a gap
        with pytest.raises(SessionCorruptError, match=r"'hurt'.*audit.jsonl.*holds"):
            await store.save("hurt", update(1, 1, [], audit=[{"n": 3}]))
        assert json.loads((root / "hurt" / "head.json").read_text())["version"] == 1


async def test_old_heads_have_no_agent_and_no_audit(store: FileStore, root: Path) -> None:
    await store.save("s", update(0, 0, [msg("a")], agent="triage", audit=[{"n": 1}]))
    path = root / "s" / "head.json"
    head = json.loads(path.read_text())
    for key in ("agent", "audit_count", "audit_bytes"):
        del head[key]  # a head written before these were stored
    path.write_text(json.dumps(head))
    (root / "s" / "audit.jsonl").unlink()
    old = await store.load("s")
    assert old is not None and (old.agent, old.audit, old.messages) == (None, [], [msg("a")])
    assert await store.audit_trail("s") == []
    await store.save("s", update(1, 1, [], agent="billing", audit=[{"n": 2}]))
    again = await store.load("s")
    assert again is not None and (again.agent, again.audit) == ("billing", [{"n": 2}])


async def test_expired_interrupts_skip_an_unreadable_session(store: FileStore, root: Path) -> None:
    late = Interrupt(id="i", name="n", source="before_model_call", raised_at=1, expires_at=5)
    await store.save("hurt", update(0, 0, [], pending=[late]))
    await store.save("fine", update(0, 0, [], pending=[late]))
    (root / "hurt" / "head.json").write_bytes(b"{oops")
    assert [p.session_id for p in await store.expired_interrupts(10)] == ["fine"]
    assert [sid for sid, _ in store.skipped] == ["hurt"]
