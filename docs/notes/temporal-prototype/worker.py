"""A standalone worker process: worker.py PORT TASK_QUEUE"""
import asyncio, os, sys
sys.path.insert(0, os.path.dirname(__file__))
from temporalio.client import Client
from temporalio.worker import Worker
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions
import interlude_temporal as it
RUNNER = SandboxedWorkflowRunner(restrictions=SandboxRestrictions.default.with_passthrough_modules('interlude', 'demo_app', 'jsonschema', 'pydantic'))
async def main(port, tq):
    client = await Client.connect(f"127.0.0.1:{port}")
    print(f"worker {os.getpid()} up", flush=True)
    await Worker(client, task_queue=tq, workflows=[it.AgentWorkflow],
                 activities=[it.model_activity, it.tool_activity], workflow_runner=RUNNER).run()
asyncio.run(main(int(sys.argv[1]), sys.argv[2]))
