// The user-level benchmark (BENCHMARKS.md, "Where users feel it"): the MCP
// TypeScript SDK client calling server-everything's `echo` tool directly,
// through our daemon, through the no-parse relay, and through supergateway
// and mcp-proxy. Rounds interleave the systems (the order turns every
// round); each answer is checked (once, to its own client, unchanged).
//
// usage: node bench.mjs --daemon PATH --relay PATH [--rounds N] [--out DIR]
//                       [--only a,b] [--max-clients K] [--smoke]
// --max-clients K: measure client counts up to K only (1: the one-client gap, quickly)
// --smoke: 2 clients, a few calls each, no relay; correctness only. Exits 1
// when any answer is lost, duplicated, misrouted or damaged in any system,
// or when our daemon leaves a server behind or exits other than 0.
import fs from "node:fs";
import os from "node:os";
import path from "node:path";

import { addCounts, connect, newCounts } from "./clients.mjs";
import { latency, median, throughput } from "./measure.mjs";
import { machineLoad, memKiB } from "./procstat.mjs";
import { report } from "./report.mjs";
import { killAll, systems } from "./systems.mjs";

function options(argv) {
  const o = { rounds: 3, smoke: false, only: null, out: null, daemon: null, relay: null, maxClients: null };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === "--smoke") o.smoke = true;
    else if (a === "--rounds") o.rounds = Number(argv[++i]);
    else if (a === "--only") o.only = argv[++i].split(",");
    else if (a === "--out") o.out = argv[++i];
    else if (a === "--daemon") o.daemon = argv[++i];
    else if (a === "--relay") o.relay = argv[++i];
    else if (a === "--max-clients") o.maxClients = Number(argv[++i]);
    else throw new Error(`unknown argument ${a}`);
  }
  if (!o.daemon) throw new Error("--daemon PATH is required");
  return o;
}

// what each round does; the smoke does a few of each, for correctness only
const FULL = { timeoutMs: 30000, maxClients: 32, warm100: 100, calls100: 500, warm64k: 10, calls64k: 100, window: { durationMs: 2000 } };
const SMOKE = { timeoutMs: 20000, maxClients: 2, warm100: 2, calls100: 20, warm64k: 1, calls64k: 5, window: { callsEach: 20 } };
const KIB64 = 65536;
const SETUP_ALONE = 8; // clients connected one by one, whose session setup is measured


async function runOne(name, sys, round, plan) {
  const before = await machineLoad([]);
  const rec = { system: name, round, loadBefore: before, clientsMeasured: sys.clients };
  const t0 = performance.now();
  const s = await sys.start();
  rec.startMs = performance.now() - t0;
  rec.rssIdleKiB = s.pid ? memKiB(s.pid).rss : null;
  const clients = [];
  const counts = newCounts();
  const errors = [];
  try {
    const maxK = Math.max(...sys.clients);
    // the first SETUP_ALONE one at a time (their setup is the figure), the rest at once
    for (let n = 1; n <= Math.min(maxK, SETUP_ALONE); n++) clients.push(await connect(s.transport(), n, plan.timeoutMs));
    rec.setupMs = median(clients.map((c) => c.setupMs));
    const rest = Array.from({ length: Math.max(0, maxK - SETUP_ALONE) }, (_, i) => SETUP_ALONE + 1 + i);
    clients.push(...(await Promise.all(rest.map((n) => connect(s.transport(), n, plan.timeoutMs)))));
    rec.setupFirstMs = clients[0].setupMs;
    if (rec.rssIdleKiB === null && s.pid) rec.rssIdleKiB = memKiB(s.pid).rss; // stdio: it exists once its client does
    const c1 = clients[0];
    rec.lat100 = await latency(c1, `r${round}a`, 100, plan.warm100, plan.calls100);
    rec.lat64k = await latency(c1, `r${round}b`, KIB64, plan.warm64k, plan.calls64k);
    rec.tp = {};
    for (const k of sys.clients)
      rec.tp[k] = await throughput(clients.slice(0, k), `r${round}k${k}`, 100, plan.window, s.pid, () => s.serverPids());
    const mem = s.pid ? memKiB(s.pid) : { rss: null, hwm: null };
    rec.rssLoadedKiB = mem.rss;
    rec.hwmKiB = mem.hwm;
    rec.serverProcesses = s.serverPids().length;
  } catch (e) {
    errors.push(`${e.message}\n${s.stderr().slice(-3000)}`);
  } finally {
    for (const c of clients) {
      await c.close().catch((e) => errors.push(`close: ${e.message}`));
      addCounts(counts, c.counts);
      errors.push(...c.errors.slice(0, 3));
    }
    const stop = await s.stop();
    rec.exit = stop.exit;
    rec.leftovers = stop.leftovers;
  }
  rec.counts = counts;
  rec.errors = errors;
  rec.loadAfter = await machineLoad([]);
  return rec;
}

/** Round r runs the systems in the list's order turned by r, reversed on
 * odd rounds, so no system always follows the same one. */
function order(names, r) {
  const turned = names.map((_, i) => names[(i + r) % names.length]);
  return r % 2 ? turned.reverse() : turned;
}

function bad(rec) {
  const c = rec.counts;
  const wrong = c.lost + c.duplicated + c.misrouted + c.damaged + c.failed;
  const ours = rec.system.startsWith("ours");
  const oursBad = ours && (rec.leftovers.length || rec.exit.code !== 0);
  return wrong || oursBad || (rec.errors.length && ours) || c.sent === 0;
}

async function main() {
  const o = options(process.argv.slice(2));
  const plan = { ...(o.smoke ? SMOKE : FULL) };
  if (o.maxClients) plan.maxClients = Math.min(plan.maxClients, o.maxClients);
  const all = systems({ daemon: o.daemon, relay: o.relay, maxClients: plan.maxClients });
  let names = Object.keys(all).filter((n) => !o.only || o.only.includes(n));
  if (o.smoke) names = names.filter((n) => n !== "relay-stdio");
  if (!o.relay) names = names.filter((n) => n !== "relay-stdio");
  // the smoke's two clients call at once (what misrouting needs); stdio systems have one
  if (o.smoke) for (const n of names) all[n].clients = all[n].clients.length > 1 ? [1, 2] : [1];
  else for (const n of names) all[n].clients = all[n].clients.filter((k) => k <= plan.maxClients);
  const rounds = o.smoke ? 1 : o.rounds;
  const meta = {
    started: new Date().toISOString(),
    machine: `${os.cpus().length} × ${os.cpus()[0]?.model ?? "?"}, ${Math.round(os.totalmem() / 2 ** 20)} MiB, Linux ${os.release()}`,
    node: process.version, rounds, smoke: o.smoke,
    modes: Object.fromEntries(names.map((n) => [n, all[n].mode])),
  };
  const out = o.out;
  if (out) fs.mkdirSync(out, { recursive: true });
  const results = [];
  const t0 = Date.now();
  for (let r = 0; r < rounds; r++) {
    for (const name of order(names, r)) {
      const rec = await runOne(name, all[name], r, plan);
      results.push(rec);
      const c = rec.counts;
      console.error(`round ${r + 1}/${rounds} ${name}: ${c.ok}/${c.sent} ok, lost ${c.lost}, dup ${c.duplicated}, misrouted ${c.misrouted}, ` +
        `damaged ${c.damaged}, failed ${c.failed}; p50 100 B ${rec.lat100?.p50?.toFixed(3)} ms; ` +
        `calls/s ${Object.entries(rec.tp ?? {}).map(([k, v]) => `${k}:${Math.round(v.callsPerSec)}`).join(" ")}; ` +
        `load ${rec.loadBefore.loadavg}${rec.errors.length ? `; errors: ${rec.errors.join(" | ").slice(0, 600)}` : ""}`);
      if (out) fs.appendFileSync(path.join(out, "results.jsonl"), JSON.stringify(rec) + "\n");
    }
  }
  meta.seconds = Math.round((Date.now() - t0) / 1000);
  const md = report(meta, results);
  if (out) {
    fs.writeFileSync(path.join(out, "meta.json"), JSON.stringify(meta, null, 1));
    fs.writeFileSync(path.join(out, "report.md"), md);
  }
  process.stdout.write(md);
  const failed = results.filter(bad);
  if (failed.length) {
    console.error(`FAILED: ${failed.map((r) => `${r.system} (round ${r.round + 1}): ${JSON.stringify(r.counts)} leftovers ${r.leftovers} exit ${JSON.stringify(r.exit)} ${r.errors.join(" | ").slice(0, 1000)}`).join("\n")}`);
    process.exit(1);
  }
}

// interrupted (Ctrl-C, a timeout's SIGTERM): no daemon, gateway or server outlives the run
for (const sig of ["SIGINT", "SIGTERM", "SIGHUP"])
  process.once(sig, () => {
    killAll();
    process.exit(128 + (sig === "SIGINT" ? 2 : sig === "SIGTERM" ? 15 : 1));
  });

main().catch((e) => {
  console.error(e.stack ?? e);
  process.exit(2);
});
