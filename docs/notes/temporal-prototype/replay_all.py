"""Replay every completed interlude.agent workflow with the current code (no env changes)."""
import asyncio, os, sys
sys.path.insert(0, os.path.dirname(__file__))
from temporalio.client import Client
from temporalio.worker import Replayer
from run_proto import RUNNER
import interlude_temporal as it
async def main(port, deadline):
    client = await Client.connect(f"127.0.0.1:{port}")
    n = bad = 0
    async for w in client.list_workflows("WorkflowType = 'interlude.agent' AND ExecutionStatus = 'Completed'"):
        hist = await client.get_workflow_handle(w.id, run_id=w.run_id).fetch_history()
        has_timer = any(e.HasField("timer_started_event_attributes") for e in hist.events)
        if has_timer != deadline: continue
        r = await Replayer(workflows=[it.AgentWorkflow], workflow_runner=RUNNER).replay_workflow(hist, raise_on_replay_failure=False)
        n += 1; bad += r.replay_failure is not None
    print(f"deadline={deadline}: replayed {n} completed agent workflows, {bad} nondeterminism failures")
asyncio.run(main(int(sys.argv[1]), bool(os.environ.get("PROTO_DEADLINE"))))
