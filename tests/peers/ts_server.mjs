// A server written with the official TypeScript SDK (npm @modelcontextprotocol/sdk), a peer we did not write.
// Usage: node ts_server.mjs (stdio), or node ts_server.mjs --port N (Streamable HTTP at /mcp, a session per client).
// Its tools push elicitations mid-call: `ask` (one field), `every_kind` (a field of every kind), `confirm_delete`,
// `sign_in` (URL mode), `url_gate` (-32042 on the first call for each key) and `slow_report` (a task tool with
// execution.taskSupport "optional", through the SDK's experimental tasks: 2025-11-25).
import { randomUUID } from "node:crypto";
import { createServer } from "node:http";
import { InMemoryTaskMessageQueue, InMemoryTaskStore } from "@modelcontextprotocol/sdk/experimental/tasks";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { SSEServerTransport } from "@modelcontextprotocol/sdk/server/sse.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { UrlElicitationRequiredError } from "@modelcontextprotocol/sdk/types.js";
import { z } from "zod";

const EVERY_KIND = {
  type: "object",
  properties: {
    name: { type: "string", title: "Name", minLength: 2 },
    email: { type: "string", format: "email" },
    site: { type: "string", format: "uri" },
    born: { type: "string", format: "date" },
    age: { type: "integer", minimum: 0, maximum: 150 },
    height: { type: "number", minimum: 0.5 },
    subscribe: { type: "boolean", default: false },
    size: { type: "string", enum: ["S", "M", "L"] },
    tier: { type: "string", oneOf: [{ const: "free", title: "Free" }, { const: "pro", title: "Pro" }] },
    tags: { type: "array", items: { type: "string", enum: ["a", "b", "c"] }, minItems: 1 },
    langs: { type: "array", items: { anyOf: [{ const: "py", title: "Python" }, { const: "ts", title: "TS" }] } },
  },
  required: ["name", "email", "age"],
};
const gates = new Set();

function text(value) {
  return { content: [{ type: "text", text: value }] };
}

function makeServer() {
  const taskStore = new InMemoryTaskStore();
  const server = new McpServer(
    { name: "ts-peer-server", version: "1.0.0" },
    {
      capabilities: { tools: {}, tasks: { list: {}, cancel: {}, requests: { tools: { call: {} } } } },
      taskStore,
      taskMessageQueue: new InMemoryTaskMessageQueue(),
    },
  );
  const ask = (params) => server.server.elicitInput(params);
  server.registerTool("ask", { description: "Asks a name mid-call" }, async () => {
    const answer = await ask({
      mode: "form",
      message: "Your name?",
      requestedSchema: { type: "object", properties: { name: { type: "string" } }, required: ["name"] },
    });
    return text(answer.action === "accept" ? `hello ${answer.content.name}` : answer.action);
  });
  server.registerTool("every_kind", { description: "A form with a field of every kind" }, async () => {
    const answer = await ask({ mode: "form", message: "Tell us everything", requestedSchema: EVERY_KIND });
    const content = answer.content ?? {};
    const shown = Object.keys(content).sort().map((key) => `${key}=${JSON.stringify(content[key])}`);
    return text(`${answer.action} ${shown.join(" ")}`.trim());
  });
  server.registerTool("confirm_delete", { description: "A confirmation" }, async () => {
    const answer = await ask({
      mode: "form",
      message: "Delete the file?",
      requestedSchema: { type: "object", properties: { confirm: { type: "boolean" } }, required: ["confirm"] },
    });
    if (answer.action !== "accept") return text(answer.action);
    return text(answer.content.confirm ? "deleted" : "kept");
  });
  server.registerTool("sign_in", { description: "URL mode mid-call" }, async () => {
    const answer = await ask({
      mode: "url",
      message: "Sign in to the example service",
      url: "https://auth.example.com/ts",
      elicitationId: randomUUID(),
    });
    return text(answer.action);
  });
  server.registerTool("url_gate", { description: "-32042, then connected", inputSchema: { key: z.string() } }, async ({ key }) => {
    if (!gates.has(key)) {
      gates.add(key);
      throw new UrlElicitationRequiredError([
        { mode: "url", message: "Connect", url: `https://auth.example.com/ts/${key}`, elicitationId: `ts-${key}` },
      ]);
    }
    return text(`connected ${key}`);
  });
  server.experimental.tasks.registerToolTask(
    "slow_report",
    { description: "A report that may run as a task", inputSchema: { topic: z.string() }, execution: { taskSupport: "optional" } },
    {
      createTask: async ({ topic }, extra) => {
        const task = await extra.taskStore.createTask({ ttl: 60000, pollInterval: 100 });
        setTimeout(() => {
          extra.taskStore.storeTaskResult(task.taskId, "completed", text(`report on ${topic} (task)`)).catch(() => {});
        }, 300);
        return { task };
      },
      getTask: async (args, extra) => await extra.taskStore.getTask(extra.taskId),
      getTaskResult: async (args, extra) => await extra.taskStore.getTaskResult(extra.taskId),
    },
  );
  return server;
}

const at = process.argv.indexOf("--port");
const sseAt = process.argv.indexOf("--sse-port");
if (sseAt >= 0) {
  // The HTTP+SSE transport of 2024-11-05: GET /sse opens the stream, which names /messages?sessionId=... to POST to.
  const streams = new Map();
  const http = createServer(async (req, res) => {
    const url = new URL(req.url, "http://127.0.0.1");
    if (req.method === "GET" && url.pathname === "/sse") {
      const transport = new SSEServerTransport("/messages", res);
      streams.set(transport.sessionId, transport);
      res.on("close", () => streams.delete(transport.sessionId));
      await makeServer().connect(transport);
    } else if (req.method === "POST" && url.pathname === "/messages") {
      const transport = streams.get(url.searchParams.get("sessionId"));
      if (!transport) {
        res.writeHead(404).end("Session not found");
        return;
      }
      await transport.handlePostMessage(req, res);
    } else {
      res.writeHead(404).end("Not Found");
    }
  });
  http.listen(Number(process.argv[sseAt + 1]), "127.0.0.1");
} else if (at < 0) {
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
