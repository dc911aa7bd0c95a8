// Try an MCP server over the bus: the SDK client reaches server-everything
// through build/stdio_bus (a worker of its own, "spawn": "per_connection"),
// lists its tools, runs a tool with progress, answers the server's sampling
// request, and closes.
//
//   node tests/interop/bus/demo.mjs [stdio|unix|tcp]      (after `npm ci` in tests/interop)
import { Bus, connectClient, everythingPool } from "./lib.mjs";

const mode = process.argv[2] ?? "stdio";
const config = { pools: [everythingPool({ spawn: "per_connection", instances: 4 })] };
const bus = await new Bus(mode, config).start();
console.log(`config: ${JSON.stringify(config)}`);
try {
  const { client, seen } = await connectClient(bus.transport(), 1);
  console.log(`connected over ${mode} to`, client.getServerVersion());
  console.log("tools:", (await client.listTools()).tools.map((t) => t.name).join(", "));
  const done = await client.callTool(
    { name: "trigger-long-running-operation", arguments: { duration: 0.6, steps: 3 } },
    undefined,
    { onprogress: (p) => console.log(`progress ${p.progress}/${p.total}`) },
  );
  console.log(done.content[0].text);
  const sampled = await client.callTool({ name: "trigger-sampling-request", arguments: { prompt: "hello" } });
  console.log(`sampling: the server asked ${JSON.stringify(seen.sampling[0].messages[0].content.text)}, got:`);
  console.log(sampled.content[0].text);
  await client.close();
  const exits = await bus.finish();
  console.log("daemon exit:", exits.map((e) => e.code).join(", "), "- no server process left");
} finally {
  bus.kill();
  bus.cleanup();
}
