"""Drive the prototype: pause -> refused bad Update -> partial answer -> full answer -> done;
then a deadline applying its default. Usage: run_proto.py PORT"""
import asyncio, os, sys, time, uuid, statistics
sys.path.insert(0, os.path.dirname(__file__))
from temporalio.client import Client, WorkflowUpdateFailedError
from temporalio.worker import Worker
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions
RUNNER = SandboxedWorkflowRunner(restrictions=SandboxRestrictions.default.with_passthrough_modules('interlude', 'demo_app', 'jsonschema', 'pydantic'))
import interlude_temporal as it

async def wait_pending(h):
    while not (p := await h.query("pending")):
        await asyncio.sleep(0.02)
    return p

async def main(port):
    client = await Client.connect(f"127.0.0.1:{port}")
    tq = "proto-" + uuid.uuid4().hex[:6]
    async with Worker(client, task_queue=tq, workflows=[it.AgentWorkflow],
                      activities=[it.model_activity, it.tool_activity], workflow_runner=RUNNER):
        h = await client.start_workflow("interlude.agent", args=["ops", "clean up", None],
                                        id="proto-" + uuid.uuid4().hex[:6], task_queue=tq)
        p = await wait_pending(h)
        print("pending:", [(i["name"], i["id"], i["reason"]) for i in p])
        try:
            await h.execute_update("answer", args=[{"v1:bogus": True}, "alice"])
        except WorkflowUpdateFailedError as e:
            print("refused:", e.cause.type, "-", e.cause.message)
        print("still pending:", len(await h.query("pending")))
        r = await h.execute_update("answer", args=[{p[0]["id"]: True}, "alice"])
        print("partial answer ->", r["stop_reason"], [i["tool_use"]["input"] for i in r["interrupts"]])
        r = await h.execute_update("answer", args=[{r["interrupts"][0]["id"]: False}, "bob"])
        print("full answer ->", r)
        print("result:", await h.result())
        st = await h.query("state")
        print("audit:", [(a.get("by"), a.get("answer")) for a in st.get("audit", [])])
        # latency: pause -> Update -> finished (the update returns when the run finished)
        lat = []
        for _ in range(10):
            h = await client.start_workflow("interlude.agent", args=["ops", "clean up", None],
                                            id="proto-" + uuid.uuid4().hex[:6], task_queue=tq)
            p = await wait_pending(h)
            t0 = time.perf_counter()
            r = await h.execute_update("answer", args=[{p[0]["id"]: False}, "x"])
            r = await h.execute_update("answer", args=[{r["interrupts"][0]["id"]: False}, "x"])
            lat.append((time.perf_counter() - t0) * 1000)
        print(f"2 Updates (pause->answered->paused->answered->finished): median {statistics.median(lat):.1f} ms")

if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1])))
