// The markdown of a run: medians over rounds of each system, the peer table,
// ratios, the gap to direct stdio for one client, correctness and load.
import { addCounts, newCounts } from "./clients.mjs";
import { median } from "./measure.mjs";

const PEERS = ["direct", "ours-unix-pc", "ours-unix-aff", "ours-tcp-pc", "ours-tcp-aff", "supergateway", "mcp-proxy"];
const GAP = ["direct", "relay-stdio", "ours-stdio", "ours-unix-pc"];

function fmt(x, digits = 2) {
  if (x === null || x === undefined || Number.isNaN(x)) return "–";
  if (Math.abs(x) >= 1000) return Math.round(x).toLocaleString("en-US");
  if (Math.abs(x) >= 100) return x.toFixed(0);
  return x.toFixed(digits);
}

function summarise(recs) {
  const m = (f) => median(recs.map((r) => { try { return f(r); } catch { return null; } }));
  const ks = recs[0]?.clientsMeasured ?? [];
  const s = {
    setup: m((r) => r.setupMs), setupFirst: m((r) => r.setupFirstMs), start: m((r) => r.startMs),
    p50: m((r) => r.lat100.p50), p99: m((r) => r.lat100.p99),
    p50k: m((r) => r.lat64k.p50), p99k: m((r) => r.lat64k.p99),
    rssIdle: m((r) => r.rssIdleKiB), rssLoaded: m((r) => r.rssLoadedKiB), hwm: m((r) => r.hwmKiB),
    procs: m((r) => r.serverProcesses), tp: {}, cpu: {}, srvCpu: {},
    counts: recs.reduce((acc, r) => addCounts(acc, r.counts), newCounts()),
    leftovers: recs.reduce((n, r) => n + r.leftovers.length, 0), rounds: recs.length,
  };
  for (const k of ks) {
    s.tp[k] = m((r) => r.tp[k].callsPerSec);
    s.cpu[k] = m((r) => r.tp[k].cpuUsPerCall);
    s.srvCpu[k] = m((r) => r.tp[k].serverCpuUsPerCall);
  }
  return s;
}

const mib = (kib) => (kib === null ? null : kib / 1024);
const ratio = (a, b) => (a === null || b === null || b === undefined || !b ? null : a / b);

export function report(meta, results) {
  const names = [...new Set(results.map((r) => r.system))];
  const S = Object.fromEntries(names.map((n) => [n, summarise(results.filter((r) => r.system === n))]));
  const loads = results.map((r) => r.loadBefore.loadavg.split(" ")[0]).map(Number);
  const lines = [];
  lines.push(`Run of ${meta.started.slice(0, 16)}Z: ${meta.machine}; node ${meta.node}; ${meta.rounds} round(s), interleaved, ${meta.seconds} s. ` +
    `Load average (1 min) before each system's run: ${fmt(Math.min(...loads))}–${fmt(Math.max(...loads))} (median ${fmt(median(loads))}); ` +
    `the machine was shared with other work (busiest other processes per run in the last table).`);
  lines.push("");
  lines.push("Systems, each with the MCP TypeScript SDK client (`Client`) and server-everything's `echo` tool:");
  lines.push("");
  for (const n of names) lines.push(`- **${n}**: ${meta.modes[n]}`);
  lines.push("");
  const cols = PEERS.filter((n) => S[n]);
  const row = (label, f) => `| ${label} | ${cols.map((n) => f(S[n], n)).join(" | ")} |`;
  const pair = (a, b, d) => `${fmt(a, d)} / ${fmt(b, d)}`;
  lines.push(`### Peer table (medians of ${meta.rounds} round(s); echo's message of 100 B or 64 KiB)`);
  lines.push("");
  lines.push(`| metric | ${cols.join(" | ")} |`);
  lines.push(`|---|${cols.map(() => "---:").join("|")}|`);
  lines.push(row("session setup, median of the first 8 clients, connecting one by one (ms)", (s) => fmt(s.setup)));
  lines.push(row("`echo` 100 B, p50 / p99 (ms)", (s) => pair(s.p50, s.p99, 3)));
  lines.push(row("`echo` 64 KiB, p50 / p99 (ms)", (s) => pair(s.p50k, s.p99k, 2)));
  lines.push(row("calls/s, 1 / 8 / 32 clients (100 B)", (s) => [1, 8, 32].map((k) => fmt(s.tp[k], 0)).join(" / ")));
  lines.push(row("intermediary RSS, idle / 32 clients (MiB)", (s) => pair(mib(s.rssIdle), mib(s.rssLoaded), 1)));
  lines.push(row("intermediary CPU per call, 1 / 32 clients (µs)", (s) => pair(s.cpu[1], s.cpu[32], 1)));
  lines.push(row("server processes at 32 clients", (s) => fmt(s.procs, 0)));
  lines.push(row("servers' CPU per call, 1 client (µs)", (s) => fmt(s.srvCpu[1], 0)));
  lines.push(row("answers ok / calls sent (all rounds)", (s) => `${s.counts.ok.toLocaleString("en-US")} / ${s.counts.sent.toLocaleString("en-US")}`));
  lines.push(row("lost, duplicated, misrouted, damaged", (s) => `${s.counts.lost}, ${s.counts.duplicated}, ${s.counts.misrouted}, ${s.counts.damaged}`));
  lines.push("");
  if (S.direct && S["ours-unix-pc"]) {
    const ref = S["ours-unix-pc"];
    lines.push("### Ratios (medians of the run above)");
    lines.push("");
    lines.push(`| system | p50 100 B ÷ direct | calls/s 1 / 8 / 32 ÷ direct | p50 100 B ÷ ours-unix-pc | calls/s 1 / 8 / 32 ÷ ours-unix-pc | CPU per call 1 / 32 ÷ ours-unix-pc | RSS idle / 32 ÷ ours-unix-pc |`);
    lines.push("|---|---:|---:|---:|---:|---:|---:|");
    for (const n of cols) {
      const s = S[n];
      const tr = (b) => [1, 8, 32].map((k) => fmt(ratio(s.tp[k], b.tp[k]))).join(" / ");
      lines.push(`| ${n} | ${fmt(ratio(s.p50, S.direct.p50))} | ${tr(S.direct)} | ${fmt(ratio(s.p50, ref.p50))} | ${tr(ref)} | ` +
        `${fmt(ratio(s.cpu[1], ref.cpu[1]), 1)} / ${fmt(ratio(s.cpu[32], ref.cpu[32]), 1)} | ${fmt(ratio(s.rssIdle, ref.rssIdle), 1)} / ${fmt(ratio(s.rssLoaded, ref.rssLoaded), 1)} |`);
    }
    lines.push("");
  }
  const gap = GAP.filter((n) => S[n]);
  if (gap.length > 1 && S.direct) {
    const d = S.direct;
    lines.push("### One client, `echo` 100 B: the gap to direct stdio");
    lines.push("");
    lines.push("| system | p50 (ms) | p50 − direct (µs) | calls/s | ÷ direct | intermediary CPU per call (µs) | servers' CPU per call (µs) |");
    lines.push("|---|---:|---:|---:|---:|---:|---:|");
    for (const n of gap) {
      const s = S[n];
      lines.push(`| ${n} | ${fmt(s.p50, 3)} | ${fmt((s.p50 - d.p50) * 1000, 0)} | ${fmt(s.tp[1], 0)} | ${fmt(ratio(s.tp[1], d.tp[1]))} | ${fmt(s.cpu[1], 1)} | ${fmt(s.srvCpu[1], 0)} |`);
    }
    lines.push("");
  }
  lines.push("### Load during the run (loadavg before each system's run; other processes' CPU in the 0.5 s before it)");
  lines.push("");
  lines.push("| round | system | loadavg | busiest other processes |");
  lines.push("|---:|---|---|---|");
  for (const r of results) lines.push(`| ${r.round + 1} | ${r.system} | ${r.loadBefore.loadavg} | ${r.loadBefore.others} |`);
  lines.push("");
  return lines.join("\n");
}
