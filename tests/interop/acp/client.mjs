#!/usr/bin/env node
// A small editor-side ACP client on the pinned, unmodified SDK: it reaches
// its agent by spawning a command (the agent itself, or `stdio_bus --stdio`)
// or by connecting to a bus socket, runs one scenario and prints what it
// observed as one JSON object on stdout. The same scenario must observe the
// same thing whether the client spawned the agent or reached it through the
// bus (test_acp_bus.py compares them field by field).
//
//   node client.mjs SCENARIO --spawn CMD ARGS... | --unix PATH | --tcp HOST:PORT
//   env: ACP_WORKSPACE (a directory the client serves fs requests from),
//        ACP_CLIENT (a number naming this client), ACP_SECONDS (churn length),
//        ACP_CLOSE_WAIT_MS (how long close-mid-turn watches the agent exit)
import fs from "node:fs";
import os from "node:os";
import path from "node:path";

import * as acp from "@agentclientprotocol/sdk";

import { open } from "./editor.mjs";
import { generated, sha256 } from "./text.mjs";

const [scenario, how, ...rest] = process.argv.slice(2);
const target = { how, args: rest };
const N = Number(process.env.ACP_CLIENT ?? 1);
const WORKSPACE = process.env.ACP_WORKSPACE ?? fs.mkdtempSync(path.join(os.tmpdir(), "acp-editor-"));
const WAIT_MS = 10000; // deadline of one wait for an event (2 shared cores, node start-up)

const script = (...steps) => JSON.stringify({ steps });

/** The things of one connection that must not differ between direct and bus. */
async function turns(ed) {
  const init = await ed.initialize();
  const s = await ed.newSession();
  const first = await ed.prompt(s, script({ say: 5 }));
  const file = `${WORKSPACE}/client-${N}.txt`;
  fs.writeFileSync(file, `hello from client ${N}\n`);
  const second = await ed.prompt(s, script({ permission: "edit the file" }, { read: file },
    { write: { path: `${WORKSPACE}/written-${N}.txt`, bytes: 1000, tag: `client-${N}` } }, { say: 2 }));
  return { init, session: s, first, second, asked: ed.asked, reads: ed.reads, writes: ed.writes };
}

async function flood(ed) {
  await ed.initialize();
  const s = await ed.newSession();
  const count = 20000;
  const stop = await ed.prompt(s, script({ say: count }), { keep: false });
  const texts = ed.lastTurn.map((m) => m.params.update.content.text);
  const firstOutOfOrder = texts.findIndex((t, i) => t !== `chunk ${i + 1}/${count}`);
  return { stop, count: texts.length, firstOutOfOrder, sha256: sha256(texts.join("\n")) };
}

/** Cancels a turn whose permission request is pending: session/cancel (the
 * client answers the pending request `cancelled`, ACP prompt turn,
 * Cancellation) or $/cancel_request for the prompt (the SDK's
 * cancellationSignal). Then a turn after it, to show the session goes on. */
async function cancelWhilePermission(ed, method) {
  await ed.initialize();
  const s = await ed.newSession();
  ed.policy = "hold";
  const abort = new AbortController();
  const turn = ed.prompt(s, script({ say: 1 }, { permission: "dangerous" }, { say: 3 }), { cancellationSignal: abort.signal });
  await ed.waitFor(() => ed.held.length === 1, "the permission request");
  if (method === "session/cancel") {
    await ed.conn.agent.notify(acp.methods.agent.session.cancel, { sessionId: s });
    ed.releaseHeld({ outcome: { outcome: "cancelled" } });
  } else {
    abort.abort("the user pressed stop");
    await ed.waitFor(() => ed.heldCancelled() === 1, "the agent's $/cancel_request of its permission request, or the turn's end");
    ed.releaseHeld({ outcome: { outcome: "cancelled" } });
  }
  const cancelled = await turn;
  ed.policy = "allow";
  const after = await ed.prompt(s, script({ say: 2 }));
  return { cancelled, after, asked: ed.asked.length };
}

/** $/cancel_request and session/cancel of a running turn that asks nothing. */
async function cancelRunning(ed) {
  await ed.initialize();
  const s = await ed.newSession();
  const abort = new AbortController();
  const byRequest = ed.prompt(s, script({ say: 2 }, { wait: true }, { say: 1 }), { cancellationSignal: abort.signal });
  await ed.waitFor(() => ed.raw.filter((m) => m.params?.sessionId === s && m.method === "session/update").length >= 2, "the turn's first updates");
  abort.abort("stop");
  const one = await byRequest;
  const byNotification = ed.prompt(s, script({ say: 1 }, { wait: true }));
  await ed.waitFor(() => ed.raw.filter((m) => m.params?.sessionId === s && m.method === "session/update").length >= 3, "the second turn's update");
  await ed.conn.agent.notify(acp.methods.agent.session.cancel, { sessionId: s });
  return { byRequest: one, byNotification: await byNotification };
}

/** Two sessions on one connection, prompts of both in flight together. */
async function twoSessions(ed) {
  await ed.initialize();
  const a = await ed.newSession();
  const b = await ed.newSession();
  const [ra, rb] = await Promise.all([ed.prompt(a, script({ say: 50 })), ed.prompt(b, script({ say: 70 }, { permission: "b" }))]);
  return { a: ra, b: rb, sessions: [a, b] };
}

/** A 2 MiB file read through the client and one written through it. */
async function bigFiles(ed) {
  await ed.initialize();
  const s = await ed.newSession();
  const bytes = 2 * 1024 * 1024;
  const file = `${WORKSPACE}/big-${N}.txt`;
  fs.writeFileSync(file, generated(`file-${N}`, bytes));
  const out = `${WORKSPACE}/big-written-${N}.txt`;
  const which = process.env.ACP_BIG ?? "read,write"; // the default limit's pins take one at a time
  const steps = [];
  if (which.includes("read")) steps.push({ read: file });
  if (which.includes("write")) steps.push({ write: { path: out, bytes, tag: `client-${N}` } });
  const stop = await ed.prompt(s, script(...steps));
  if (!which.includes("write")) return { stop, read: ed.reads };
  return { stop, read: ed.reads, wrote: ed.writes, onDisk: sha256(fs.readFileSync(out, "utf8")) };
}

/** The editor closes mid-turn, a permission request pending: how long until
 * the agent's process is gone (null: still there after ACP_CLOSE_WAIT_MS). */
async function closeMidTurn(ed) {
  const init = await ed.initialize();
  const pid = init._meta.pid;
  const s = await ed.newSession();
  ed.policy = "hold";
  ed.prompt(s, script({ permission: "slow" })).catch(() => {});
  await ed.waitFor(() => ed.held.length === 1, "the permission request");
  const t0 = performance.now();
  await ed.close();
  const limit = Number(process.env.ACP_CLOSE_WAIT_MS ?? 3000);
  for (;;) {
    if (!alive(pid)) return { exitMs: Math.round(performance.now() - t0), pid };
    if (performance.now() - t0 > limit) return { exitMs: null, pid };
    await new Promise((r) => setTimeout(r, 2));
  }
}

function alive(pid) {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2)[0] !== "Z";
  } catch {
    return false;
  }
}

/* The waits of churn and reconnect. A hold (a request the bus never
 * delivers or answers) lasts for ever, so a wait bounded by the pace
 * measured here finds it at any pace. A fixed 5 s did not: with two CIs on
 * 2 cores a fresh agent's start (a node process, per connection) took
 * longer, and 4 of 16 rounds read as holds. */
const FIRST_CONTACT_MS = 60000; // the first initialize of a connection: a fresh agent starts behind it
let slowestInit = 0;            // ms: the slowest initialize answered so far
const stepMs = () => Math.max(5000, 10 * slowestInit);

async function initialize(ed) {
  const t0 = performance.now();
  const r = await ed.initialize({ timeoutMs: Math.max(FIRST_CONTACT_MS, stepMs()) });
  slowestInit = Math.max(slowestInit, performance.now() - t0);
  return r;
}

/** Connects, prompts, leaves mid-turn and reconnects at once, for
 * ACP_SECONDS: counts answered prompts, refusals (the connection ends before
 * initialize is answered) and holds (a step not answered within stepMs()). */
async function churn() {
  const seconds = Number(process.env.ACP_SECONDS ?? 10);
  const end = performance.now() + seconds * 1000;
  const out = { rounds: 0, answered: 0, refused: 0, held: 0, errors: [], heldAt: [] };
  while (performance.now() < end) {
    out.rounds++;
    let ed;
    try {
      ed = await open(target, N);
    } catch (e) {
      out.refused++;
      continue;
    }
    try {
      try {
        await initialize(ed);
      } catch (e) {
        if (/timed out/.test(e.message)) {
          out.held++;
          out.heldAt.push(e.message);
        } else out.refused++;
        continue;
      }
      const s = await ed.newSession({ timeoutMs: stepMs() });
      await ed.prompt(s, script({ say: 2 }), { timeoutMs: stepMs() });
      out.answered++;
      ed.policy = "hold";
      ed.prompt(s, script({ permission: "leave" })).catch(() => {});
      await ed.waitFor(() => ed.held.length === 1, "the permission request", stepMs());
    } catch (e) {
      if (/timed out|not seen within/.test(e.message)) {
        out.held++;
        out.heldAt.push(`${e.message} (slowest initialize ${Math.round(slowestInit)} ms)`);
      } else out.errors.push(e.message);
    } finally {
      await ed.close();
    }
  }
  return out;
}

/** Reconnects at once after a complete session, rounds times. */
async function reconnect() {
  const out = { rounds: 10, answered: 0, refused: 0 };
  for (let i = 0; i < out.rounds; i++) {
    let ed;
    try {
      ed = await open(target, N);
      await initialize(ed);
      const s = await ed.newSession({ timeoutMs: stepMs() });
      await ed.prompt(s, script({ say: 1 }), { timeoutMs: stepMs() });
      out.answered++;
    } catch {
      out.refused++;
    } finally {
      await ed?.close();
    }
  }
  return out;
}

/** The spec's default pool (instances 2, requests round-robin): each step's
 * answer or error is recorded, not thrown. */
async function specDefault(ed) {
  const attempt = (p) => p.catch((e) => ({ error: { code: e.code, message: e.message } }));
  const out = { init: await attempt(ed.initialize()) };
  out.newSession = await attempt(ed.newSession());
  out.newSessionAgain = await attempt(ed.newSession());
  const s = out.newSessionAgain;
  out.first = await attempt(ed.prompt(s, script({ say: 2 })));
  out.second = await attempt(ed.prompt(s, script({ say: 3 })));
  return out;
}

/** A client that only says hello: initialize and one session. */
async function hello(ed) {
  const init = await ed.initialize();
  return { protocolVersion: init.protocolVersion, session: await ed.newSession() };
}

const SCENARIOS = {
  hello,
  specDefault,
  turns, flood, twoSessions, bigFiles, cancelRunning,
  "cancel-notification": (ed) => cancelWhilePermission(ed, "session/cancel"),
  "cancel-request": (ed) => cancelWhilePermission(ed, "$/cancel_request"),
  closeMidTurn,
};

async function main() {
  let result;
  if (scenario === "churn") result = await churn();
  else if (scenario === "reconnect") result = await reconnect();
  else {
    const ed = await open(target, N);
    try {
      result = await SCENARIOS[scenario](ed);
    } finally {
      if (scenario !== "closeMidTurn") await ed.close();
    }
  }
  process.stdout.write(JSON.stringify(result) + "\n");
  process.exit(0);
}

main().catch((e) => {
  process.stderr.write(`client ${N}: ${e.stack ?? e}\n`);
  process.exit(1);
});
