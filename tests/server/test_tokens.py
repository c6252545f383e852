"""Tokens: from a JSON file or $INTERLUDE_TOKENS, checked at start."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from interlude.errors import ConfigurationError
from interlude.server import create_app, load_tokens


def test_tokens_from_a_file_or_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "tokens.json"
    path.write_text(json.dumps({"t" * 16: "ana", "u" * 20: "bo b"}))
    assert load_tokens(path) == {"t" * 16: "ana", "u" * 20: "bo b"}
    monkeypatch.setenv("INTERLUDE_TOKENS", f" {'a' * 16}=ana , {'b' * 16}=bo ")
    assert load_tokens(None) == {"a" * 16: "ana", "b" * 16: "bo"}
    monkeypatch.delenv("INTERLUDE_TOKENS")
    assert load_tokens(None) == {}


@pytest.mark.parametrize(
    "text, message",
    [
        ("short=ana", "shorter than 16"),
        ("x" * 20, "has no '=name'"),
        ("x" * 20 + "=", "not printable"),
        ("x" * 20 + "=a\tb", "not printable"),
    ],
)
def test_bad_tokens_are_refused_without_showing_them(
    text: str, message: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("INTERLUDE_TOKENS", text)
    with pytest.raises(ConfigurationError, match=message) as info:
        load_tokens(None)
    assert "x" * 10 not in str(info.value)


def test_a_malformed_file_and_no_tokens_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "tokens.json"
    path.write_text('["not", "a", "map"]')
    with pytest.raises(ConfigurationError, match="one object"):
        load_tokens(path)
    with pytest.raises(ConfigurationError, match="cannot read"):
        load_tokens(tmp_path / "missing.json")
    with pytest.raises(ConfigurationError, match="no tokens"):
        create_app(f"sqlite:///{tmp_path}/unused.db", tokens={})
    with pytest.raises(ConfigurationError, match="needs the App"):
        create_app(f"sqlite:///{tmp_path}/unused.db", tokens={"t" * 16: "ana"}, worker=True)


@pytest.mark.parametrize(
    "value, message",
    [
        ({"name": "ana", "groups": "ops"}, "list of printable names"),
        ({"name": "ana", "groups": ["o ps"]}, "list of printable names"),
        ({"name": "ana", "groups": [""]}, "list of printable names"),
        ({"name": "ana", "group": ["ops"]}, "unknown keys"),
        ({"groups": ["ops"]}, "not printable"),
    ],
)
def test_bad_groups_are_refused(tmp_path: Path, value: object, message: str) -> None:
    path = tmp_path / "tokens.json"
    path.write_text(json.dumps({"t" * 16: value}))
    with pytest.raises(ConfigurationError, match=message):
        load_tokens(path)
    with pytest.raises(ConfigurationError, match=message):
        create_app("sqlite:///:memory:", tokens={"t" * 16: value})  # type: ignore[dict-item]
