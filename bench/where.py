#!/usr/bin/env python3
"""The report of bench/where.sh: per routed message (W = 1, P = 100 B, stdio),
for the echo worker reached directly, through the no-parse relay, and
through our daemon: time and CPU without any tool attached (medians of
interleaved rounds), context switches (perf stat), syscalls by name
(strace -c) and callgrind Ir by function, each the difference of a large
and a small run divided by the difference in messages.

usage: bench/where.py OUTDIR   (markdown on stdout)"""
import re
import statistics
import sys
from collections import defaultdict
from pathlib import Path

SERVERS = ("direct", "relay", "daemon")


def kv(line):
    return dict(p.split("=", 1) for p in line.split() if "=" in p)


def strace_calls(path):
    calls = {}
    for line in Path(path).read_text().splitlines():
        m = re.match(r"\s*[\d.]+\s+[\d.]+\s+\d+\s+(\d+)\s+(?:\d+\s+)?(\w+)$", line)
        if m and m.group(2) != "total":
            calls[m.group(2)] = int(m.group(1))
    return calls


def perf_counts(path):
    text = Path(path).read_text()
    out = {}
    for name in ("task-clock", "context-switches", "cpu-migrations"):
        m = re.search(r"([\d.,]+)\s+(?:msec\s+)?" + name, text)
        out[name] = float(m.group(1).replace(",", "")) if m else 0.0
    return out


def callgrind_functions(path):
    """Ir by function name (a function's lines inlined from headers added in)."""
    fns = defaultdict(int)
    total = 0
    for line in Path(path).read_text().splitlines():
        m = re.match(r"\s*([\d,]+)\s+\(\s*[\d.]+%\)\s+(.*)$", line)
        if not m:
            continue
        ir, what = int(m.group(1).replace(",", "")), m.group(2)
        if what.startswith("PROGRAM TOTALS"):
            total = ir
            continue
        if ":" not in what:  # not a file:function line
            continue
        name = what.split(" [")[0].rsplit(":", 1)[-1]
        name = re.sub(r"\.(part|constprop|isra|cold)\.\d+$", "", name)
        fns[name] += ir
    return total, fns


def per_message(small, large, messages):
    return {k: (large.get(k, 0) - small.get(k, 0)) / messages for k in set(small) | set(large)}


def fmt(x, d=1):
    return f"{x:,.{d}f}"


def main(out):
    out = Path(out)
    lines = []
    load = (out / "load.txt").read_text().strip().replace("\n", "; ")
    lines.append(f"W = 1, P = 100 B, S = 0, stdio; {load} (the machine was shared; read the figures against each other).")
    lines.append("")
    # -- without any tool
    plain = defaultdict(list)
    for line in (out / "plain.lines").read_text().splitlines():
        r = kv(line)
        plain[r["who"]].append(r)
    med = {s: {k: statistics.median(float(r[k]) for r in plain[s]) for k in
               ("msgs_per_s", "p50_us", "server_sched_us_per_msg", "server_user_us_per_msg", "server_sys_us_per_msg",
                "worker_cpu_us_per_msg")} for s in SERVERS}
    rounds = len(plain["daemon"])
    lines.append(f"**Without any tool** (bench_load, 20,000 messages, medians of {rounds} interleaved rounds; CPU from /proc: "
                 "schedstat for the total, utime and stime at clock-tick resolution for the split):")
    lines.append("")
    lines.append("| server | msgs/s | ÷ direct | p50 (µs) | p50 − direct (µs) | server CPU/msg (µs) | of which user | of which kernel | worker CPU/msg (µs) |")
    lines.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    d = med["direct"]
    for s in SERVERS:
        m = med[s]
        lines.append(f"| {s} | {fmt(m['msgs_per_s'], 0)} | {m['msgs_per_s'] / d['msgs_per_s']:.2f} | {fmt(m['p50_us'])} | "
                     f"{fmt(m['p50_us'] - d['p50_us'])} | {fmt(m['server_sched_us_per_msg'], 2)} | {fmt(m['server_user_us_per_msg'], 2)} | "
                     f"{fmt(m['server_sys_us_per_msg'], 2)} | {fmt(m['worker_cpu_us_per_msg'], 2)} |")
    lines.append("")
    # -- perf and strace
    pc = {s: per_message(perf_counts(out / f"perf.{s}.5000.txt"), perf_counts(out / f"perf.{s}.25000.txt"), 20000) for s in SERVERS}
    sc = {s: per_message(strace_calls(out / f"strace.{s}.2000.txt"), strace_calls(out / f"strace.{s}.12000.txt"), 10000) for s in SERVERS}
    names = sorted({k for s in SERVERS for k, v in sc[s].items() if abs(v) >= 0.005}, key=lambda k: -sc["daemon"].get(k, 0))
    lines.append("**Per message, the server process alone** (perf stat -i: (25,000 − 5,000 messages) ÷ 20,000; "
                 "strace -c, no -f: (12,000 − 2,000) ÷ 10,000; 'direct' is the echo worker itself):")
    lines.append("")
    lines.append(f"| server | context switches | task-clock (µs, under perf) | syscalls | {' | '.join(names)} |")
    lines.append(f"|---|---:|---:|---:|{'---:|' * len(names)}")
    for s in SERVERS:
        total = sum(v for v in sc[s].values())
        lines.append(f"| {s} | {pc[s]['context-switches']:.2f} | {pc[s]['task-clock'] * 1000:.2f} | {total:.2f} | "
                     + " | ".join(f"{sc[s].get(k, 0):.2f}" for k in names) + " |")
    lines.append("")
    # -- callgrind
    cg = {}
    for s in ("daemon", "relay"):
        t0, f0 = callgrind_functions(out / f"cg.{s}.2000.txt")
        t1, f1 = callgrind_functions(out / f"cg.{s}.12000.txt")
        cg[s] = ((t1 - t0) / 10000, per_message(f0, f1, 10000))
    lines.append("**Instructions per message by function** (callgrind Ir, the server alone, (12,000 − 2,000) ÷ 10,000; "
                 f"daemon {fmt(cg['daemon'][0], 0)}, relay {fmt(cg['relay'][0], 0)}, ratio {cg['daemon'][0] / cg['relay'][0]:.2f}):")
    lines.append("")
    lines.append("| daemon function | Ir/msg | share | | relay function | Ir/msg |")
    lines.append("|---|---:|---:|---|---|---:|")
    top = lambda s, n: sorted(((k, v) for k, v in cg[s][1].items() if v >= 0.5), key=lambda kv_: -kv_[1])[:n]
    dtop, rtop = top("daemon", 24), top("relay", 24)
    for i in range(max(len(dtop), len(rtop))):
        a = dtop[i] if i < len(dtop) else ("", None)
        b = rtop[i] if i < len(rtop) else ("", None)
        share = f"{100 * a[1] / cg['daemon'][0]:.1f} %" if a[1] is not None else ""
        lines.append(f"| {a[0]} | {fmt(a[1], 0) if a[1] is not None else ''} | {share} | | "
                     f"{b[0]} | {fmt(b[1], 0) if b[1] is not None else ''} |")
    rest_d = cg["daemon"][0] - sum(v for _, v in dtop)
    rest_r = cg["relay"][0] - sum(v for _, v in rtop)
    lines.append(f"| (the rest) | {fmt(rest_d, 0)} | {100 * rest_d / cg['daemon'][0]:.1f} % | | (the rest) | {fmt(rest_r, 0)} |")
    lines.append("")
    print("\n".join(lines))


if __name__ == "__main__":
    main(sys.argv[1])
