// A client written with the official TypeScript SDK (npm @modelcontextprotocol/sdk), a peer we did not write.
// Usage: node ts_client.mjs <mcp endpoint URL>. Prints one JSON object with what it saw.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import {
  ElicitRequestSchema,
  ElicitationCompleteNotificationSchema,
  McpError,
} from "@modelcontextprotocol/sdk/types.js";

const endpoint = new URL(process.argv[2]);
const client = new Client(
  { name: "ts-peer", version: "1.0.0" },
  { capabilities: { elicitation: { form: {}, url: {} } } },
);
const seen = { asked: [], completed: [], results: {} };
client.setRequestHandler(ElicitRequestSchema, async (request) => {
  seen.asked.push(request.params);
  if (request.params.mode === "url") return { action: "accept" };
  return { action: "accept", content: { username: "ts", email: "ts@example.com", name: "TS" } };
});
let wake = () => {};
client.setNotificationHandler(ElicitationCompleteNotificationSchema, (notification) => {
  seen.completed.push(notification.params.elicitationId);
  wake();
});

const text = (result) => result.content.map((block) => block.text).join("");
const transport = new StreamableHTTPClientTransport(endpoint);
await client.connect(transport);
seen.protocol = transport.protocolVersion;
seen.results.form = text(await client.callTool({ name: "test_elicitation", arguments: { message: "Who?" } }));
seen.results.url = text(await client.callTool({ name: "test_elicitation_url", arguments: {} }));
try {
  await client.callTool({ name: "test_elicitation_url_required", arguments: {} });
  seen.results.required = "no error";
} catch (error) {
  if (!(error instanceof McpError)) throw error;
  seen.error = { code: error.code, data: error.data };
  const [first] = error.data.elicitations;
  // The person opens the page: the fixture counts a plain GET as finishing it.
  const done = new Promise((resolve) => { wake = resolve; });
  const page = await fetch(new URL(`/fixture/complete/${first.elicitationId}`, endpoint));
  seen.page = page.status;
  await Promise.race([done, new Promise((resolve) => setTimeout(resolve, 5000))]);
  seen.results.required = text(
    await client.callTool({ name: "test_elicitation_url_required", arguments: {} }),
  );
}
await client.close();
console.log(JSON.stringify(seen));
