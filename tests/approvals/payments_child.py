"""Run by test_approvals.py in a fresh process: one prompt to the payments agent of a
SQLite session, printing what happened as JSON (stop reason, questions, payments made)."""

import json
import sys

from interlude import Agent, ToolUse, tool
from interlude.sessions import SQLiteStore
from interlude.testing import ScriptedModel

paid: list[list[object]] = []


@tool(needs_approval=True)
def pay(amount: int, to: str) -> str:
    """Pay someone."""
    paid.append([amount, to])
    return f"paid {amount} to {to}"


def main() -> None:
    path, session_id, key = sys.argv[1], sys.argv[2], sys.argv[3]
    model = ScriptedModel([[ToolUse("c1", "pay", {"amount": 7, "to": "eve"})], "ok"])
    with Agent(
        model, tools=[pay], session=SQLiteStore(path), session_id=session_id, signing_key=key
    ) as agent:
        result = agent("pay eve")
        out = {
            "stop_reason": result.stop_reason,
            "questions": [q.name for q in result.interrupts],
            "paid": paid,
            "decisions": agent.decisions,
            "last_audit_by": agent.audit[-1].by,
        }
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
