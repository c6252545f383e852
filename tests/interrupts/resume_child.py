"""Run in a fresh process by test_subprocess.py (``python -m tests.interrupts.resume_child``,
from the repository root): import saved pauses and resume them.

Reads JSON from stdin: {"module": ..., "scenarios": [...]}; each scenario has
"name", "config", "turns" (the turns the new model will play), "executor", "state" (an
export_state() as JSON) and "answers" ({interrupt id: answer}), optionally "rounds" (answers by
interrupt name for later pauses) and "export" (print the state after the run). Prints one JSON
object: scenario name -> summary.
"""

import importlib
import json
import sys


def main() -> None:
    job = json.load(sys.stdin)
    helpers = importlib.import_module(job["module"])
    out = {"modules": sorted(m for m in sys.modules if m.startswith(job["module"].split(".")[0]))}
    for sc in job["scenarios"]:
        agent, model, tally, policy = helpers.build_agent(
            sc["config"], helpers.turns_from_json(sc["turns"]), sc.get("executor", "concurrent")
        )
        try:
            agent.import_state(sc["state"])
            result = agent.resume(sc["answers"])
            for answers in sc.get("rounds", []):
                if result.stop_reason != "interrupt":
                    break
                result = agent.resume({i.id: answers[i.name] for i in result.interrupts})
        except Exception as exc:  # reported, not raised: the parent asserts on it
            out[sc["name"]] = {"error": type(exc).__name__, "message": str(exc)}
            continue
        summary = helpers.summary(agent, result, model, tally, policy)
        if sc.get("export"):
            summary["state"] = agent.export_state()
        out[sc["name"]] = summary
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
