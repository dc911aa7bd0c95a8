// The measurements of one system in one round: latency of one client's
// sequential calls, and calls/s with k clients calling at once, with the
// intermediary's (and its servers') CPU time over that window.
import { message } from "./clients.mjs";
import { cpuNs, cpuNsOf } from "./procstat.mjs";

export function quantile(sorted, q) {
  if (!sorted.length) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
}

/** The median of the numbers given (null and NaN left out), or null. */
export function median(xs) {
  const s = xs.filter((x) => x !== null && x !== undefined && !Number.isNaN(x)).sort((a, b) => a - b);
  if (!s.length) return null;
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
}

/** p50 and p99 (ms) of `calls` sequential echo calls of `size` bytes after `warmup`. */
export async function latency(c, tag, size, warmup, calls) {
  for (let i = 0; i < warmup; i++) if (!(await c.call(message(c.n, `${tag}w`, i, size)))) return { p50: null, p99: null };
  const ms = [];
  for (let i = 0; i < calls; i++) {
    const m = message(c.n, tag, i, size);
    const t0 = performance.now();
    if (!(await c.call(m))) return { p50: null, p99: null }; // failed: counted, not timed
    ms.push(performance.now() - t0);
  }
  ms.sort((a, b) => a - b);
  return { p50: quantile(ms, 0.5), p99: quantile(ms, 0.99) };
}

/** Each of `clients` calls in a loop (one call in flight each) for
 * `durationMs`, or `callsEach` calls when given. Returns calls/s and the
 * CPU ns per call of the intermediary and of the servers. */
export async function throughput(clients, tag, size, { durationMs, callsEach }, pid, serverPids) {
  const servers = serverPids();
  const cpu0 = pid ? cpuNs(pid) : 0;
  const srv0 = cpuNsOf(servers);
  const t0 = performance.now();
  const deadline = t0 + (durationMs ?? Infinity);
  let calls = 0;
  await Promise.all(clients.map(async (c) => {
    for (let i = 0; callsEach ? i < callsEach : performance.now() < deadline; i++) {
      if (!(await c.call(message(c.n, tag, i, size)))) return; // failed: counted; this client stops
      calls++;
    }
  }));
  const s = (performance.now() - t0) / 1000;
  return {
    callsPerSec: calls / s,
    calls,
    cpuUsPerCall: pid ? (cpuNs(pid) - cpu0) / 1000 / calls : null,
    serverCpuUsPerCall: (cpuNsOf(servers) - srv0) / 1000 / calls,
  };
}
