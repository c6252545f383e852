// Drives an Interlude AG-UI endpoint with @ag-ui/client's HttpAgent (harness.py's Client).
// A spec is {"url", "token", "threadId", "runs": [...]}: one HttpAgent does the runs in order.
// With a spec as argv[2], it does that one and exits; without, it reads one spec per line on
// stdin and answers each with one line (so Node starts, and loads @ag-ui/client, once).
// Each run is one of
//   {"prompt": "text"}                       a user message, then runAgent()
//   {"answer": <payload>}                    every pending interrupt resolved with the payload
//                                            (its metadata echoed), through buildResumeArray
//   {"cancel": true}                         every pending interrupt cancelled
//   {"resume": [ResumeEntry, ...]}           these entries, as given (a fresh client's view)
//   {"resumeLast": {"<index>": <payload>}}   entries for the previous run's interrupts by index
// Prints, per run: the event types, the outcome, the interrupts, the RUN_ERROR, what threw.
const path = require("path");
const { randomUUID } = require("crypto");
const client = require(path.join(process.env.AGUI_NODE_MODULES, "@ag-ui/client"));

async function drive(spec) {
  const agent = new client.HttpAgent({
    url: spec.url,
    headers: { Authorization: `Bearer ${spec.token}` },
    threadId: spec.threadId,
  });
  const out = [];
  let last = [];
  for (const run of spec.runs) {
    const seen = { types: [], outcome: null, interrupts: null, error: null, thrown: null };
    let resume;
    if (run.prompt !== undefined) {
      agent.addMessage({ id: randomUUID(), role: "user", content: run.prompt });
    }
    if (run.answer !== undefined || run.cancel) {
      const responses = {};
      for (const i of agent.pendingInterrupts) {
        responses[i.id] = run.cancel
          ? { status: "cancelled" }
          : { status: "resolved", payload: run.answer, metadata: i.metadata };
      }
      resume = client.buildResumeArray(agent.pendingInterrupts, responses);
    }
    if (run.resume !== undefined) {
      resume = run.resume;
      agent.pendingInterrupts = []; // a client that kept nothing: the server must check
    }
    if (run.resumeLast !== undefined) {
      resume = Object.entries(run.resumeLast).map(([index, payload]) => ({
        interruptId: last[Number(index)].id,
        status: "resolved",
        payload,
        metadata: last[Number(index)].metadata,
      }));
      agent.pendingInterrupts = [];
    }
    try {
      await agent.runAgent(resume === undefined ? {} : { resume }, {
        onEvent({ event }) {
          seen.types.push(event.type);
          if (event.type === "STATE_SNAPSHOT") seen.state = event.snapshot;
          if (event.type === "TOOL_CALL_RESULT") (seen.results ||= []).push(event.content);
        },
        onRunFinishedEvent(params) {
          seen.outcome = params.outcome;
          if (params.outcome === "interrupt") seen.interrupts = params.interrupts;
        },
        onRunErrorEvent({ event }) {
          seen.error = { message: event.message, code: event.code };
        },
      });
    } catch (e) {
      seen.thrown = String(e && e.message ? e.message : e);
    }
    if (seen.interrupts) last = seen.interrupts;
    seen.pending = agent.pendingInterrupts.map((i) => i.id);
    seen.text = agent.messages
      .filter((m) => m.role === "assistant" && typeof m.content === "string")
      .map((m) => m.content);
    out.push(seen);
  }
  return out;
}

async function main() {
  if (process.argv[2] !== undefined) {
    process.stdout.write(JSON.stringify(await drive(JSON.parse(process.argv[2]))));
    return;
  }
  const lines = require("readline").createInterface({ input: process.stdin });
  for await (const line of lines) {
    let answer;
    try {
      answer = { runs: await drive(JSON.parse(line)) };
    } catch (e) {
      answer = { error: String(e && e.stack ? e.stack : e) };
    }
    process.stdout.write(JSON.stringify(answer) + "\n");
  }
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
