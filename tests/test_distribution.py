"""The distribution's own name: ``interlude-agents`` (``interlude`` on the index is an unrelated
project); the import name and the command stay ``interlude``. Every install hint says so."""

from __future__ import annotations

import re
import tomllib
from importlib import metadata

from tests.support.processes import ROOT

HINT = re.compile(r"pip install ['\"]?interlude(\[|['\"\s]|$)")


def test_the_distribution_is_interlude_agents() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["name"] == "interlude-agents"
    assert project["scripts"]["interlude"].startswith("interlude.")
    assert metadata.distribution("interlude-agents").metadata["Name"] == "interlude-agents"


def test_no_install_hint_names_the_other_project() -> None:
    places = [*ROOT.glob("src/**/*.py"), *ROOT.glob("docs/*.md"), ROOT / "README.md"]
    wrong = [
        f"{p.relative_to(ROOT)}:{n}"
        for p in places
        for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
        if HINT.search(line)
    ]
    assert wrong == []
