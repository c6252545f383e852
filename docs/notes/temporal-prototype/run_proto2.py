"""Deadline applies its default via a durable timer; then replay the histories (determinism)."""
import asyncio, os, sys, uuid
sys.path.insert(0, os.path.dirname(__file__))
os.environ["PROTO_DEADLINE"] = "1.0"
from temporalio.client import Client
from temporalio.worker import Worker, Replayer
from run_proto import RUNNER, wait_pending
import interlude_temporal as it

async def main(port):
    client = await Client.connect(f"127.0.0.1:{port}")
    tq = "proto2-" + uuid.uuid4().hex[:6]
    async with Worker(client, task_queue=tq, workflows=[it.AgentWorkflow],
                      activities=[it.model_activity, it.tool_activity], workflow_runner=RUNNER):
        h = await client.start_workflow("interlude.agent", args=["ops", "clean up", None],
                                        id="proto2-" + uuid.uuid4().hex[:6], task_queue=tq)
        p = await wait_pending(h)
        print("pending with deadlines:", [(i["name"], i.get("expires_at"), i.get("default")) for i in p])
        print("result after the deadline:", await h.result())
        st = await h.query("state")
        print("audit:", [(a.get("by"), a.get("answer")) for a in st.get("audit", [])])
        timers = [e.event_type for e in (await h.fetch_history()).events if e.event_type == 18 or "TIMER" in str(e.event_type)]
        hist = await h.fetch_history()
        print("timer events:", sum(1 for e in hist.events if e.HasField("timer_started_event_attributes")))
    r = await Replayer(workflows=[it.AgentWorkflow], workflow_runner=RUNNER).replay_workflow(hist)
    print("replay of the deadline run:", "ok" if r.replay_failure is None else r.replay_failure)
    # replay every finished interlude.agent workflow on the server
    n = bad = 0
    async for w in client.list_workflows("WorkflowType = 'interlude.agent' AND ExecutionStatus = 'Completed'"):
        hist = await client.get_workflow_handle(w.id, run_id=w.run_id).fetch_history()
        r = await Replayer(workflows=[it.AgentWorkflow], workflow_runner=RUNNER).replay_workflow(hist, raise_on_replay_failure=False)
        n += 1; bad += r.replay_failure is not None
    print(f"replayed {n} completed agent workflows, {bad} nondeterminism failures")

asyncio.run(main(int(sys.argv[1])))
