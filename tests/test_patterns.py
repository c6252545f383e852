"""A question's ``pattern`` is checked in time linear in the answer (RE2), whatever the pattern:
one that backtracks for ever in Python's ``re`` cannot freeze a resume or the web inbox, and one
RE2 cannot run makes the schema unusable (refused, named) rather than slow."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from interlude import Agent
from interlude.errors import AnswerValidationError
from interlude.hooks import BeforeInvocationEvent
from interlude.testing import ScriptedModel

CHILD = textwrap.dedent(
    """
    import sys
    from typing import Annotated
    from pydantic import Field
    from interlude import Agent
    from interlude.errors import AnswerValidationError
    from interlude.hooks import BeforeInvocationEvent
    from interlude.testing import ScriptedModel

    Code = Annotated[str, Field(pattern=r"^(a+)+$")]
    agent = Agent(ScriptedModel(["ok"]))
    agent.hooks.add_callback(
        BeforeInvocationEvent, lambda e: e.interrupt("code", response_type=Code)
    )
    [q] = agent("go").interrupts
    try:
        agent.resume({q.id: "a" * 40 + "!"})
    except AnswerValidationError as exc:
        print("refused:", exc)
    """
)


def test_a_pattern_that_backtracks_for_ever_is_checked_at_once() -> None:
    """40 characters against ``^(a+)+$`` take Python's ``re`` hours; the answer is refused at
    once (the timeout only bounds a failure: it is not a speed target)."""
    ran = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=60)
    assert ran.returncode == 0, ran.stderr
    assert "refused:" in ran.stdout and "does not match" in ran.stdout, ran.stdout


def test_a_pattern_re2_cannot_run_makes_the_schema_unusable() -> None:
    fresh, iid = _asking({"type": "string", "pattern": r"^(a)\1$"})  # a backreference
    with pytest.raises(AnswerValidationError, match="cannot be run safely"):
        fresh.resume({iid: "aa"})
    assert fresh.is_paused  # nothing changed


def _asking(schema: dict[str, object]) -> tuple[Agent, str]:
    """An agent paused on a question whose stored response schema is ``schema``."""
    agent = Agent(ScriptedModel(["ok"]))
    agent.hooks.add_callback(BeforeInvocationEvent, lambda e: e.interrupt("code"))
    agent("go")
    state = json.loads(json.dumps(agent.export_state()))
    [question] = state["pause"]["interrupts"]
    question["response_schema"] = schema
    fresh = Agent(ScriptedModel(["ok"]))
    fresh.hooks.add_callback(BeforeInvocationEvent, lambda e: e.interrupt("code"))
    fresh.import_state(state)
    return fresh, question["id"]


def test_pattern_properties_and_additional_properties_use_the_same_engine() -> None:
    schema = {
        "type": "object",
        "patternProperties": {"^x-[a-z]+$": {"type": "integer"}},
        "additionalProperties": False,
    }
    for bad, why in (({"x-one": "1"}, "integer"), ({"y": 1}, "'y'")):
        agent, iid = _asking(schema)
        with pytest.raises(AnswerValidationError, match=why):
            agent.resume({iid: bad})
    agent, iid = _asking(schema)
    assert agent.resume({iid: {"x-one": 1}}).stop_reason == "end_turn"
