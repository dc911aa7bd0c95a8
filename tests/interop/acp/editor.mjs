// The editor's end of an ACP connection, on the SDK's client(): it answers
// the agent's session/request_permission (allow, or hold until the test
// releases it), serves fs/read_text_file and fs/write_text_file from disk,
// and records every session/update. Reached by spawning a command (the
// agent, or the bus in stdio mode) or through a bus socket (unix, tcp).
import { spawn } from "node:child_process";
import fs from "node:fs";
import net from "node:net";
import { Readable, Writable } from "node:stream";

import * as acp from "@agentclientprotocol/sdk";

import { sha256 } from "./text.mjs";

const WAIT_MS = 10000;

function withTimeout(promise, ms, what) {
  if (!ms) return promise;
  let timer;
  const timeout = new Promise((_, reject) => (timer = setTimeout(() => reject(new Error(`${what}: timed out after ${ms} ms`)), ms)));
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

export class Editor {
  constructor(n) {
    this.n = n;
    this.policy = "allow"; // or "hold": permission requests wait for releaseHeld()
    this.updates = [];
    this.raw = []; // every message read, in wire order, before the SDK dispatches it
    this.asked = [];
    this.held = [];
    this.reads = [];
    this.writes = [];
    this.app = acp
      .client({ name: `stdio-bus-interop-editor-${n}` })
      .onRequest(acp.methods.client.session.requestPermission, ({ params, signal }) => {
        this.asked.push({ sessionId: params.sessionId, title: params.toolCall.title, options: params.options.map((o) => o.optionId) });
        if (this.policy === "allow") return { outcome: { outcome: "selected", optionId: "allow" } };
        return new Promise((resolve) => this.held.push({ resolve, signal }));
      })
      .onRequest(acp.methods.client.fs.readTextFile, ({ params }) => {
        const content = fs.readFileSync(params.path, "utf8");
        this.reads.push({ path: params.path, bytes: Buffer.byteLength(content), sha256: sha256(content) });
        return { content };
      })
      .onRequest(acp.methods.client.fs.writeTextFile, ({ params }) => {
        fs.writeFileSync(params.path, params.content);
        this.writes.push({ path: params.path, bytes: Buffer.byteLength(params.content), sha256: sha256(params.content) });
        return {};
      })
      .onNotification(acp.methods.client.session.update, ({ params }) => {
        this.updates.push(params);
      });
  }

  /** Permission requests whose $/cancel_request the agent sent (their signal aborted). */
  heldCancelled() {
    return this.held.filter((h) => h.signal.aborted).length;
  }

  releaseHeld(answer) {
    for (const h of this.held.splice(0)) h.resolve(answer);
  }

  async waitFor(predicate, what, timeoutMs = WAIT_MS) {
    const deadline = Date.now() + timeoutMs;
    while (!predicate()) {
      if (this.ended) throw new Error(`${what}: the connection ended first`);
      if (Date.now() >= deadline) throw new Error(`${what}: not seen within ${timeoutMs} ms`);
      await new Promise((r) => setTimeout(r, 2));
    }
  }

  async initialize({ timeoutMs } = {}) {
    return withTimeout(this.conn.agent.request(acp.methods.agent.initialize, {
      protocolVersion: acp.PROTOCOL_VERSION,
      clientCapabilities: { fs: { readTextFile: true, writeTextFile: true } },
      clientInfo: { name: `stdio-bus-interop-editor-${this.n}`, version: "1.0.0" },
    }), timeoutMs, "initialize");
  }

  async newSession({ timeoutMs } = {}) {
    const r = await withTimeout(this.conn.agent.request(acp.methods.agent.session.new, { cwd: "/", mcpServers: [] }), timeoutMs, "session/new");
    return r.sessionId;
  }

  /** One turn: its stop reason and the session's updates that arrived during it. */
  async prompt(sessionId, text, { cancellationSignal, timeoutMs, keep = true } = {}) {
    const from = this.raw.length;
    const r = await withTimeout(this.conn.agent.request(acp.methods.agent.session.prompt,
      { sessionId, prompt: [{ type: "text", text }] }, cancellationSignal ? { cancellationSignal } : undefined), timeoutMs, "session/prompt");
    const out = { stopReason: r.stopReason };
    // ACP prompt turn: the agent sends a turn's updates before its answer
    const mine = this.raw.slice(from).filter((m) => m.method === acp.methods.client.session.update && m.params.sessionId === sessionId);
    out.count = mine.length;
    if (keep) out.updates = mine.map((m) => m.params.update);
    this.lastTurn = mine;
    return out;
  }

  /** Ends the connection as an editor does: closes the agent's stdin (or
   * half-closes the socket); waits for a spawned child to exit when `wait`. */
  async close({ wait = false } = {}) {
    if (this.child) {
      this.child.stdin.end();
      if (wait && this.child.exitCode === null && this.child.signalCode === null)
        await withTimeout(new Promise((r) => this.child.once("exit", r)), WAIT_MS, "the spawned process's exit").catch(() => this.child.kill("SIGKILL"));
    } else if (this.socket && !this.socket.destroyed) {
      // Resolves once the end is sent (shutdown(2) done), not merely asked
      // for: Node sends it later, and a client that reconnects at once would
      // otherwise reach the daemon before its own end does, which no daemon
      // can tell apart from a second editor arriving while the first stays.
      const sent = new Promise((r) => {
        this.socket.once("close", r);
        this.socket.end(r);
      });
      await withTimeout(sent, WAIT_MS, "the socket's end").catch(() => this.socket.destroy());
    }
  }
}

/** An Editor connected to `target`: {how: "--spawn", args: [cmd, ...]},
 * {how: "--unix", args: [path]} or {how: "--tcp", args: ["host:port"]}. */
export async function open(target, n) {
  const ed = new Editor(n);
  let input;
  let output;
  if (target.how === "--spawn") {
    const [cmd, ...args] = target.args;
    ed.child = spawn(cmd, args, { stdio: ["pipe", "pipe", "inherit"] });
    ed.child.stdin.on("error", () => {}); // EPIPE after the agent is gone
    ed.child.once("exit", () => (ed.ended = true));
    input = Readable.toWeb(ed.child.stdout);
    output = Writable.toWeb(ed.child.stdin);
  } else {
    const address = target.how === "--unix" ? { path: target.args[0] }
      : { host: target.args[0].split(":")[0], port: Number(target.args[0].split(":")[1]) };
    ed.socket = await new Promise((resolve, reject) => {
      const s = net.createConnection(address);
      s.once("connect", () => { s.off("error", reject); resolve(s); });
      s.once("error", reject);
    });
    ed.socket.on("error", () => {}); // a reset ends the stream; the connection sees the end
    ed.socket.once("close", () => (ed.ended = true));
    input = Readable.toWeb(ed.socket);
    output = Writable.toWeb(ed.socket);
  }
  const stream = acp.ndJsonStream(output, input);
  // The SDK hands a notification to its handler later than a response that
  // follows it on the wire: a turn's updates are judged on what was read
  const tap = new TransformStream({ transform: (m, c) => { ed.raw.push(m); c.enqueue(m); } });
  ed.conn = ed.app.connect({ readable: stream.readable.pipeThrough(tap), writable: stream.writable });
  ed.conn.closed.then(() => (ed.ended = true), () => (ed.ended = true));
  return ed;
}
