// The systems under test: each is a way for MCP SDK clients to reach
// server-everything. `start()` brings the intermediary up and returns
// { pid, transport(n), serverPids(), stop() }; `pid` is the process whose
// CPU and memory are the intermediary's (null when the client spawns the
// server itself).
import { spawn } from "node:child_process";
import fs from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

import { alive, cpuNsOf, descendants } from "./procstat.mjs";
import { SocketClientTransport } from "./socket_transport.mjs";

const here = path.dirname(fileURLToPath(import.meta.url));
const modules = path.join(here, "node_modules");
export const NODE = process.execPath;
export const EVERYTHING = path.join(modules, "@modelcontextprotocol/server-everything/dist/index.js");
const SUPERGATEWAY = path.join(modules, "supergateway/dist/index.js");
const MCP_PROXY = path.join(modules, "mcp-proxy/dist/bin/mcp-proxy.mjs");
const SERVER = [NODE, EVERYTHING, "stdio"];
const READY_MS = 60000; // node start-up on two shared, loaded cores
const STOP_MS = 10000;

const MAX_CLIENTS = 32; // the largest client count measured

async function waitFor(predicate, what, ms = READY_MS) {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await predicate();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`${what}: not within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 20)); // no notification for these: poll
  }
}

function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once("error", reject);
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

function accepts(port) {
  return new Promise((resolve) => {
    const s = net.createConnection({ host: "127.0.0.1", port });
    s.once("connect", () => (s.destroy(), resolve(true)));
    s.once("error", () => resolve(false));
  });
}

/** Servers started ahead of any client are ready once they stop using CPU
 * (node has loaded its modules and waits on stdin): no line tells. */
async function settled(pids) {
  let last = -1;
  let calm = 0;
  await waitFor(async () => {
    const now = cpuNsOf(pids);
    calm = now - last < 2e6 ? calm + 1 : 0; // < 2 ms of CPU in 100 ms, 3 times over
    last = now;
    await new Promise((r) => setTimeout(r, 80));
    return calm >= 3;
  }, "the pre-started servers idle");
}

const launched = new Set(); // intermediaries not yet exited, for killAll

/** A long-running intermediary in its own process group, so a stop reaches
 * whatever it started; its stderr is kept for the failure report. */
function launch(argv, env = {}) {
  const proc = spawn(argv[0], argv.slice(1), { stdio: ["ignore", "ignore", "pipe"], detached: true, env: { ...process.env, ...env } });
  const rec = { proc, stderr: "", exited: false };
  launched.add(rec);
  proc.once("exit", () => launched.delete(rec));
  proc.stderr.on("data", (d) => (rec.stderr = (rec.stderr + d).slice(-20000)));
  rec.exit = new Promise((r) => proc.once("exit", (code, signal) => ((rec.exited = true), r({ code, signal }))));
  return rec;
}

/** Interrupted: SIGKILL to every intermediary's group and to whatever
 * else they started (servers in groups of their own included). */
export function killAll() {
  for (const rec of launched) {
    const pids = descendants([rec.proc.pid]);
    for (const pid of [-rec.proc.pid, ...pids]) try { process.kill(pid, "SIGKILL"); } catch {}
  }
  for (const dir of scratch) fs.rmSync(dir, { recursive: true, force: true });
}

/** SIGTERM, then SIGKILL to the group after STOP_MS; then every process it
 * had started must be gone (leftovers are killed and reported). */
async function stopLaunched(rec, started) {
  if (!rec.exited) process.kill(rec.proc.pid, "SIGTERM");
  const timer = setTimeout(() => {
    try {
      process.kill(-rec.proc.pid, "SIGKILL");
    } catch {}
  }, STOP_MS);
  const exit = await rec.exit;
  clearTimeout(timer);
  return { exit, leftovers: await reap(started) };
}

async function reap(pids) {
  try {
    await waitFor(() => pids.every((p) => !alive(p)), "servers gone", STOP_MS);
    return [];
  } catch {
    const left = pids.filter(alive);
    for (const p of left) try { process.kill(p, "SIGKILL"); } catch {}
    return left;
  }
}

const scratch = new Set(); // temporary folders not yet removed, for killAll

function tmpdir() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "sb-bench-users-"));
  scratch.add(dir);
  return dir;
}

function removeDir(dir) {
  fs.rmSync(dir, { recursive: true, force: true });
  scratch.delete(dir);
}

function writeConfig(dir, pool) {
  const file = path.join(dir, "config.json");
  fs.writeFileSync(file, JSON.stringify({ pools: [{ id: "everything", command: SERVER[0], args: SERVER.slice(1), ...pool }],
    limits: { drain_timeout_sec: 2 } }));
  return file;
}

/** Our daemon in unix or TCP mode, one daemon for every client. */
function busSocket(daemon, mode, pool) {
  return async () => {
    const dir = tmpdir();
    const config = writeConfig(dir, pool);
    const where = mode === "unix" ? ["--unix", path.join(dir, "bus.sock")] : ["--tcp", "127.0.0.1:0"];
    const rec = launch([daemon, "--config", config, ...where]);
    const m = await waitFor(() => rec.stderr.match(/listening on (unix|tcp):(\S+)/) || (rec.exited && "exited"), "the daemon listening");
    if (m === "exited") throw new Error(`the daemon exited at start: ${rec.stderr}`);
    const address = m[1] === "unix" ? { path: m[2] } : { host: "127.0.0.1", port: Number(m[2].split(":").pop()) };
    if (pool.affinity) await settled(await waitFor(() => {
      const d = descendants([rec.proc.pid]);
      return d.length >= pool.instances && d;
    }, "the pool's servers started"));
    const seen = new Set();
    return {
      pid: rec.proc.pid,
      transport: () => new SocketClientTransport(address),
      serverPids: () => { const d = descendants([rec.proc.pid]); d.forEach((p) => seen.add(p)); return d; },
      stderr: () => rec.stderr,
      async stop() {
        const r = await stopLaunched(rec, [...seen, ...descendants([rec.proc.pid])]);
        removeDir(dir);
        return r;
      },
    };
  };
}

/** A client that spawns its server (or our daemon, or the relay, in stdio
 * mode) through the SDK's StdioClientTransport: one process per client. */
function stdioSpawn(argvOf) {
  return async () => {
    const dir = tmpdir();
    const children = [];
    const seen = new Set();
    return {
      pid: null,
      childPids: () => children.map((t) => t._process?.pid).filter(Boolean),
      transport: () => {
        const [command, ...args] = argvOf(dir);
        const t = new StdioClientTransport({ command, args, stderr: "pipe" });
        children.push(t);
        return t;
      },
      serverPids() {
        const own = this.childPids();
        const d = [...own, ...descendants(own)];
        d.forEach((p) => seen.add(p));
        return d;
      },
      stderr: () => "",
      async stop() {
        // the clients closed their transports (stdin end, then SIGTERM): all must be gone
        const leftovers = await reap([...seen, ...this.serverPids()]);
        removeDir(dir);
        return { exit: { code: 0, signal: null }, leftovers };
      },
    };
  };
}

/** In stdio mode the intermediary (our daemon, the relay) is the client's
 * child: its pid is known once the first client has connected. */
function stdioIntermediary(argvOf) {
  const base = stdioSpawn(argvOf);
  return async () => {
    const s = await base();
    Object.defineProperty(s, "pid", { get: () => s.childPids()[0] ?? null });
    const serverPids = s.serverPids.bind(s);
    s.serverPids = () => serverPids().filter((p) => !s.childPids().includes(p));
    return s;
  };
}

function http(argvOf) {
  return async () => {
    const port = await freePort();
    const rec = launch(argvOf(port));
    await waitFor(async () => (rec.exited ? "exited" : await accepts(port)), "listening");
    if (rec.exited) throw new Error(`exited at start: ${rec.stderr}`);
    const url = new URL(`http://127.0.0.1:${port}/mcp`);
    const seen = new Set();
    const pids = () => { const d = descendants([rec.proc.pid]); d.forEach((p) => seen.add(p)); return d; };
    if (argvOf.preStarted) await settled(pids());
    return {
      pid: rec.proc.pid,
      transport: () => new StreamableHTTPClientTransport(url),
      serverPids: pids,
      stderr: () => rec.stderr,
      stop: () => stopLaunched(rec, [...seen, ...pids()]),
    };
  };
}

const mcpProxyArgv = (port) => [NODE, MCP_PROXY, "--server", "stream", "--host", "127.0.0.1", "--port", String(port), "--", ...SERVER];
mcpProxyArgv.preStarted = true;

/** name → { mode (what it is, stated in the report), clients, start }. */
export function systems({ daemon, relay, maxClients = MAX_CLIENTS }) {
  const MAX_CLIENTS = maxClients; // the smoke binds 2: no need to start 32 servers
  const perConnection = { spawn: "per_connection", instances: MAX_CLIENTS };
  const affinity = { affinity: "connection", instances: MAX_CLIENTS };
  return {
    direct: { mode: "the SDK's StdioClientTransport spawns server-everything: one server per client, no intermediary",
      clients: [1, 8, 32], start: stdioSpawn(() => SERVER) },
    "relay-stdio": { mode: "bench_relay (no parse, answers by order) spawned by the client in stdio mode, spawning the server: the physical limit of one extra process",
      clients: [1], start: stdioIntermediary((dir) => [relay, "--config", writeConfig(dir, {}), "--stdio"]) },
    "ours-stdio": { mode: "stdio_bus --stdio spawned by the client, `spawn: per_connection` (one server)",
      clients: [1], start: stdioIntermediary((dir) => [daemon, "--config", writeConfig(dir, { spawn: "per_connection", instances: 1 }), "--stdio"]) },
    "ours-unix-pc": { mode: `one stdio_bus --unix, \`spawn: per_connection\` (a server per client, started as it connects), instances ${MAX_CLIENTS}`,
      clients: [1, 8, 32], start: busSocket(daemon, "unix", perConnection) },
    "ours-unix-aff": { mode: `one stdio_bus --unix, \`affinity: connection\` (${MAX_CLIENTS} servers started with the daemon, each client bound to one)`,
      clients: [1, 8, 32], start: busSocket(daemon, "unix", affinity) },
    "ours-tcp-pc": { mode: `one stdio_bus --tcp 127.0.0.1, \`spawn: per_connection\`, instances ${MAX_CLIENTS}`,
      clients: [1, 8, 32], start: busSocket(daemon, "tcp", perConnection) },
    "ours-tcp-aff": { mode: `one stdio_bus --tcp 127.0.0.1, \`affinity: connection\`, ${MAX_CLIENTS} servers`,
      clients: [1, 8, 32], start: busSocket(daemon, "tcp", affinity) },
    supergateway: { mode: "supergateway --outputTransport streamableHttp --stateful --logLevel none: one server per session (the shape of our per_connection); the SDK's StreamableHTTPClientTransport",
      clients: [1, 8, 32], start: http((port) => [NODE, SUPERGATEWAY, "--stdio", SERVER.join(" "), "--outputTransport", "streamableHttp",
        "--stateful", "--port", String(port), "--logLevel", "none"]) },
    "mcp-proxy": { mode: "mcp-proxy --server stream (stateful Streamable HTTP, defaults otherwise): one server shared by every session; the SDK's StreamableHTTPClientTransport",
      clients: [1, 8, 32], start: http(mcpProxyArgv) },
  };
}
