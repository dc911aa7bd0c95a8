#!/usr/bin/env node
// An MCP stdio server built on tmcp (not on the official TypeScript SDK), as
// its README's quick start writes one: the glue the corpus needs to run the
// tmcp stack, nothing of its own beyond one read-only echo tool.
import { McpServer } from "tmcp";
import { ValibotJsonSchemaAdapter } from "@tmcp/adapter-valibot";
import { StdioTransport } from "@tmcp/transport-stdio";
import * as v from "valibot";

const server = new McpServer(
  { name: "tmcp-echo", version: "1.0.0", description: "echo over tmcp" },
  { adapter: new ValibotJsonSchemaAdapter(), capabilities: { tools: { listChanged: true } } },
);

server.tool(
  {
    name: "echo",
    description: "Returns the text it is given",
    schema: v.object({ text: v.string() }),
    annotations: { readOnlyHint: true, openWorldHint: false },
  },
  async ({ text }) => ({ content: [{ type: "text", text }] }),
);

new StdioTransport(server).listen();
