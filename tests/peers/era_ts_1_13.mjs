// A server written with the official TypeScript SDK 1.13.3 (npm @modelcontextprotocol/sdk), its first release with
// elicitation (2025-06-18). It runs beside that release in .cache/peers/ts-sdk-1.13.3 (scripts/peers.py).
// Usage: node era_ts_1_13.mjs (stdio), or node era_ts_1_13.mjs --port N (Streamable HTTP at /mcp, a session per
// client). Tools: `echo` (plain) and `ask` (a form pushed mid-call with server.elicitInput).
import { randomUUID } from "node:crypto";
import { createServer } from "node:http";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { z } from "zod";

function text(value) {
  return { content: [{ type: "text", text: value }] };
}

function makeServer() {
  const server = new McpServer({ name: "ts-sdk-1.13.3-peer", version: "1.0.0" }, { capabilities: { tools: {} } });
  server.registerTool("echo", { description: "Says back what it was given", inputSchema: { text: z.string() } },
    async ({ text: said }) => text(`echo ${said}`));
  server.registerTool("ask", { description: "Asks a form mid-call" }, async () => {
    const answer = await server.server.elicitInput({
      message: "Who are you?",
      requestedSchema: {
        type: "object",
        properties: { name: { type: "string" }, age: { type: "integer", minimum: 0 } },
        required: ["name"],
      },
    });
    if (answer.action === "accept") return text(`accept ${answer.content.name} ${answer.content.age}`);
    return text(answer.action);
  });
  return server;
}

const at = process.argv.indexOf("--port");
if (at < 0) {
  await makeServer().connect(new StdioServerTransport());
} else {
  const sessions = new Map();
  const http = createServer(async (req, res) => {
    const id = req.headers["mcp-session-id"];
    let transport = id ? sessions.get(id) : undefined;
    if (!transport) {
      if (id) {
        res.writeHead(404).end();
        return;
      }
      transport = new StreamableHTTPServerTransport({
        sessionIdGenerator: () => randomUUID(),
        onsessioninitialized: (sid) => sessions.set(sid, transport),
      });
      transport.onclose = () => transport.sessionId && sessions.delete(transport.sessionId);
      await makeServer().connect(transport);
    }
    await transport.handleRequest(req, res);
  });
  http.listen(Number(process.argv[at + 1]), "127.0.0.1");
}
