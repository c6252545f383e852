"""``journal_update`` makes the same SessionUpdate as its constructor, only faster."""

from __future__ import annotations

import dataclasses

import pytest

from interlude.sessions import SessionUpdate
from interlude.sessions._protocol import journal_update


def test_journal_update_equals_the_constructed_update() -> None:
    fields = {
        "expected_version": 3,
        "first_index": 7,
        "new_messages": [{"role": "user", "content": []}],
        "pause": {"step": {"kind": "before_model_call"}},
        "pending": None,
        "tools": ["a", "b"],
        "format_version": 9,
        "state": {"k": 1},
        "claim": {"owner": "me"},
        "agent": "bot",
        "audit": [{"entry": 1}],
    }
    made = journal_update(*fields.values())
    expected = SessionUpdate(**fields)  # type: ignore[arg-type]
    assert made == expected
    assert type(made) is SessionUpdate
    for f in dataclasses.fields(SessionUpdate):  # every slot set, to the same value
        assert getattr(made, f.name) == getattr(expected, f.name)
    assert (
        made.applied_answers == []
        and made.applied_answers is not journal_update(*fields.values()).applied_answers
    )  # a fresh list each time, as the default factory gives


def test_journal_update_is_frozen() -> None:
    made = journal_update(1, 0, [], None, None, [], 1, None, None, None, [])
    with pytest.raises(dataclasses.FrozenInstanceError):
        made.pause = {}  # type: ignore[misc]
