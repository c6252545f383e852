"""Approval rules as reviewed code: one policy over every tool call an agent makes.

::

    from interlude.policy import Policy, Rule

    policy = Policy(
        [
            Rule(tool="pay", when="input.amount > 100", then="ask", approvers=["finance"]),
            Rule(tool="pay", then="allow"),
            Rule(tool="delete_*", then="deny", note="deleting is done by hand"),
        ],
        default="ask",
        version="2026-11",
    )
    agent = Agent(model, tools=[...], policy=policy)  # or shadow=candidate, to compare first

Rules are tried in order; the first that covers the call's tool (a name or a glob) and whose
condition holds decides: ``allow`` (runs, recorded), ``ask`` (the approval question) or
``deny`` (an error result with the rule's note; nothing runs). Every decision goes into the
audit trail with the policy's version and the rule. :meth:`Policy.replay` tells what a new
policy would have done over the stored sessions, running nothing. See docs/policy.md.
"""

from ._call import Decision, PolicyCall, Unknown, Verdict
from ._policy import Policy
from ._replay import ReplayChange, ReplayReport, UnjudgedCall
from ._rules import Rule

__all__ = [
    "Decision",
    "Policy",
    "PolicyCall",
    "ReplayChange",
    "ReplayReport",
    "Rule",
    "UnjudgedCall",
    "Unknown",
    "Verdict",
]
