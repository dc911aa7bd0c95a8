#!/usr/bin/python3
"""Turns bench/run.sh's raw.txt into the Markdown results of BENCHMARKS.md.

usage: bench/report.py RAW REPORT_MD [--benchmarks BENCHMARKS.md]

RAW holds one line per run: a kind ("bench_load", "callgrind", "alloc",
"facts", "elapsed") then key=value pairs. The report gives medians over the
rounds, daemon/relay ratios and a met/missed verdict per target of issue 7.
With --benchmarks, the text between the results markers of that file is
replaced (the prose around it stays). Exit status 1 when a run lost or
misrouted an answer; never for speed.
"""
import shlex
import statistics
import sys
from collections import defaultdict

BEGIN = "<!-- bench:results:begin (bench/report.py writes this part) -->"
END = "<!-- bench:results:end -->"
PAYLOADS = [100, 4096, 65536, 524288]
ERRORS = ("lost", "dup", "misrouted", "badsid", "badpayload", "unknown", "malformed")


def parse(path):
    rows = []
    for line in open(path, encoding="utf-8"):
        parts = shlex.split(line)
        if not parts:
            continue
        row = {"kind": parts[0]}
        for p in parts[1:]:
            if "=" in p:
                k, v = p.split("=", 1)
                row[k] = v
        rows.append(row)
    return rows


def num(row, key, default=0.0):
    try:
        return float(row.get(key, default))
    except ValueError:
        return default


def med(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def size(p):
    p = int(p)
    if p >= 1048576 and p % 1048576 == 0:
        return f"{p // 1048576} MiB"
    if p >= 1024 and p % 1024 == 0:
        return f"{p // 1024} KiB"
    return f"{p} B"


def fmt(v, digits=0):
    if v is None:
        return "–"
    return f"{v:,.{digits}f}"


def ratio(a, b):
    return a / b if a is not None and b else None


def cpu_us(row):
    v = num(row, "server_sched_us_per_msg", -1)
    return v if v >= 0 else num(row, "server_cpu_us_per_msg")


class Report:
    def __init__(self, rows):
        self.rows = rows
        self.load = [r for r in rows if r["kind"] == "bench_load"]
        self.facts = {r.get("load_start") and "start" or "end": r for r in rows if r["kind"] == "facts"}
        self.out = []
        self.verdicts = []
        self.correct = True

    def w(self, line=""):
        self.out.append(line)

    # ---- matrix --------------------------------------------------------
    def matrix(self):
        groups = defaultdict(list)
        for r in self.load:
            if r.get("exp") == "matrix":
                key = (r["server"], r["mode"], int(r["inflight"]), int(r["payload"]), int(r["sessions"]))
                groups[key].append(r)
        self.groups = groups

    def metric(self, server, mode, w, p, s, fn):
        rows = self.groups.get((server, mode, w, p, s), [])
        return med([fn(r) for r in rows if r.get("status") == "ok"])

    def configs(self):
        modes = sorted({k[1] for k in self.groups}, key=lambda m: ["stdio", "unix", "tcp"].index(m))
        for mode in modes:
            for w in sorted({k[2] for k in self.groups if k[1] == mode}):
                for p in sorted({k[3] for k in self.groups if k[1] == mode and k[2] == w}):
                    yield mode, w, p

    def mode_label(self, mode):
        clients = {r["clients"] for r in self.load if r.get("exp") == "matrix" and r["mode"] == mode}
        return f"{mode} ×{clients.pop()}" if mode != "stdio" and len(clients) == 1 else mode

    def throughput_table(self):
        rounds = max((len(v) for v in self.groups.values()), default=0)
        self.w(f"### Throughput (median of {rounds} round(s), messages/s; a message is a request and its answer)")
        self.w()
        self.w("| mode | W | P | relay | daemon S=0 | ÷ relay | daemon S=1000 | ÷ relay |")
        self.w("|---|---:|---:|---:|---:|---:|---:|---:|")
        worst = []
        for mode, w, p in self.configs():
            rel = self.metric("relay", mode, w, p, 0, lambda r: num(r, "msgs_per_s"))
            d0 = self.metric("daemon", mode, w, p, 0, lambda r: num(r, "msgs_per_s"))
            d1 = self.metric("daemon", mode, w, p, 1000, lambda r: num(r, "msgs_per_s"))
            r0, r1 = ratio(d0, rel), ratio(d1, rel)
            if w == 64:
                worst += [(x, f"{self.mode_label(mode)} P={size(p)} S={s}") for x, s in ((r0, 0), (r1, 1000)) if x]
            self.w(f"| {self.mode_label(mode)} | {w} | {size(p)} | {fmt(rel)} | {fmt(d0)} | {fmt(r0, 2)} "
                   f"| {fmt(d1)} | {fmt(r1, 2)} |")
        self.w()
        if worst:
            low = min(worst)
            missed = [name for x, name in worst if x < 0.7]
            self.verdicts.append((
                "throughput at W = 64 ≥ 0.7 × relay at every payload size",
                f"lowest {low[0]:.2f} ({low[1]})" + (f"; below 0.7: {', '.join(missed)}" if missed else ""),
                not missed))

    def latency_table(self):
        self.w("### Latency (median over rounds of each run's p50 and p99, µs)")
        self.w()
        self.w("| mode | W | P | relay p50 | daemon S=0 p50 | ÷ relay | daemon S=1000 p50 | ÷ relay "
               "| relay p99 | daemon S=0 p99 | daemon S=1000 p99 |")
        self.w("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        worst = []
        for mode, w, p in self.configs():
            g = lambda srv, s, key: self.metric(srv, mode, w, p, s, lambda r: num(r, key))
            rel, d0, d1 = g("relay", 0, "p50_us"), g("daemon", 0, "p50_us"), g("daemon", 1000, "p50_us")
            r0, r1 = ratio(d0, rel), ratio(d1, rel)
            if w == 1:
                worst += [(x, f"{self.mode_label(mode)} P={size(p)} S={s}") for x, s in ((r0, 0), (r1, 1000)) if x]
            self.w(f"| {self.mode_label(mode)} | {w} | {size(p)} | {fmt(rel)} | {fmt(d0)} | {fmt(r0, 2)} "
                   f"| {fmt(d1)} | {fmt(r1, 2)} | {fmt(g('relay', 0, 'p99_us'))} "
                   f"| {fmt(g('daemon', 0, 'p99_us'))} | {fmt(g('daemon', 1000, 'p99_us'))} |")
        self.w()
        if worst:
            high = max(worst)
            missed = [name for x, name in worst if x > 1.15]
            self.verdicts.append((
                "p50 latency at W = 1 ≤ 1.15 × relay",
                f"highest {high[0]:.2f} ({high[1]})" + (f"; above 1.15: {', '.join(missed)}" if missed else ""),
                not missed))

    def cpu_table(self):
        self.w("### Server CPU per message (µs, median; the server process only, from /proc/PID/schedstat) "
               "and peak RSS (VmHWM, KiB)")
        self.w()
        self.w("| mode | W | P | relay CPU | daemon S=0 CPU | ÷ relay | daemon S=1000 CPU | worker CPU "
               "| relay RSS | daemon S=0 RSS | daemon S=1000 RSS |")
        self.w("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for mode, w, p in self.configs():
            c = lambda srv, s: self.metric(srv, mode, w, p, s, cpu_us)
            h = lambda srv, s: self.metric(srv, mode, w, p, s, lambda r: num(r, "hwm_kb"))
            wk = self.metric("daemon", mode, w, p, 0, lambda r: num(r, "worker_cpu_us_per_msg"))
            self.w(f"| {self.mode_label(mode)} | {w} | {size(p)} | {fmt(c('relay', 0), 2)} "
                   f"| {fmt(c('daemon', 0), 2)} | {fmt(ratio(c('daemon', 0), c('relay', 0)), 2)} "
                   f"| {fmt(c('daemon', 1000), 2)} | {fmt(wk, 2)} | {fmt(h('relay', 0))} "
                   f"| {fmt(h('daemon', 0))} | {fmt(h('daemon', 1000))} |")
        self.w()

    # ---- correctness ---------------------------------------------------
    def correctness(self):
        self.w("### Correctness (every run: each answer exactly once, on its connection, with its "
               "sessionId and payload)")
        self.w()
        self.w("| set | payload | server | runs | requests | answered ok | lost | duplicated | misrouted "
               "| wrong sessionId | damaged | status |")
        self.w("|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---|")
        groups = defaultdict(list)
        for r in self.load:
            exp = r.get("exp", "?")
            label = {"matrix": "matrix", "limit": "max_input_buffer"}.get(exp, "other")
            groups[(label, int(r.get("payload", 0) or 0), r.get("server", "?"))].append(r)
        big_many = False
        for (label, p, server), rows in sorted(groups.items()):
            total = {k: sum(int(num(r, k)) for r in rows) for k in ERRORS + ("ok", "messages")}
            bad = sum(total[k] for k in ERRORS) or any(r.get("status") != "ok" for r in rows)
            if bad:
                self.correct = False
            if p > 65536 and int(max(num(r, "inflight") for r in rows)) > 1 and not bad and label != "other":
                big_many = True
            self.w(f"| {label} | {size(p)} | {server} | {len(rows)} | {total['messages']:,} | {total['ok']:,} "
                   f"| {total['lost']} | {total['dup']} | {total['misrouted']} | {total['badsid']} "
                   f"| {total['badpayload']} | {'ok' if not bad else '**FAILED**'} |")
        self.w()
        limit_runs = [r for r in self.load if r.get("exp") == "limit"]
        self.verdicts.insert(0, (
            "zero lost or misrouted answers at every payload size up to max_input_buffer "
            "(incl. > 64 KiB with many in flight)",
            f"{sum(int(num(r, 'ok')) for r in self.load):,} answers checked in {len(self.load)} runs, "
            f"{'no' if self.correct else 'SOME'} losses or misroutes; lines of exactly max_input_buffer: "
            f"{len(limit_runs)} runs",
            self.correct and bool(limit_runs) and big_many))

    # ---- callgrind -----------------------------------------------------
    def callgrind(self):
        cg = [r for r in self.rows if r["kind"] == "callgrind"]
        if not cg:
            return
        counts = sorted({int(r["messages"]) for r in cg})
        small, large = counts[0], counts[-1]
        per = {}
        for r in cg:
            per[(r["server"], int(r["inflight"]), int(r["sessions"]), int(r["messages"]))] = num(r, "ir")
        self.w(f"### Instructions per message (callgrind Ir, server process; ({large:,} − {small:,} messages) "
               "difference, P = 100 B, stdio)")
        self.w()
        self.w("| W | relay | daemon S=0 | ÷ relay | daemon S=1 | daemon S=1000 | ÷ relay "
               "| S=1000 ÷ S=0 | S=1000 ÷ S=1 |")
        self.w("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        ratios, spreads, sizes = [], [], []
        for w in sorted({int(r["inflight"]) for r in cg}):
            def ir(server, s):
                a, b = per.get((server, w, s, large)), per.get((server, w, s, small))
                return (a - b) / (large - small) if a and b else None
            rel, d0, d1, dk = ir("relay", 0), ir("daemon", 0), ir("daemon", 1), ir("daemon", 1000)
            r0, rk, sp, sz = ratio(d0, rel), ratio(dk, rel), ratio(dk, d0), ratio(dk, d1)
            ratios += [(x, f"W={w} S={s}") for x, s in ((r0, 0), (rk, 1000)) if x]
            if sp:
                spreads.append((abs(sp - 1), f"W={w}", sp))
            if sz:
                sizes.append((abs(sz - 1), f"W={w}", sz))
            self.w(f"| {w} | {fmt(rel)} | {fmt(d0)} | {fmt(r0, 1)} | {fmt(d1)} | {fmt(dk)} | {fmt(rk, 1)} "
                   f"| {fmt(sp, 3)} | {fmt(sz, 3)} |")
        self.w()
        if ratios:
            high = max(ratios)
            self.verdicts.append(("instructions per routed message ≤ 4 × relay at P = 100 B",
                                  f"daemon ÷ relay up to {high[0]:.1f} ({high[1]})", high[0] <= 4))
        if spreads:
            worst = max(spreads)
            size_note = ""
            if sizes:
                ws = max(sizes)
                size_note = f"; S=1000 ÷ S=1 (same line shapes, table size only) = {ws[2]:.3f} ({ws[1]})"
            self.verdicts.append(("instructions at S = 0 and S = 1,000 within 10 % (O(1) lookups)",
                                  f"S=1000 ÷ S=0 = {worst[2]:.3f} ({worst[1]}, the worst){size_note}",
                                  worst[0] <= 0.10))

    # ---- allocations ---------------------------------------------------
    def allocations(self):
        al = [r for r in self.rows if r["kind"] == "alloc"]
        if not al:
            return
        counts = sorted({int(r["messages"]) for r in al})
        small, large = counts[0], counts[-1]
        # Calls that would scale with traffic (a buffer taken and given back
        # per message) against reallocs, which are how a buffer grows to the
        # working set: a few doublings, however long the run.
        churn, grow = {}, {}
        for r in al:
            key = (r["server"], int(r["payload"]), int(r["inflight"]), int(r["messages"]))
            churn[key] = sum(num(r, k) for k in ("malloc", "calloc", "memalign", "free"))
            grow[key] = num(r, "realloc")
        self.w(f"### Allocations per message (LD_PRELOAD counter; ({large:,} − {small:,} messages) "
               f"difference, stdio, S = 1,000)")
        self.w()
        self.w("malloc + calloc + free calls per message (what a per-message allocation would "
               "show), and the reallocs of the whole run at both message counts (buffers "
               "doubling up to the working set; a count that does not grow with the run is "
               "not on the routing path).")
        self.w()
        self.w(f"| P | W | daemon malloc+calloc+free | relay | daemon realloc ({small:,} / {large:,}) "
               f"| relay realloc ({small:,} / {large:,}) |")
        self.w("|---:|---:|---:|---:|---:|---:|")
        routing = []
        for p in sorted({int(r["payload"]) for r in al}):
            for w in sorted({int(r["inflight"]) for r in al}):
                def per(server):
                    a, b = churn.get((server, p, w, large)), churn.get((server, p, w, small))
                    return (a - b) / (large - small) if a is not None and b is not None and a >= 0 and b >= 0 else None
                def reallocs(server):
                    a, b = grow.get((server, p, w, small)), grow.get((server, p, w, large))
                    return (a, b) if a is not None and b is not None else None
                d, rl = per("daemon"), per("relay")
                dg, rg = reallocs("daemon"), reallocs("relay")
                if d is not None:
                    routing.append((d, dg[1] - dg[0] if dg else 0, f"P={size(p)} W={w}"))
                show = lambda g: f"{int(g[0])} / {int(g[1])}" if g else "–"
                self.w(f"| {size(p)} | {w} | {fmt(d, 4)} | {fmt(rl, 4)} | {show(dg)} | {show(rg)} |")
        self.w()
        if routing:
            worst = max(routing)
            most_growth = max(g for _, g, _ in routing)
            self.verdicts.append((
                "no allocation on the routing path",
                f"malloc + calloc + free per message: worst {worst[0]:.4f} ({worst[2]}); reallocs "
                f"added by {large - small:,} more messages: at most {int(most_growth)} (buffer growth)",
                worst[0] == 0 and most_growth <= 4))

    # ---- memory --------------------------------------------------------
    def memory(self):
        idle = {r["server"]: r for r in self.load if r.get("exp") == "rss-idle"}
        sess = {r["server"]: r for r in self.load if r.get("exp") == "rss-sessions"}
        if not idle and not sess:
            return
        self.w("### Resident memory (VmRSS, KiB; unix mode)")
        self.w()
        settle = next((r.get("idle_settle_s") for r in idle.values()), "0")
        self.w(f"| server | idle | + 1,000 idle connections | per connection | after one request on each "
               f"| per used connection | lowest in the next {settle} s | per used connection "
               f"| + 1,000 live sessions | per session |")
        self.w("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        verdict = None
        for server in ("daemon", "relay"):
            i, s = idle.get(server, {}), sess.get(server, {})
            base = num(i, "rss_start_kb", None) if i else None
            sbase = num(s, "rss_start_kb", None) if s else None
            per_s = (num(s, "rss_end_kb") - sbase) * 1024 / 1000 if s else None
            self.w(f"| {server} | {fmt(base)} | {fmt(num(i, 'rss_idle_kb', None) if i else None)} "
                   f"| {fmt(num(i, 'idle_conn_bytes', None) if i else None)} B "
                   f"| {fmt(num(i, 'rss_touched_kb', None) if i else None)} "
                   f"| {fmt(num(i, 'touched_conn_bytes', None) if i else None)} B "
                   f"| {fmt(num(i, 'rss_settled_kb', None) if i else None)} "
                   f"| {fmt(num(i, 'settled_conn_bytes', None) if i else None)} B "
                   f"| {fmt(num(s, 'rss_end_kb', None) if s else None)} | {fmt(per_s)} B |")
            if server == "daemon" and i:
                fresh = num(i, "idle_conn_bytes")
                used = num(i, "settled_conn_bytes", num(i, "touched_conn_bytes"))
                verdict = ("≤ 2 KiB of RSS per idle client connection",
                           f"never used: {fresh:.0f} B; used once, then idle "
                           f"{i.get('idle_settle_s', '0')} s: {used:.0f} B",
                           fresh <= 2048 and used <= 2048)
        self.w()
        if verdict:
            self.verdicts.append(verdict)

    # ---- the whole -----------------------------------------------------
    def render(self):
        self.matrix()
        body_start = len(self.out)
        self.throughput_table()
        self.latency_table()
        self.cpu_table()
        self.callgrind()
        self.allocations()
        self.memory()
        self.correctness()
        body = self.out[body_start:]
        self.out = self.out[:body_start]
        start, end = self.facts.get("start", {}), self.facts.get("end", {})
        elapsed = next((r.get("seconds") for r in self.rows if r["kind"] == "elapsed"), "?")
        self.w(f"Run of {start.get('date', '?')} at commit {start.get('commit', '?')}: "
               f"{start.get('cpus', '?')} × {start.get('cpu', '?')}, {start.get('mem_mib', '?')} MiB, "
               f"Linux {start.get('kernel', '?')}; load average {start.get('load_start', '?')} before, "
               f"{end.get('load_end', '?')} after; {elapsed} s"
               f"{' (quick: not comparable)' if start.get('quick') == '1' else ''}.")
        self.w()
        self.w("### Targets")
        self.w()
        self.w("| target | measured | verdict |")
        self.w("|---|---|---|")
        for name, measured, ok in self.verdicts:
            self.w(f"| {name} | {measured} | {'met' if ok else '**missed**'} |")
        self.w()
        self.out += body
        return "\n".join(self.out).rstrip() + "\n"


def main(argv):
    if len(argv) not in (3, 5) or (len(argv) == 5 and argv[3] != "--benchmarks"):
        print(__doc__, file=sys.stderr)
        return 2
    report = Report(parse(argv[1]))
    text = report.render()
    with open(argv[2], "w", encoding="utf-8") as f:
        f.write(text)
    if len(argv) == 5:
        try:
            doc = open(argv[4], encoding="utf-8").read()
        except FileNotFoundError:
            doc = ""
        if BEGIN in doc and END in doc:
            head, rest = doc.split(BEGIN, 1)
            tail = rest.split(END, 1)[1]
            doc = f"{head}{BEGIN}\n{text}{END}{tail}"
        else:
            doc = f"{doc}\n{BEGIN}\n{text}{END}\n"
        with open(argv[4], "w", encoding="utf-8") as f:
            f.write(doc)
    return 0 if report.correct else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
