// Real MCP software through the stdio Bus daemon: the pinned, unmodified
// SDK client (Client + StdioClientTransport, or the SDK's framing over a
// socket) and reference servers (server-everything, server-memory) as the
// daemon's workers. Helpers for bus.test.mjs.
import { spawn } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import {
  CreateMessageRequestSchema,
  ListRootsRequestSchema,
  LoggingMessageNotificationSchema,
} from "@modelcontextprotocol/sdk/types.js";

import { SocketClientTransport } from "./socket_transport.mjs";

const here = path.dirname(fileURLToPath(import.meta.url));
export const INTEROP = path.resolve(here, "..");
export const DAEMON = process.env.STDIO_BUS ?? path.resolve(INTEROP, "../../build/stdio_bus");
export const NODE = process.execPath;
const modules = path.join(INTEROP, "node_modules/@modelcontextprotocol");
export const EVERYTHING = path.join(modules, "server-everything/dist/index.js");
export const MEMORY = path.join(modules, "server-memory/dist/index.js");

export const WAIT_MS = 10000; // deadline of one wait for an event (2 shared cores, node start-up)
const POLL_MS = 5; // stderr and /proc have no change notification here: poll them

export function tmpdir() {
  return fs.mkdtempSync(path.join(os.tmpdir(), "sb-interop-"));
}

/** Polls predicate until it returns a true value (returned) or the deadline. */
export async function waitFor(predicate, what, timeoutMs = WAIT_MS) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = predicate();
    if (value) return value;
    if (Date.now() >= deadline) throw new Error(`${what}: not seen within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, POLL_MS));
  }
}

// -- pools ------------------------------------------------------------------------------
export function everythingPool(extra = {}) {
  return { id: "everything", command: NODE, args: [EVERYTHING, "stdio"], instances: 1, ...extra };
}

/** server-memory keeps its graph in MEMORY_FILE_PATH: each worker slot of
 * each daemon ($PPID) gets its own file, so state held by one worker is not
 * seen by another. */
export function memoryPool(dir, extra = {}) {
  const script = 'MEMORY_FILE_PATH="$0/memory-$PPID-$STDIO_BUS_WORKER_ID.jsonl" exec "$1" "$2"';
  return { id: "memory", command: "/bin/sh", args: ["-c", script, dir, NODE, MEMORY], instances: 1, ...extra };
}

// -- processes --------------------------------------------------------------------------
function alive(pid) {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2)[0] !== "Z";
  } catch {
    return false;
  }
}

const STARTED = /\[worker \d+ pool=\S+ pid=(\d+)\] started /g;

/** Pids of the workers a daemon's stderr says it started. */
function startedPids(stderr) {
  return [...stderr.matchAll(STARTED)].map((m) => Number(m[1]));
}

/** One daemon in socket mode, or the daemons of stdio mode (one per client,
 * each spawned by the client's StdioClientTransport). */
export class Bus {
  constructor(mode, config) {
    this.mode = mode;
    this.dir = tmpdir();
    this.configPath = path.join(this.dir, "config.json");
    fs.writeFileSync(this.configPath, JSON.stringify(config, null, 2));
    this.daemons = []; // {pid, stderr: string, exit: Promise<{code, signal}>}
  }

  async start() {
    if (this.mode === "stdio") return this;
    const flag = this.mode === "unix" ? ["--unix", path.join(this.dir, "bus.sock")] : ["--tcp", "127.0.0.1:0"];
    const proc = spawn(DAEMON, ["--config", this.configPath, ...flag], { stdio: ["ignore", "pipe", "pipe"] });
    const rec = this._track(proc, proc.stderr);
    proc.stdout.on("data", (d) => (rec.stdout += d));
    const m = await waitFor(() => rec.stderr.match(/listening on (unix|tcp):(\S+)/) || rec.exited, "the daemon listening");
    if (rec.exited) throw new Error(`the daemon exited at start-up: ${rec.stderr}`);
    this.address = m[1] === "unix" ? { path: m[2] } : { host: "127.0.0.1", port: Number(m[2].split(":").pop()) };
    this.proc = proc;
    return this;
  }

  _track(proc, stderr) {
    const rec = { pid: proc.pid, stderr: "", stdout: "", exited: false };
    rec.exit = new Promise((resolve) =>
      proc.once("exit", (code, signal) => {
        rec.exited = true;
        resolve({ code, signal });
      }),
    );
    stderr.on("data", (d) => (rec.stderr += d));
    this.daemons.push(rec);
    return rec;
  }

  /** A transport to the bus for one new client. */
  transport() {
    if (this.mode !== "stdio") return new SocketClientTransport(this.address);
    const t = new StdioClientTransport({
      command: DAEMON,
      args: ["--config", this.configPath, "--stdio"],
      stderr: "pipe",
    });
    const start = t.start.bind(t);
    t.start = async () => {
      await start();
      // the transport keeps its child private; its exit status is the daemon's
      this._track(t._process, t.stderr);
    };
    return t;
  }

  stderr() {
    return this.daemons.map((d) => d.stderr).join("");
  }

  /** How many worker messages the daemon discarded as unroutable (6.3.3). */
  discards() {
    return (this.stderr().match(/WARN .*discarding message.*(neither a response|no client is bound|several clients)/g) || []).length;
  }

  workerPids() {
    return startedPids(this.stderr());
  }

  /** Ends the bus once every client has closed: the daemon exits 0 (stdio:
   * on stdin EOF; sockets: on SIGTERM) and no worker process is left.
   * Returns the exit statuses. */
  async finish() {
    if (this.proc && !this.daemons[0].exited) this.proc.kill("SIGTERM");
    const exits = await Promise.all(
      this.daemons.map((d) =>
        Promise.race([
          d.exit,
          new Promise((_, reject) => setTimeout(() => reject(new Error(`daemon ${d.pid} did not exit`)), WAIT_MS)),
        ]),
      ),
    );
    const pids = this.workerPids();
    await waitFor(() => pids.every((pid) => !alive(pid)), `no worker left (pids ${pids})`);
    return exits;
  }

  kill() {
    for (const d of this.daemons) if (!d.exited) process.kill(d.pid, "SIGKILL");
  }

  cleanup() {
    fs.rmSync(this.dir, { recursive: true, force: true });
  }
}

// -- clients ----------------------------------------------------------------------------
/** An MCP client that supports sampling and roots, as an IDE would, and
 * records what it sees: sampling requests, roots requests, log messages,
 * errors, and every message it receives after initialization. */
export async function connectClient(transport, n) {
  const client = new Client({ name: `interop-${n}`, version: "1.0.0" }, { capabilities: { sampling: {}, roots: { listChanged: true } } });
  const seen = { sampling: [], roots: 0, logs: [], errors: [], raw: [], sent: [], closed: false };
  client.setRequestHandler(CreateMessageRequestSchema, async (req) => {
    seen.sampling.push(req.params);
    const asked = req.params.messages[0].content.text;
    return { model: "interop-stub", role: "assistant", content: { type: "text", text: `reply ${n} to: ${asked}` } };
  });
  client.setRequestHandler(ListRootsRequestSchema, async () => {
    seen.roots++;
    return { roots: [{ uri: `file:///interop/client-${n}`, name: `client-${n}` }] };
  });
  client.setNotificationHandler(LoggingMessageNotificationSchema, (note) => seen.logs.push(note.params));
  client.onerror = (e) => seen.errors.push(String(e?.message ?? e));
  client.onclose = () => (seen.closed = true);
  await client.connect(transport);
  const deliver = transport.onmessage;
  transport.onmessage = (message, extra) => {
    seen.raw.push(message);
    deliver(message, extra);
  };
  const send = transport.send.bind(transport);
  transport.send = (message, options) => {
    seen.sent.push(message);
    return send(message, options);
  };
  return { client, seen, n };
}

export function directTransport(server, env = {}) {
  const args = server === "everything" ? [EVERYTHING, "stdio"] : [MEMORY];
  return new StdioClientTransport({ command: NODE, args, env, stderr: "pipe" });
}

async function callTool(client, name, args, options) {
  return client.callTool({ name, arguments: args }, undefined, options);
}

const LEVELS = ["debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"];

/** The server-everything scenario of one client. Returns what the client
 * observed, in a form that must be equal whether the client spawned the
 * server itself or reached it through the bus. */
export async function everything({ client, seen, n }) {
  const out = {};
  out.server = client.getServerVersion();
  out.capabilities = client.getServerCapabilities();
  out.instructions = (client.getInstructions() ?? "").length > 0;
  const tools = [];
  for (let i = 0; i < 3; i++) tools.push((await client.listTools()).tools.map((t) => t.name));
  out.tools = tools[0];
  out.toolsStable = tools.every((t) => JSON.stringify(t) === JSON.stringify(tools[0]));
  out.echo = await callTool(client, "echo", { message: `hello from ${n}` });
  out.sum = await callTool(client, "get-sum", { a: n, b: 40 });

  out.long = await callTool(client, "trigger-long-running-operation", { duration: 0.3, steps: 3 }, {
    onprogress: () => {},
  });
  // The notifications as they arrived. The SDK hands a notification to its
  // handler a microtask later than a response, so progress that arrives in
  // the same read as the answer never reaches onprogress: how many calls it
  // gets depends on how reads are cut (on a loaded machine, none; seen both
  // spawning the server and through the bus). What the SDK needs for every
  // call is what is compared: each notification names the call's token and
  // arrives before its answer.
  const progress = seen.raw.filter((m) => m.method === "notifications/progress" && m.params.total === 3);
  out.progress = progress.map(({ params: { progress, total } }) => ({ progress, total }));
  const call = seen.sent.find((m) => m.method === "tools/call" && m.params.name === "trigger-long-running-operation");
  const answer = seen.raw.findIndex((m) => m.id === call.id && ("result" in m || "error" in m));
  out.progressForTheCall = progress.every((m) => m.params.progressToken === call.params._meta?.progressToken
                                          && seen.raw.indexOf(m) < answer);

  out.sampling = await callTool(client, "trigger-sampling-request", { prompt: `prompt ${n}`, maxTokens: 16 });
  out.samplingAsked = seen.sampling.map((p) => ({ text: p.messages[0].content.text, maxTokens: p.maxTokens }));

  // the server asks for roots 350 ms after initialization and logs the answer
  out.roots = await callTool(client, "get-roots-list", {});
  await waitFor(() => seen.logs.some((l) => /^Roots updated/.test(l.data)), "the server's 'Roots updated' log message");
  out.rootsAsked = seen.roots > 0;
  // one, or two when the tool's own request raced the server's timer
  out.rootsLog = seen.logs.find((l) => /^Roots updated/.test(l.data));

  out.resources = (await client.listResources()).resources.map((r) => r.uri);
  out.templates = (await client.listResourceTemplates()).resourceTemplates.map((r) => r.uriTemplate);
  out.read = await client.readResource({ uri: "demo://resource/dynamic/text/1" });
  for (const c of out.read.contents) c.text = c.text.replace(/created at .*$/, "created at <time>");

  await client.setLoggingLevel("debug");
  const before = seen.logs.length;
  await callTool(client, "toggle-simulated-logging", {}); // one message at once, then every 5 s
  const logged = await waitFor(() => seen.logs.slice(before).find((l) => l.data !== undefined), "a simulated log message");
  out.simulatedLog = LEVELS.includes(logged.level) && /-level message|level-message/.test(logged.data);
  await callTool(client, "toggle-simulated-logging", {});

  out.cancel = await cancellation(client, seen);
  out.ping = await client.ping();
  out.errors = seen.errors.filter((e) => !/unknown token/.test(e));
  return out;
}

/** Cancels a long operation after its first progress notification. The
 * tool does not watch its signal, so the server goes on sending progress
 * (which the client no longer knows) until the end of the operation; its
 * last one marks the moment an answer would follow (one server, one
 * order). A ping after it proves none came. */
async function cancellation(client, seen) {
  const abort = new AbortController();
  let rejected = false;
  try {
    await callTool(client, "trigger-long-running-operation", { duration: 0.6, steps: 6 }, {
      signal: abort.signal,
      onprogress: () => abort.abort("interop: cancelled by the client"),
    });
  } catch {
    rejected = true;
  }
  await waitFor(
    () => seen.raw.some((m) => m.method === "notifications/progress" && m.params.total === 6 && m.params.progress === 6),
    "the cancelled operation's last progress notification",
  );
  await client.ping();
  return { rejected, answeredAnyway: seen.errors.some((e) => /unknown message ID/.test(e)) };
}

/** The server-memory scenario: a client stores an entity, then reads the
 * graph four times. Returns the entity names of each read. */
export async function memory({ client, n }) {
  const name = `entity-of-client-${n}`;
  await callTool(client, "create_entities", {
    entities: [{ name, entityType: "test", observations: [`created by client ${n}`] }],
  });
  const reads = [];
  for (let i = 0; i < 4; i++) {
    const graph = (await callTool(client, "read_graph", {})).structuredContent;
    reads.push(graph.entities.map((e) => e.name).sort());
  }
  return reads;
}
