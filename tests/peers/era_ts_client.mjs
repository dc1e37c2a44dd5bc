// A client written with an old release of the official TypeScript SDK (npm @modelcontextprotocol/sdk), run beside
// that release in .cache/peers/ts-sdk-<version> (scripts/peers.py) against elicitor's server (tests/test_eras.py).
// Usage: node era_ts_client.mjs stdio COMMAND..., or node era_ts_client.mjs http URL (Streamable HTTP), with
// ERA_TOOL, ERA_ARGUMENTS and ERA_CONTENT (JSON) naming the tool, its arguments and the form's answer (by default
// elicitor's example `test_elicitation`). It calls the tool twice, answering first with the form and then with the
// release's own word for a refusal (1.13.3's schema names it "reject", the name 2025-06-18 had in draft before it
// was published as "decline"), and prints one JSON object: that word and each call's error flag and text.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import * as types from "@modelcontextprotocol/sdk/types.js";

const [kind, ...target] = process.argv.slice(2);
const refusal = types.ElicitResultSchema.shape.action.options.includes("decline") ? "decline" : "reject";
const tool = process.env.ERA_TOOL ?? "test_elicitation";
const toolArguments = JSON.parse(process.env.ERA_ARGUMENTS ?? '{"message": "Who are you?"}');
const content = JSON.parse(process.env.ERA_CONTENT ?? '{"username": "ada", "email": "ada@example.com"}');
const answers = [{ action: "accept", content }, { action: refusal }];

const client = new Client({ name: "era-ts-client", version: "1.0.0" }, { capabilities: { elicitation: {} } });
client.setRequestHandler(types.ElicitRequestSchema, async () => answers.shift());
const transport = kind === "stdio"
  ? new StdioClientTransport({ command: target[0], args: target.slice(1), stderr: "ignore" })
  : new StreamableHTTPClientTransport(new URL(target[0]));
await client.connect(transport);
const calls = [];
for (let i = 0; i < 2; i++) {
  const result = await client.callTool({ name: tool, arguments: toolArguments });
  calls.push({ is_error: Boolean(result.isError), text: result.content.map((block) => block.text ?? "").join(" ") });
}
console.log(JSON.stringify({ refusal, calls }));
await client.close();
