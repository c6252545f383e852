"""Time how long until the dev server accepts a client connection and a describe namespace call."""
import asyncio, sys, time
from temporalio.client import Client

async def main(port, t0):
    while True:
        try:
            c = await Client.connect(f"127.0.0.1:{port}")
            await c.workflow_service.get_system_info(__import__("temporalio.api.workflowservice.v1", fromlist=["x"]).GetSystemInfoRequest())
            break
        except Exception as e:
            await asyncio.sleep(0.05)
    print(f"ready after {time.time()-t0:.2f}s")

asyncio.run(main(int(sys.argv[1]), float(sys.argv[2])))
