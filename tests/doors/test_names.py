"""Who answered is a person, not a spelling: ``by`` is normalised (Unicode NFKC, case-folded,
trimmed) before votes are counted, so one person cannot make a quorum of two by typing their
name twice; a name mixing scripts (Latin with a Cyrillic look-alike) is refused (issue 34:
"ana", "Ana", "ana " and "ana" with a Cyrillic first letter counted as different people)."""

from __future__ import annotations

from typing import Any

import pytest

from interlude import Agent, ToolUse, tool
from interlude.errors import ResumeError, ResumeInputError
from interlude.hooks import BeforeToolCallEvent
from interlude.testing import ScriptedModel


class Deploys:
    """A deploy that two different people must approve (a quorum of two, no groups)."""

    def __init__(self) -> None:
        self.deployed: list[str] = []

        @tool
        def deploy(env: str) -> str:
            """Deploy.

            Args:
                env: Where to.
            """
            self.deployed.append(env)
            return f"deployed to {env}"

        self.agent = Agent(
            ScriptedModel([[ToolUse("t1", "deploy", {"env": "prod"})], "ok"]), tools=[deploy]
        )
        self.agent.hooks.add_callback(BeforeToolCallEvent, self._two)

    @staticmethod
    def _two(event: BeforeToolCallEvent) -> None:
        if event.interrupt("deploy", "Deploy?", response_type=bool, quorum=2) is not True:
            event.cancel("not approved")

    def ask(self) -> str:
        [question] = self.agent("ship it").interrupts
        return str(question.id)


SAME_PERSON = {
    "capitals": "ANA",
    "a trailing space": "Ana ",
    "a leading space": " ana",
    "full-width letters": "\uff41\uff4e\uff41",  # ana in full-width letters
    "a full-width capital": "\uff21na",  # a full-width capital A, then na
}


@pytest.mark.parametrize("spelling", list(SAME_PERSON))
def test_the_same_name_spelled_otherwise_is_one_person(spelling: str) -> None:
    d = Deploys()
    iid = d.ask()
    d.agent.resume({iid: True}, by="ana")
    assert d.agent.is_paused and d.deployed == []  # one vote of two
    before = d.agent.export_state()

    with pytest.raises(ResumeError):  # ana again, refused as "ana" itself would be
        d.agent.resume({iid: True}, by=SAME_PERSON[spelling])

    assert d.deployed == [] and d.agent.export_state() == before
    d.agent.resume({iid: True}, by="bo")  # a second person settles it
    assert d.deployed == ["prod"]


@pytest.mark.parametrize("name", ["\u0430na", "an\u0430", "b\u043e"])  # Cyrillic a and o
def test_a_name_mixing_scripts_is_refused(name: str) -> None:
    d = Deploys()
    iid = d.ask()
    before: Any = d.agent.export_state()

    with pytest.raises(ResumeInputError) as refused:
        d.agent.resume({iid: True}, by=name)

    assert getattr(refused.value, "code", None) == "invalid_answer"
    assert d.deployed == [] and d.agent.export_state() == before
    d.agent.resume({iid: True}, by="\u0410\u043d\u043d\u0430")  # Anna in Cyrillic: one script
    assert d.agent.is_paused and d.deployed == []
