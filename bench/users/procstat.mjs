// What /proc says about the processes under test: a process tree, CPU time
// (schedstat, ns, summed over threads, so node's helper threads count),
// resident memory, and the machine's load (loadavg, and the busiest
// processes that are not ours, since the machine is shared).
import fs from "node:fs";

function read(path) {
  try {
    return fs.readFileSync(path, "utf8");
  } catch {
    return null;
  }
}

/** Children of every process, from /proc/<pid>/stat's ppid field. */
function childrenMap() {
  const map = new Map();
  for (const name of fs.readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    const stat = read(`/proc/${name}/stat`);
    if (!stat) continue;
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    if (fields[0] === "Z") continue;
    const ppid = Number(fields[1]);
    if (!map.has(ppid)) map.set(ppid, []);
    map.get(ppid).push(Number(name));
  }
  return map;
}

/** Every live descendant of the given pids (not the pids themselves). */
export function descendants(pids) {
  const map = childrenMap();
  const out = [];
  const todo = [...pids];
  while (todo.length) {
    for (const c of map.get(todo.pop()) ?? []) {
      out.push(c);
      todo.push(c);
    }
  }
  return out;
}

export function comm(pid) {
  return (read(`/proc/${pid}/comm`) ?? "").trim();
}

/** CPU time of a process in ns, all its threads (0 once it is gone). */
export function cpuNs(pid) {
  let total = 0;
  let tasks;
  try {
    tasks = fs.readdirSync(`/proc/${pid}/task`);
  } catch {
    return 0;
  }
  for (const t of tasks) {
    const s = read(`/proc/${pid}/task/${t}/schedstat`);
    if (s) total += Number(s.split(" ")[0]);
  }
  return total;
}

export function cpuNsOf(pids) {
  return pids.reduce((sum, pid) => sum + cpuNs(pid), 0);
}

/** VmRSS and VmHWM in KiB. */
export function memKiB(pid) {
  const status = read(`/proc/${pid}/status`) ?? "";
  const field = (name) => Number((status.match(new RegExp(`^${name}:\\s+(\\d+)`, "m")) ?? [0, 0])[1]);
  return { rss: field("VmRSS"), hwm: field("VmHWM") };
}

export function alive(pid) {
  const stat = read(`/proc/${pid}/stat`);
  return stat !== null && stat.slice(stat.lastIndexOf(")") + 2)[0] !== "Z";
}

/** The load average, and the processes (not ours) that used the most CPU
 * over the last `ms` milliseconds: what else shared the two cores. */
export async function machineLoad(ours, ms = 500) {
  const loadavg = (read("/proc/loadavg") ?? "").split(" ").slice(0, 3).join(" ");
  const mine = new Set([process.pid, ...ours, ...descendants([process.pid, ...ours])]);
  const sample = () => {
    const m = new Map();
    for (const name of fs.readdirSync("/proc")) {
      if (!/^\d+$/.test(name) || mine.has(Number(name))) continue;
      const stat = read(`/proc/${name}/stat`);
      if (!stat) continue;
      const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      m.set(name, { comm: stat.slice(stat.indexOf("(") + 1, stat.lastIndexOf(")")), ticks: Number(f[11]) + Number(f[12]) });
    }
    return m;
  };
  const before = sample();
  await new Promise((r) => setTimeout(r, ms));
  const after = sample();
  const busy = new Map();
  for (const [pid, a] of after) {
    const d = a.ticks - (before.get(pid)?.ticks ?? a.ticks);
    if (d > 0) busy.set(a.comm, (busy.get(a.comm) ?? 0) + d);
  }
  const hz = 100; // USER_HZ on Linux
  const others = [...busy].sort((x, y) => y[1] - x[1]).slice(0, 5)
    .map(([c, t]) => `${c} ${Math.round((100 * t) / hz / (ms / 1000))}%`);
  return { loadavg, others: others.join(", ") || "none" };
}
