// The unmodified MCP TypeScript SDK client and the reference servers
// server-everything and server-memory through the stdio Bus daemon, in
// stdio, unix and TCP modes, with one and with four concurrent clients.
//
// With connection affinity (SPEC.md SB-X-10..SB-X-16) each client must see
// exactly what it sees when it spawns the server itself: the same tools,
// results, progress, sampling, roots, logging and cancellation. With the
// spec's default routing (affinity off) the tests pin down what breaks.
//
// Run: STDIO_BUS=build/stdio_bus node --test --test-concurrency=1 tests/interop/bus/
// (ctest -L interop does this; tests/interop needs `npm ci` first).
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import test from "node:test";

import {
  Bus,
  connectClient,
  directTransport,
  everything,
  everythingPool,
  memory,
  memoryPool,
  tmpdir,
  waitFor,
} from "./lib.mjs";

const MODES = ["stdio", "unix", "tcp"];
const CLIENTS = [1, 4];
const NS = (k) => Array.from({ length: k }, (_, i) => i + 1);

// -- what a client sees when it spawns the server itself --------------------------------
let reference;
async function direct() {
  if (reference) return reference;
  const dir = tmpdir();
  try {
    const runs = await Promise.all(
      NS(4).map(async (n) => {
        const e = await connectClient(directTransport("everything"), n);
        const seenEverything = await everything(e);
        await e.client.close();
        const m = await connectClient(directTransport("memory", { MEMORY_FILE_PATH: path.join(dir, `direct-${n}.jsonl`) }), n);
        const seenMemory = await memory(m);
        await m.client.close();
        return { everything: seenEverything, memory: seenMemory };
      }),
    );
    reference = Object.fromEntries(runs.map((r, i) => [i + 1, r]));
    return reference;
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

/** Runs `scenario` for k concurrent clients of a bus with this pool; checks
 * the clean close (every daemon exits 0, no worker left) and returns what
 * each client saw, and the bus for further checks. */
async function overBus(mode, pool, k, scenario, { afterClose } = {}) {
  const bus = await new Bus(mode, { pools: [pool], limits: { drain_timeout_sec: 2 } }).start();
  try {
    const clients = await Promise.all(NS(k).map((n) => connectClient(bus.transport(), n)));
    const seen = await Promise.all(clients.map((c) => scenario(c, bus)));
    for (const c of clients) await c.client.close();
    if (afterClose) await afterClose(bus);
    const exits = await bus.finish();
    for (const e of exits) assert.deepEqual(e, { code: 0, signal: null }, `daemon exit: ${bus.stderr()}`);
    // A cancelled request is never answered, and the daemon does not read
    // notifications/cancelled (SB-I-44): it stays pending until its worker
    // exits, which discards it with a warning. Any other warning is a finding.
    const complaints = bus.stderr().split("\n").filter((l) => /\b(WARN|ERROR)\b/.test(l) && !/\] stderr: /.test(l) &&
      !/pending request(\(s\))? .*discarded/.test(l) &&
      // the SDK half-closes its socket at the end; a request it cancelled is never answered
      // (the daemon does not read cancellations, SB-I-44), so the half-closed client waits
      // drain_timeout_sec for it (SB-I-41)
      !/answers still owed after drain_timeout_sec/.test(l));
    return { seen, bus, complaints };
  } catch (error) {
    bus.kill();
    throw new Error(`${error.message}\n--- daemon stderr ---\n${bus.stderr().slice(-4000)}`, { cause: error });
  } finally {
    bus.cleanup();
  }
}

const AFFINITY = {
  // one server process per client, stopped when it leaves (SB-X-15, SB-X-16)
  per_connection: (k, mode) => ({ spawn: "per_connection", instances: 4 }),
  // a fixed pool, each client bound to one worker (SB-X-11); stdio has a spare one
  connection: (k, mode) => ({ affinity: "connection", instances: mode === "stdio" ? 2 : k }),
};

for (const [variant, poolKeys] of Object.entries(AFFINITY)) {
  for (const mode of MODES) {
    for (const k of CLIENTS) {
      test(`affinity ${variant}, ${mode} mode, ${k} client(s): the same as spawning the server`, async () => {
        const ref = await direct();
        const stoppedWithTheirClients = async (bus) => {
          if (variant === "per_connection" && mode !== "stdio") {
            const pids = bus.workerPids(); // stopped as their clients leave, the daemon still up
            await waitFor(() => pids.every((pid) => !fs.existsSync(`/proc/${pid}`)), "the clients' servers stopped");
          }
        };
        const e = await overBus(mode, everythingPool(poolKeys(k, mode)), k, everything, { afterClose: stoppedWithTheirClients });
        for (const n of NS(k)) assert.deepEqual(e.seen[n - 1], ref[n].everything, `client ${n} (server-everything)`);
        assert.deepEqual(e.complaints, []);
        if (mode !== "stdio") {
          const bound = new Set([...e.bus.stderr().matchAll(/bound to worker (\d+)/g)].map((m) => m[1]));
          assert.equal(bound.size, k, "each client on a worker of its own");
        }
        const dir = tmpdir();
        try {
          const m = await overBus(mode, memoryPool(dir, poolKeys(k, mode)), k, memory);
          for (const n of NS(k)) assert.deepEqual(m.seen[n - 1], ref[n].memory, `client ${n} (server-memory)`);
          assert.deepEqual(m.complaints, []);
        } finally {
          fs.rmSync(dir, { recursive: true, force: true });
        }
      });
    }
  }
}

// -- a server that dies ends its client's connection (SB-X-14) -----------------------------
for (const mode of MODES) {
  test(`affinity connection, ${mode} mode: a server that dies closes its client`, async () => {
    const bus = await new Bus(mode, { pools: [everythingPool({ affinity: "connection", instances: 2 })] }).start();
    try {
      const c = await connectClient(bus.transport(), 1);
      await c.client.ping();
      const bound = Number(bus.stderr().match(/bound to worker \d+ pool=everything pid=(\d+)/)[1]);
      process.kill(bound, "SIGKILL");
      await waitFor(() => c.seen.closed, "the client's transport closed");
      await assert.rejects(c.client.ping());
      if (mode !== "stdio") {
        const other = await connectClient(bus.transport(), 2); // the bus serves new clients
        await other.client.ping();
        await other.client.close();
      }
      await c.client.close();
      const exits = await bus.finish();
      for (const e of exits) assert.deepEqual(e, { code: 0, signal: null });
    } catch (error) {
      bus.kill();
      throw new Error(`${error.message}\n--- daemon stderr ---\n${bus.stderr().slice(-4000)}`, { cause: error });
    } finally {
      bus.cleanup();
    }
  });
}

// -- the spec's default: what breaks ---------------------------------------------------------
/** The reduced server-everything scenario under the spec's routing, two
 * workers: each step that the default cannot serve is waited for through
 * the daemon's own discard warning, never through a timeout. */
async function everythingByDefault({ client, seen, n }, bus, { sampling = true, logging = true } = {}) {
  const out = {};
  const tools = [];
  for (let i = 0; i < 3; i++) tools.push((await client.listTools()).tools.map((t) => t.name));
  out.tools = tools;
  out.echo = await client.callTool({ name: "echo", arguments: { message: `hello from ${n}` } });
  const before = bus.discards();
  out.long = await client.callTool({ name: "trigger-long-running-operation", arguments: { duration: 0.3, steps: 3 } },
    undefined, { onprogress: () => {} });
  out.progress = seen.raw.filter((m) => m.method === "notifications/progress");
  out.progressDiscarded = bus.discards() - before;
  if (sampling) // with one client, the tool is not there at all (see the test)
    out.sampling = await client.callTool({ name: "trigger-sampling-request", arguments: { prompt: "p", maxTokens: 16 } });
  await client.setLoggingLevel("debug");
  if (logging) { // with one client: the toggle is per server process
    const logged = bus.discards();
    await client.callTool({ name: "toggle-simulated-logging", arguments: {} });
    await waitFor(() => seen.logs.length || bus.discards() > logged, "the simulated log message, or its discard");
    await client.callTool({ name: "toggle-simulated-logging", arguments: {} });
  }
  out.logs = seen.logs.length;
  out.sampled = seen.sampling.length;
  out.rootsAsked = seen.roots;
  out.ping = await client.ping();
  return out;
}

const CONDITIONAL = ["get-roots-list", "trigger-sampling-request"]; // registered once the client's capabilities are known

for (const mode of MODES) {
  test(`spec default (affinity off), ${mode} mode, 1 client: the session splits over two servers and the server's own messages are dropped`, async () => {
    const ref = (await direct())[1];
    const e = await overBus(mode, everythingPool({ instances: 2 }), 1, everythingByDefault);
    const seen = e.seen[0];
    // initialize reached one server, notifications/initialized the other: the
    // answers to tools/list alternate between two tool sets, and neither has
    // the tools that depend on the client's capabilities
    assert.notDeepEqual(seen.tools[0], seen.tools[1], "tools/list is stable");
    assert.deepEqual(seen.tools[2], seen.tools[0]);
    for (const tools of seen.tools) {
      for (const t of CONDITIONAL) assert.ok(!tools.includes(t), `${t} is listed`);
      assert.ok(tools.every((t) => ref.everything.tools.includes(t)));
    }
    assert.match(seen.sampling.content[0].text, /Tool trigger-sampling-request not found/);
    assert.equal(seen.sampling.isError, true);
    // answers routed by id work...
    assert.deepEqual(seen.echo, ref.everything.echo);
    assert.deepEqual(seen.long, ref.everything.long);
    assert.deepEqual(seen.ping, {});
    // ...messages the server sends on its own (6.3.3) are dropped with a warning
    assert.deepEqual(seen.progress, []);
    assert.equal(seen.progressDiscarded, 3);
    assert.equal(seen.logs, 0);
    assert.equal(seen.sampled, 0);
    assert.equal(seen.rootsAsked, 0);
    assert.ok(e.complaints.length >= 4 && e.complaints.every((l) => /neither a response with an id nor a sessionId/.test(l)),
      e.complaints.join("\n"));

    // server-memory: a stored entity is seen by every other read only
    const dir = tmpdir();
    try {
      const m = await overBus(mode, memoryPool(dir, { instances: 2 }), 1, memory);
      const name = "entity-of-client-1";
      assert.deepEqual(m.seen[0], [[], [name], [], [name]], "reads do not alternate between the two servers");
      assert.deepEqual(ref.memory, [[name], [name], [name], [name]]);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
}

for (const mode of ["unix", "tcp"]) {
  test(`spec default (affinity off), ${mode} mode, 4 clients: no client gets progress, log messages, sampling or roots requests`, async () => {
    // A server that received both initialize and notifications/initialized (of
    // two different clients) offers the sampling tool, and its sampling
    // request is then dropped: the call would wait for the SDK's 60 s timeout
    // (the -32001 of issue 16). Not called here; nor is the logging toggle,
    // which clients sharing a server process switch on and off for each other.
    const e = await overBus(mode, everythingPool({ instances: 2 }), 4, (c, bus) => everythingByDefault(c, bus, { sampling: false, logging: false }));
    for (const seen of e.seen) {
      assert.deepEqual(seen.progress, []);
      assert.equal(seen.logs, 0);
      assert.equal(seen.sampled, 0);
      assert.equal(seen.rootsAsked, 0);
      assert.deepEqual(seen.ping, {});
    }
  });
}
