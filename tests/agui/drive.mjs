// One AG-UI run with the official client, as a front-end makes it: `node drive.mjs <json>`.
// The command names the endpoint, token and thread, and either a prompt (a new user message)
// or the pending interrupts of an earlier run (from another process) with the answers to send.
// Prints what the client saw as one JSON line.
import { HttpAgent, buildResumeArray } from "@ag-ui/client";

const command = JSON.parse(process.argv[2]);
const agent = new HttpAgent({
  url: command.url,
  headers: { Authorization: `Bearer ${command.token}` },
  threadId: command.threadId,
});
agent.messages = [{ id: "u1", role: "user", content: command.prompt ?? "" }];
if (command.pending) agent.pendingInterrupts = command.pending;
const seen = [];
let error = null;
const subscriber = {
  onEvent: ({ event }) => { seen.push(event.type); },
  onRunErrorEvent: ({ event }) => { error = { message: event.message, code: event.code }; },
};
const parameters = {};
if (command.responses) {
  parameters.resume = buildResumeArray(command.pending, command.responses);
}
let result = null;
try {
  result = (await agent.runAgent(parameters, subscriber)).result ?? null;
} catch (exc) {
  error = error ?? { message: String(exc) };
}
console.log(JSON.stringify({ events: seen, result, pending: agent.pendingInterrupts, error }));
