"""The skip-or-fail rule for a whole module whose tests need an optional extra: called at the
top of a ``conftest.py`` (or a test module), before the extra's packages are imported."""

from __future__ import annotations

import importlib.util

import pytest

from .services import REQUIRED

__all__ = ["require_extras"]


def require_extras(*modules: str, extra: str) -> None:
    """Skip the calling module when one of ``modules`` cannot be imported, naming ``extra``
    (the ``pip install`` extra that brings them); with ``INTERLUDE_REQUIRE_SERVICES=1`` the
    collection fails instead, so CI never skips them."""
    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    if not missing:
        return
    problem = f"{', '.join(missing)} (the [{extra}] extra) is not installed"
    if REQUIRED:
        pytest.fail(f"INTERLUDE_REQUIRE_SERVICES=1 but {problem}", pytrace=False)
    pytest.skip(problem, allow_module_level=True)
