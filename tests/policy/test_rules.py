"""Policies as values: rules in order, globs, CEL and Python conditions, failing conditions,
the TOML file, and the check that finds unreachable rules and misspelt variables."""

from __future__ import annotations

from pathlib import Path

import pytest

from interlude.errors import ConfigurationError
from interlude.policy import Policy, PolicyCall, Rule, Unknown

PAYMENTS = Policy(
    [
        Rule(tool="pay", when="input.amount > 100", then="ask", approvers=["finance"], quorum=2),
        Rule(tool="pay", then="allow"),
        Rule(tool="delete_*", then="deny", note="deleting is done by hand"),
    ],
    version="2026-11",
)


def call(tool: str, **input: object) -> PolicyCall:
    return PolicyCall(tool, input, agent="ops", session="s1", path=("ops",), source="local")


def test_the_first_rule_that_covers_and_holds_decides() -> None:
    big = PAYMENTS.decide(call("pay", amount=500))
    assert (big.then, big.rule, big.approvers, big.quorum) == ("ask", 0, ("finance",), 2)
    assert big.version == "2026-11" and big.why is None
    small = PAYMENTS.decide(call("pay", amount=5))
    assert (small.then, small.rule, small.approvers) == ("allow", 1, ())
    gone = PAYMENTS.decide(call("delete_user", id=1))
    assert (gone.then, gone.rule, gone.note) == ("deny", 2, "deleting is done by hand")
    assert gone.rule_text == 'tool="delete_*" then="deny"'


def test_a_call_no_rule_decides_gets_the_default() -> None:
    assert PAYMENTS.decide(call("lookup")).then == "ask"  # "ask" unless set
    assert PAYMENTS.decide(call("lookup")).rule is None
    opened = Policy([Rule(tool="pay", then="deny")], default="allow")
    assert opened.decide(call("lookup")).then == "allow"
    assert opened.decide(call("pay")).then == "deny"


def test_a_condition_that_cannot_be_evaluated_asks_and_says_why() -> None:
    # input.amount is missing, a string, or the condition is not true/false: never allowed
    policy = Policy([Rule(tool="pay", when="input.amount < 100", then="allow")], default="deny")
    for given, why in (
        ({}, "no field"),
        ({"amount": "ten"}, "TypeError"),
    ):
        verdict = policy.decide(call("pay", **given))
        assert (verdict.then, verdict.rule) == ("ask", 0), given
        assert verdict.why is not None and why in verdict.why, verdict.why
    not_bool = Policy([Rule(tool="pay", when="input.amount", then="allow")])
    verdict = not_bool.decide(call("pay", amount=3))
    assert verdict.then == "ask" and verdict.why is not None and "not true/false" in verdict.why


def test_a_failing_condition_decides_even_when_a_later_rule_would_allow() -> None:
    policy = Policy(
        [Rule(tool="pay", when="input.limit.daily > 5", then="deny"), Rule(tool="*", then="allow")]
    )
    verdict = policy.decide(call("pay", amount=3))
    assert (verdict.then, verdict.rule) == ("ask", 0)  # not the later allow


def test_python_conditions_see_the_call_and_their_errors_ask() -> None:
    def night_ops(c: PolicyCall) -> bool:
        return c.agent == "ops" and c.source == "local" and c.input["hour"] >= 22

    policy = Policy([Rule(tool="*", when=night_ops, then="deny")], default="allow")
    assert policy.decide(call("restart", hour=23)).then == "deny"
    assert policy.decide(call("restart", hour=9)).then == "allow"
    broken = policy.decide(call("restart"))  # KeyError in the function
    assert broken.then == "ask" and "no field 'hour'" in (broken.why or "")
    shown = policy.rules[0].text
    assert shown.startswith('tool="*" when=') and shown.endswith('.night_ops() then="deny"')


def test_cel_sees_every_field_of_the_call() -> None:
    policy = Policy(
        [
            Rule(
                tool="*",
                when="agent == 'ops' && session == 's1' && 'ops' in path "
                "&& source == 'local' && tool.startsWith('re')",
                then="deny",
            )
        ],
        default="allow",
    )
    assert policy.decide(call("restart")).then == "deny"
    assert policy.decide(call("stop")).then == "allow"


def test_a_field_a_replayed_call_lacks_leaves_it_unjudged() -> None:
    replayed = PolicyCall("pay", {"amount": 3}, path=None, source=None)
    assert replayed.unknown == ("path", "source")
    with pytest.raises(Unknown):
        _ = replayed.source
    by_source = Policy([Rule(tool="pay", when="source == 'local'", then="allow")])
    assert by_source.decide(replayed).unjudged == "source"
    by_input = Policy([Rule(tool="pay", when="input.amount < 10", then="allow")])
    assert by_input.decide(replayed).then == "allow"  # needs nothing the record lacks
    by_function = Policy([Rule(tool="pay", when=lambda c: "x" in c.path, then="allow")])
    assert by_function.decide(replayed).unjudged == "path"


@pytest.mark.parametrize(
    ("rule", "problem"),
    [
        (dict(tool=""), "a name or a glob"),
        (dict(then="maybe"), "'allow', 'ask' or 'deny'"),
        (dict(approvers="finance"), "a list of group names"),
        (dict(quorum=0), "quorum"),
        (dict(expires_in=-1), "expires_in"),
        (dict(then="allow", approvers=["x"]), "for then='ask'"),
        (dict(when="input.amount >"), "not a valid expression"),
        (dict(when=42), "an expression (text) or a function"),
    ],
)
def test_a_bad_rule_is_refused_naming_what_is_wrong(rule: dict[str, object], problem: str) -> None:
    with pytest.raises(ConfigurationError) as caught:
        Rule(**rule)  # type: ignore[arg-type]
    assert problem in str(caught.value)


def test_a_bad_policy_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="not a Rule"):
        Policy(["pay"])  # type: ignore[list-item]
    with pytest.raises(ConfigurationError, match="default"):
        Policy([], default="maybe")  # type: ignore[arg-type]


def test_a_policy_file_round_trips(tmp_path: Path) -> None:
    path = tmp_path / "policy.toml"
    path.write_text(
        """
version = "2026-11"
default = "ask"

[[rules]]
tool = "pay"
when = "input.amount > 100"
then = "ask"
approvers = ["finance"]
quorum = 2
expires_in = 3600

[[rules]]
tool = "pay"
then = "allow"

[[rules]]
tool = "delete_*"
then = "deny"
note = "deleting is done by hand"
""",
        encoding="utf-8",
    )
    read = Policy.from_file(path)
    assert read.version == "2026-11" and len(read.rules) == 3
    assert read.rules[0].expires_in == 3600 and read.rules[0].approvers == ("finance",)
    assert Policy.from_dict(read.to_dict()).to_dict() == read.to_dict()
    for tool, amount in (("pay", 500), ("pay", 5), ("delete_x", 0), ("other", 0)):
        a, b = read.decide(call(tool, amount=amount)), PAYMENTS.decide(call(tool, amount=amount))
        assert (a.then, a.rule) == (b.then, b.rule)


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("rules = 3", "expected a list"),
        ('[[rules]]\ntool = "pay"\nthen = "allow"\nwhom = "x"\n', "unknown keys ['whom']"),
        ('[[rules]]\ntool = "pay"\nwhen = "input.amount >"\n', "rules[0]"),
        ('[[rules]]\ntool = "pay"\nwhen = 3\n', "expected an expression"),
        ("versions = 1", "unknown keys"),
        ("not toml [", "is not TOML"),
    ],
)
def test_a_bad_policy_file_is_reported_with_its_place(
    tmp_path: Path, text: str, problem: str
) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigurationError) as caught:
        Policy.from_file(path)
    assert problem in str(caught.value) and "bad.toml" in str(caught.value)


def test_check_finds_unreachable_rules_misspelt_variables_and_unknown_tools() -> None:
    policy = Policy(
        [
            Rule(tool="pay_*", then="ask"),
            Rule(tool="pay_card", when="input.amount > 1", then="allow"),  # after pay_*
            Rule(tool="refund", when="inputs.amount > 1", then="deny"),  # misspelt
            Rule(tool="refnud", then="deny"),  # no such tool
            Rule(tool="*", then="allow"),
            Rule(tool="lookup", then="deny"),  # after "*"
        ]
    )
    problems = policy.check(["pay_card", "refund", "lookup"])
    assert len(problems) == 4, problems
    assert problems[0].startswith("rule 1 ") and "unreachable: rule 0" in problems[0]
    assert problems[1].startswith("rule 2 ") and "reads 'inputs'" in problems[1]
    assert problems[2].startswith("rule 3 ") and "covers no tool" in problems[2]
    assert problems[3].startswith("rule 5 ") and "unreachable: rule 4" in problems[3]
    assert PAYMENTS.check(["pay", "delete_user"]) == []
