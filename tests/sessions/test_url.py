"""Store URLs: RFC 8089 for ``file:``, SQLAlchemy's convention for ``sqlite:``."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from interlude.errors import ConfigurationError
from interlude.sessions import FileStore, SQLiteStore, open_store, store_url
from interlude.sessions._url import local_store_path


@pytest.mark.parametrize(
    ("url", "path"),
    [
        ("file:///tmp/x", "/tmp/x"),  # RFC 8089: the absolute path /tmp/x, not ./tmp/x
        ("file://localhost/tmp/x", "/tmp/x"),
        ("file://LOCALHOST/tmp/x", "/tmp/x"),
        ("file:/tmp/x", "/tmp/x"),  # the minimal form
        ("file:////tmp/x", "/tmp/x"),  # an extra slash still names the local path
        ("file:///tmp/my%20sessions", "/tmp/my sessions"),  # %XX escapes are decoded
    ],
)
def test_file_urls_name_absolute_directories(url: str, path: str) -> None:
    assert local_store_path(url) == ("file", path, False)


@pytest.mark.parametrize(
    ("url", "fragment"),
    [
        ("file://server/share/x", "host 'server'"),
        ("file:relative/dir", "absolute path"),
        ("file:///", "no directory"),
        ("file:///tmp/x?fsync=1", "no ?query"),
    ],
)
def test_file_urls_that_name_no_local_absolute_directory_are_refused(
    url: str, fragment: str
) -> None:
    with pytest.raises(ConfigurationError, match=fragment.replace("?", r"\?")):
        local_store_path(url)


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("sqlite:///rel/s.db", ("sqlite", "rel/s.db", False)),  # three slashes: relative
        ("sqlite:////abs/s.db", ("sqlite", "/abs/s.db", False)),  # four slashes: absolute
        ("sqlite:////abs/s.db?synchronous=full", ("sqlite", "/abs/s.db", True)),
        ("sqlite:///rel.db?synchronous=normal", ("sqlite", "rel.db", False)),
        ("data/s.db", ("sqlite", "data/s.db", False)),  # a bare path
        ("/abs/s.sqlite", ("sqlite", "/abs/s.sqlite", False)),
        ("postgresql://u@h/db", None),
        ("memory:", None),
    ],
)
def test_sqlite_urls_follow_sqlalchemy(url: str, expected: object) -> None:
    assert local_store_path(url) == expected


@pytest.mark.parametrize(
    ("url", "fragment"),
    [
        ("sqlite:/x.db", "malformed store URL"),  # once made a folder named "sqlite:"
        ("sqlite:x.db", "malformed store URL"),
        ("sqlite://x.db", "malformed store URL"),
        ("sqlite:///", "malformed store URL"),
        ("sqlite:///x.db?journal=off", "unknown option"),
        ("postgresql:/db", "malformed store URL"),
        ("mysql://h/db", "unknown store URL scheme"),
        ("no-such-thing", "unknown store URL"),
    ],
)
def test_malformed_urls_are_refused_and_create_nothing(
    url: str, fragment: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigurationError, match=fragment):
        open_store(url)
    assert os.listdir(tmp_path) == []


def test_open_store_opens_file_urls_at_the_absolute_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    target = tmp_path / "abs" / "sessions"
    store = open_store(f"file://{target}")
    assert isinstance(store, FileStore) and store.directory == target
    assert target.is_dir() and sorted(os.listdir(tmp_path)) == ["abs"]  # no ./tmp/...
    assert isinstance(open_store(f"file://localhost{target}"), FileStore)


def test_open_store_keeps_sqlite_paths_and_options(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    relative = open_store("sqlite:///data/s.db?synchronous=full")
    assert isinstance(relative, SQLiteStore) and relative.path == "data/s.db"
    assert relative.synchronous == "full" and (tmp_path / "data" / "s.db").is_file()
    absolute = open_store(f"sqlite:///{tmp_path}/abs.db")
    assert isinstance(absolute, SQLiteStore) and absolute.path == f"{tmp_path}/abs.db"
    assert absolute.synchronous == "normal"


def test_store_url_round_trips(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert local_store_path(store_url("file", str(tmp_path / "a b"))) == (
        "file",
        str(tmp_path / "a b"),
        False,
    )
    assert local_store_path(store_url("file", "rel")) == ("file", str(tmp_path / "rel"), False)
    assert local_store_path(store_url("sqlite", "rel.db")) == ("sqlite", "rel.db", False)
    assert local_store_path(store_url("sqlite", "/abs.db")) == ("sqlite", "/abs.db", False)
