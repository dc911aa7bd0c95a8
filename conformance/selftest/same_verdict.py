#!/usr/bin/env python3
"""The verdict must not depend on the pace (issue 37 item 5): runs suites
with every core busy (busy.py's loops, all at once beside them) and compares
each with the same suite's run on a quiet machine, already in a report
folder: the same exit status and the same failing spec clauses, else exit 1.

usage: same_verdict.py [--busy] --case NAME QUIET_DIR BUSY_DIR -- COMMAND... [--case ...]

Each case runs COMMAND (which must write BUSY_DIR/results.json), all cases
at once (under one set of busy loops with --busy), then compares
QUIET_DIR/results.json with BUSY_DIR/results.json. A QUIET_DIR of "-" runs
the quiet case too, first (COMMAND with BUSY_DIR replaced by BUSY_DIR.quiet).
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path


def verdict(results_dir: str) -> tuple[int, set[str]]:
    """(exit status, the spec clauses its failing tests are judged by) of one run: what gates.
    Failures of our interpretations gate only where the profile says so, and then the exit
    status shows them; a daemon that reads the seed otherwise has them reported, not gated."""
    res = json.loads((Path(results_dir) / "results.json").read_text())
    return res["exit_code"], {t["clause"] for t in res["tests"] if t["outcome"] == "fail" and t["tier"] == "spec"}


def compare(name: str, quiet: str, busy: str) -> list[str]:
    (q_rc, q_fail), (b_rc, b_fail) = verdict(quiet), verdict(busy)
    problems = []
    if q_rc != b_rc:
        problems.append(f"{name}: exit status {b_rc} busy, {q_rc} quiet")
    if q_fail != b_fail:
        problems.append(f"{name}: failing clauses differ: only busy {sorted(b_fail - q_fail)}, "
                        f"only quiet {sorted(q_fail - b_fail)}")
    return problems


def new_failures(quiet: str, busy: str) -> list[str]:
    """The tests that failed busy and not quiet, each with the start of its
    message: what a DIFFERENT verdict came from, in the CI log itself."""
    def failed(d):
        res = json.loads((Path(d) / "results.json").read_text())
        return {t["nodeid"]: t for t in res["tests"] if t["outcome"] == "fail"}
    q, b = failed(quiet), failed(busy)
    return [f"{n} [{t['clause']}]: {' '.join(str(t.get('message', '')).split())[:600]}"
            for n, t in sorted(b.items()) if n not in q]


def parse(argv: list[str]):
    busy, cases, i = False, [], 0
    while i < len(argv):
        if argv[i] == "--busy":
            busy, i = True, i + 1
        elif argv[i] == "--case":
            name, quiet, out = argv[i + 1:i + 4]
            j = argv.index("--", i + 4)
            k = argv.index("--case", j) if "--case" in argv[j:] else len(argv)
            cases.append((name, quiet, out, argv[j + 1:k]))
            i = k
        else:
            raise SystemExit(__doc__)
    return busy, cases


def run(cmd: list[str]) -> int:
    return subprocess.call(cmd, stdin=subprocess.DEVNULL)


def main(argv: list[str]) -> int:
    busy, cases = parse(argv)
    if not cases:
        print(__doc__, file=sys.stderr)
        return 2
    quiet_runs = [(name, out + ".quiet", [a.replace(out, out + ".quiet") for a in cmd])
                  for name, quiet, out, cmd in cases if quiet == "-"]
    with ThreadPoolExecutor(len(cases)) as pool:
        list(pool.map(run, [cmd for _, _, cmd in quiet_runs]))
    hogs = None
    if busy:
        n = int(os.environ.get("SB_BUSY_LOOPS") or 2 * (os.cpu_count() or 1))
        hogs = subprocess.Popen(["sh", "-c", f"for i in $(seq {n}); do (while :; do :; done) & done; wait"],
                                start_new_session=True, stdin=subprocess.DEVNULL)
        print(f"same_verdict: {n} busy loops", flush=True)
    try:
        with ThreadPoolExecutor(len(cases)) as pool:
            rcs = list(pool.map(run, [cmd for _, _, _, cmd in cases]))
    finally:
        if hogs is not None:
            os.killpg(hogs.pid, signal.SIGKILL)
            hogs.wait()
    problems = []
    for (name, quiet, out, _), rc in zip(cases, rcs):
        quiet = out + ".quiet" if quiet == "-" else quiet
        try:
            found = compare(name, quiet, out)
        except (OSError, ValueError, KeyError) as exc:
            found = [f"{name}: no verdict to compare ({exc}); its command exited {rc}"]
        problems += found
        b_rc, b_fail = verdict(out) if not found or "no verdict" not in found[0] else (rc, set())
        print(f"same_verdict: {name}: {'same' if not found else 'DIFFERENT'} "
              f"(exit {b_rc}, {len(b_fail)} failing clause(s))", flush=True)
        if found and "no verdict" not in found[0]:
            for f in new_failures(quiet, out):
                print(f"same_verdict: {name}: failed busy only: {f}", flush=True)
    for p in problems:
        print(f"same_verdict: {p}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
