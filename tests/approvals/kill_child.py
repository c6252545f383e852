"""Run by test_kill.py in fresh processes: the payments agent of a SQLite session.

``python kill_child.py DB LOG prompt`` runs a prompt; ``... answer JSON`` resumes with the
answers; ``... recover`` carries on a stopped run; ``... settle JSON`` answers the in-doubt
question. The tool appends its amount to LOG; with ``KILL_IN_BODY=1`` the process kills itself
(SIGKILL) right after that, before the result can be kept. Prints the outcome as JSON.
"""

import json
import os
import signal
import sys

from interlude import Agent, ToolUse, tool
from interlude.sessions import SQLiteStore
from interlude.testing import ScriptedModel

DB, LOG, COMMAND = sys.argv[1], sys.argv[2], sys.argv[3]


@tool(needs_approval=True)
def pay(amount: int, to: str) -> str:
    """Pay someone."""
    with open(LOG, "a", encoding="utf-8") as f:
        f.write(f"{amount} {to}\n")
    if os.environ.get("KILL_IN_BODY") == "1":
        os.kill(os.getpid(), signal.SIGKILL)
    return f"paid {amount} to {to}"


def main() -> None:
    model = ScriptedModel(
        [[ToolUse("t1", "pay", {"amount": 10, "to": "bob"})], "done"], resumable=True
    )
    with Agent(model, tools=[pay], session=SQLiteStore(DB), session_id="s") as agent:
        if COMMAND == "prompt":
            result = agent("pay bob")
        elif COMMAND == "answer":
            result = agent.resume(json.loads(sys.argv[4]), by="ana")
        elif COMMAND == "recover":
            result = agent.recover()
        else:
            result = agent.resume(json.loads(sys.argv[4]), by="ana")
        json.dump(
            {
                "stop_reason": result.stop_reason,
                "questions": [q.to_dict() for q in result.interrupts],
                "results": [
                    b.text for m in agent.messages for b in m.content if hasattr(b, "status")
                ],
            },
            sys.stdout,
        )


if __name__ == "__main__":
    main()
