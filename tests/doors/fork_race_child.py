"""A child process of ``test_forks``: resumes session ``p<i>`` (side ``p``) or its fork ``f<i>``
(side ``f``) for each try, approving at the same instant as the other side (a file barrier),
and prints, as one JSON list, how each try ended: ``end_turn`` (it paid) or the name of the
question it asked instead."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

from interlude import Agent, ToolResult, ToolUse, tool
from interlude.hooks import BeforeToolCallEvent
from interlude.sessions import open_store
from interlude.testing import FunctionModel, ModelRequest


def main() -> None:
    url, side, tries, barrier, paid = sys.argv[1:6]
    store = open_store(url)

    @tool
    def pay(to: str, cents: int) -> str:
        """Pay someone.

        Args:
            to: Who.
            cents: How much.
        """
        with open(paid, "a") as f:
            f.write(f"{session} {to} {cents}\n")
        return f"paid {cents} to {to}"

    def reply(request: ModelRequest) -> Any:
        results = [b for b in request.messages[-1].content if isinstance(b, ToolResult)]
        if results:
            return f"Finished: {results[0].status}"
        return [ToolUse("t1", "pay", {"to": "acme", "cents": 900})]

    def approve(event: BeforeToolCallEvent) -> None:
        if event.interrupt("approve", "pay acme?", response_type=bool) is not True:
            event.cancel("not approved")

    outcomes = []
    for i in range(int(tries)):
        session = f"{side}{i}"
        agent = Agent(FunctionModel(reply), tools=[pay], session=store, session_id=session)
        agent.hooks.add_callback(BeforeToolCallEvent, approve)
        [question] = agent.interrupts
        (Path(barrier) / f"{i}-{side}").touch()
        deadline = time.time() + 30
        while len(list(Path(barrier).glob(f"{i}-*"))) < 2 and time.time() < deadline:
            time.sleep(0.001)
        result = agent.resume({question.id: True}, by=side)
        outcomes.append(result.stop_reason if not result.interrupts else result.interrupts[0].name)
    print(json.dumps(outcomes), flush=True)


if __name__ == "__main__":
    main()
