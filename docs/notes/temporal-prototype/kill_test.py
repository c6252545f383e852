"""Kill a worker (SIGKILL) in the middle of a tool activity; a second worker finishes the run.
The tool heartbeats; heartbeat_timeout=2s lets the server retry it on the other worker."""
import asyncio, os, signal, subprocess, sys, time, uuid
from temporalio.client import Client
PORT = int(sys.argv[1]); TQ = "kill-" + uuid.uuid4().hex[:6]
HERE = os.path.dirname(os.path.abspath(__file__))
LOG = os.path.join(HERE, "kill_calls.log")
env = dict(os.environ, PYTHONPATH="/work/main/src", PROTO_TOOL_SECONDS="3", PROTO_LOG=LOG)
def worker():
    return subprocess.Popen([sys.executable, os.path.join(HERE, "worker.py"), str(PORT), TQ], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
async def main():
    if os.path.exists(LOG): os.remove(LOG)
    a = worker(); a.stdout.readline()
    client = await Client.connect(f"127.0.0.1:{PORT}")
    h = await client.start_workflow("interlude.agent", args=["ops", "clean up", None], id=TQ, task_queue=TQ)
    while not (p := await h.query("pending")): await asyncio.sleep(0.05)
    upd = await h.start_update("answer", args=[{i["id"]: True for i in p}, "alice"],
                               wait_for_stage=__import__("temporalio.client", fromlist=["x"]).WorkflowUpdateStage.ACCEPTED)
    await asyncio.sleep(1.0)  # both tool bodies are running on worker A now
    desc = await h.describe()
    print("pending activities before the kill:", [(x.activity_type.name, x.attempt) for x in desc.raw_description.pending_activities])
    os.kill(a.pid, signal.SIGKILL); a.wait(); t_kill = time.perf_counter()
    print("killed worker A", a.pid)
    b = worker(); b.stdout.readline(); print("started worker B", b.pid)
    r = await upd.result()
    print(f"update result after {time.perf_counter()-t_kill:.1f}s:", r)
    print("tool completions (pid tool path):", open(LOG).read().splitlines())
    hist = await h.fetch_history()
    sched = [e for e in hist.events if e.HasField("activity_task_scheduled_event_attributes")]
    started = [e.activity_task_started_event_attributes.attempt for e in hist.events if e.HasField("activity_task_started_event_attributes")]
    print("activities scheduled:", [e.activity_task_scheduled_event_attributes.activity_type.name for e in sched], "started attempts:", started)
    b.send_signal(signal.SIGINT); b.wait(timeout=10)
asyncio.run(main())
