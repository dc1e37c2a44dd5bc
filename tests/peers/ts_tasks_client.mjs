// The official TypeScript SDK's experimental 2025-11-25 tasks, as a client of our HTTP server.
// Usage: node ts_tasks_client.mjs <mcp endpoint URL>. Prints one JSON object with what it saw.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ElicitRequestSchema } from "@modelcontextprotocol/sdk/types.js";

const endpoint = new URL(process.argv[2]);
const client = new Client(
  { name: "ts-tasks-peer", version: "1.0.0" },
  { capabilities: { elicitation: { form: {} } } },
);
const seen = { asked: [], runs: {} };
client.setRequestHandler(ElicitRequestSchema, async (request) => {
  seen.asked.push(request.params);
  return { action: "accept", content: { confirm: true } };
});

const text = (result) => result.content.map((block) => block.text).join("");
async function run(label, params, options) {
  const messages = [];
  for await (const message of client.experimental.tasks.callToolStream(params, undefined, options)) {
    if (message.type === "taskCreated") messages.push({ type: "taskCreated", taskId: message.task.taskId });
    if (message.type === "taskStatus") messages.push({ type: "taskStatus", status: message.task.status });
    if (message.type === "result") messages.push({ type: "result", text: text(message.result), isError: !!message.result.isError });
    if (message.type === "error") messages.push({ type: "error", message: String(message.error.message) });
  }
  seen.runs[label] = messages;
}

const transport = new StreamableHTTPClientTransport(endpoint);
await client.connect(transport);
seen.protocol = transport.protocolVersion;
seen.capabilities = client.getServerCapabilities();
const tools = (await client.listTools()).tools;
seen.execution = Object.fromEntries(tools.filter((t) => t.execution).map((t) => [t.name, t.execution]));
// A tool that may run as a task, asked as one: its question comes through tasks/result.
await run("confirm_delete", { name: "confirm_delete", arguments: { filename: "ts.txt" } }, { task: { ttl: 60000 } });
// A tool that runs only as a task: the SDK sees execution.taskSupport and asks for the task by itself.
await run("failing_job", { name: "failing_job", arguments: {} });
await client.close();
console.log(JSON.stringify(seen));
