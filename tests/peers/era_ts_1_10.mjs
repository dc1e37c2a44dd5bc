// A server written with the official TypeScript SDK 1.10.2 (npm @modelcontextprotocol/sdk), from before elicitation:
// it answers initialize with 2024-11-05, over stdio and over Streamable HTTP, which it already has. It runs beside
// that release in .cache/peers/ts-sdk-1.10.2 (scripts/peers.py).
// Usage: node era_ts_1_10.mjs (stdio), or node era_ts_1_10.mjs --port N (Streamable HTTP at /mcp, a session per
// client). Tools: `echo` and `count` (progress on the way), both plain.
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
  const server = new McpServer({ name: "ts-sdk-1.10.2-peer", version: "1.0.0" });
  server.tool("echo", "Says back what it was given", { text: z.string() }, async ({ text: said }) => text(`echo ${said}`));
  server.tool("count", "Counts to three, saying so", async (extra) => {
    const token = extra._meta?.progressToken;
    for (const step of [1, 2, 3]) {
      if (token !== undefined) {
        await extra.sendNotification({ method: "notifications/progress", params: { progressToken: token, progress: step, total: 3 } });
      }
    }
    return text("counted to three");
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
