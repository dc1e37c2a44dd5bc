// A server written with the official TypeScript SDK (npm @modelcontextprotocol/sdk), a peer we did not write.
// Usage: node ts_server.mjs (stdio). Its tool `ask` pushes one form elicitation mid-call.
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";

const server = new McpServer({ name: "ts-peer-server", version: "1.0.0" });
server.registerTool("ask", { description: "Asks a name mid-call" }, async () => {
  const answer = await server.server.elicitInput({
    mode: "form",
    message: "Your name?",
    requestedSchema: { type: "object", properties: { name: { type: "string" } }, required: ["name"] },
  });
  const text = answer.action === "accept" ? `hello ${answer.content.name}` : answer.action;
  return { content: [{ type: "text", text }] };
});
await server.connect(new StdioServerTransport());
