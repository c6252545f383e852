"""The public surface: curated, sorted, importable, and light to import."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

PUBLIC_MODULES = [
    "interlude",
    "interlude.conversation",
    "interlude.errors",
    "interlude.hooks",
    "interlude.models",
    "interlude.notify",
    "interlude.otel",
    "interlude.sessions",
    "interlude.testing",
]


@pytest.mark.parametrize("name", PUBLIC_MODULES)
def test_all_is_sorted_and_every_name_exists(name: str) -> None:
    module = importlib.import_module(name)
    exported = module.__all__
    assert exported == sorted(exported), f"{name}.__all__ is not sorted"
    assert len(set(exported)) == len(exported)
    missing = [n for n in exported if not hasattr(module, n)]
    assert missing == []


def test_contract_names_exist() -> None:
    import interlude
    from interlude import errors, hooks, models, testing

    for n in [
        "Agent",
        "AgentResult",
        "Message",
        "Text",
        "ToolUse",
        "ToolResult",
        "Reasoning",
        "Interrupt",
        "ToolContext",
        "tool",
    ]:
        assert n in interlude.__all__
    for n in [
        "BeforeInvocationEvent",
        "AfterInvocationEvent",
        "MessageAddedEvent",
        "BeforeModelCallEvent",
        "AfterModelCallEvent",
        "BeforeToolCallEvent",
        "AfterToolCallEvent",
        "HookRegistry",
        "HookProvider",
    ]:
        assert n in hooks.__all__
    assert "Model" in models.__all__
    assert {"ScriptedModel", "FunctionModel"} <= set(testing.__all__)
    assert issubclass(errors.ResumeError, errors.InterludeError)
    assert not issubclass(errors.InterruptSignal, Exception)


def test_every_error_is_under_one_base() -> None:
    from interlude import errors

    for n in errors.__all__:
        obj = getattr(errors, n)
        if isinstance(obj, type) and issubclass(obj, BaseException):
            assert issubclass(obj, errors.InterludeError | errors.ControlFlowSignal), n


def test_import_is_light() -> None:
    heavy = [
        "pydantic",
        "asyncio",
        "json",
        "openai",
        "anthropic",
        "boto3",
        "psycopg",
        "sqlite3",
        "opentelemetry",
        "interlude.otel",
        "interlude.notify",
        "interlude.multiagent",
        "urllib.request",
        "smtplib",
    ]
    code = f"import interlude, sys; print([m for m in {heavy!r} if m in sys.modules])"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_the_inbox_moved_up_and_its_old_name_still_works_with_a_warning() -> None:
    """``Inbox`` and ``SessionView`` live on the operator floor (``interlude.operate``, also
    ``interlude.Inbox``); the stores' package keeps the old names through a table the floor
    fills, never importing upward, and says they moved."""
    code = """
import sys, warnings
import interlude.sessions as s
before = "interlude.operate._inbox" in sys.modules
import interlude, interlude.operate as o
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    inbox, view = s.Inbox, s.SessionView
moved = [w.category is DeprecationWarning and "interlude.operate" in str(w.message) for w in caught]
print(before, moved == [True, True], inbox is o.Inbox is interlude.Inbox, view is o.SessionView)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "True", "True", "True"]
