#!/usr/bin/env python3
"""Proof that the worker-side suite bites: runs it (run.py --worker, profile
`plain`) against mock_worker in modes that misbehave on purpose, and checks
that each mode fails on exactly the clauses it breaks, warns on exactly the
SHOULD clauses it misses, and blocks exactly the tests that stand on a root
cause the preflight names once (a worker that never answers, drops requests
with a sessionId, or does not exit by itself on SIGTERM); no harness error,
no other failure.

    conformance/worker_tests/run_catches.py [--mock-worker PATH] [--report-dir DIR]
        [--jobs 2] [--only NAME...]

Output: the table mode / failing clauses / warnings / verdict, also written
to <report-dir>/catches.md and catches.json. Exit 0 when every mode matches,
1 when one does not, 2 when a run could not be judged (harness error,
collection error, no results).

mock_worker's echo mode copies a sessionId that is not a string onto its
answer (SB-R-2, a SHOULD): every mode inherits that warning, unless the
tests of SB-R-2 are blocked.

A test is blocked when its outcome is `blocked`, or (until the harness has
that outcome) `skipped` with a reason that starts "blocked:".
"""
import argparse
import json
import shlex
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
CONFORMANCE = HERE.parent
ROOT = CONFORMANCE.parent
DESCRIPTION = CONFORMANCE / "profiles" / "worker_mock.toml"
ECHO_WARNS = {"SB-R-2"}
REST = "the rest"  # every clause the run judges but the failing ones

# name, mock_worker arguments, failing clauses, warned clauses, blocked clauses, what the mode does
CATCHES = [
    ("echo", [], set(), ECHO_WARNS, set(), "the echo mode: a plain worker that behaves"),
    ("nonjson", ["--mode", "bad", "--bad", "nonjson"], {"SB-W-2", "SB-W-4"}, ECHO_WARNS, set(),
     "a log line on stdout instead of stderr"),
    ("nonjson-at-start", ["--mode", "bad", "--bad", "nonjson", "--trigger", "start"], {"SB-W-2", "SB-W-4"},
     {"SB-T-7"} | ECHO_WARNS, set(), "the same line as a banner, before any input"),
    ("truncated", ["--mode", "bad", "--bad", "truncated"], {"SB-W-2", "SB-W-4", "SB-F-3"}, ECHO_WARNS, set(),
     "a message cut short by a newline"),
    ("binary", ["--mode", "bad", "--bad", "binary"], {"SB-W-2", "SB-W-4", "SB-T-2"}, ECHO_WARNS, set(),
     "a line of binary bytes"),
    ("badutf8", ["--mode", "bad", "--bad", "badutf8"], {"SB-T-2"}, ECHO_WARNS, set(),
     "an answer holding bytes that are not UTF-8"),
    ("unknown-id", ["--mode", "bad", "--bad", "unknown-id"], {"SB-W-7"}, ECHO_WARNS, set(),
     "a response to an id no request carried"),
    ("unknown-session", ["--mode", "bad", "--bad", "unknown-session"], set(), {"SB-W-10"} | ECHO_WARNS, set(),
     "a notification naming a session it was never told about"),
    ("unroutable", ["--mode", "bad", "--bad", "unroutable"], set(), {"SB-W-10"} | ECHO_WARNS, set(),
     "a notification with neither id nor sessionId"),
    ("ignore-sigterm", ["--ignore-sigterm"], {"SB-W-11"}, ECHO_WARNS, {"SB-W-11", "SB-R-3"},
     "SIGTERM ignored (root cause: named once, the other SIGTERM tests blocked)"),
    ("die-on-sigterm", ["--die-on-sigterm"], {"SB-W-11"}, ECHO_WARNS, {"SB-W-11", "SB-R-3"},
     "killed by SIGTERM (root cause: named once, the other SIGTERM tests blocked)"),
    ("strict-members", ["--strict-members"], {"SB-W-12"}, set(), {"SB-W-9", "SB-W-10", "SB-R-2"},
     "drops requests with a sessionId (root cause: the session tests blocked, the others run without)"),
    ("silent", ["--stall", "write"], {"SB-W-1"}, set(), REST,
     "never answers (root cause: named once, every other test blocked)"),
    ("on-eof-stay", ["--on-eof", "stay"], {"SB-T-16"}, ECHO_WARNS, set(), "keeps running at end of input"),
    ("stderr-spam", ["--mode", "spam"], set(), ECHO_WARNS, set(), "64 KiB of logs on stderr (allowed)"),
]


def clause_key(c):
    part, _, n = c[3:].partition("-")
    return ("WTJFR".find(part), int(n))


def fmt(clauses) -> str:
    return " ".join(sorted(clauses, key=clause_key)) or "-"


def run_mode(mock: str, args: list, report_dir: Path, jobs: str) -> tuple[dict | None, str, float]:
    cmd = [sys.executable, str(CONFORMANCE / "run.py"), "--worker-description", str(DESCRIPTION),
           "--worker", shlex.join([mock] + args), "--report-dir", str(report_dir), "-j", jobs, "-q"]
    t0 = time.monotonic()
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    results = report_dir / "results.json"
    data = json.loads(results.read_text()) if results.exists() else None
    return data, p.stdout[-3000:] + p.stderr[-3000:], time.monotonic() - t0


def blocked(t: dict) -> bool:
    return t["outcome"] == "blocked" or (t["outcome"] == "skipped" and t["message"].startswith("blocked:"))


def judge(data: dict, fails: set, warns: set, blocks) -> tuple[str, set, set, set]:
    got_f = {c for t in data["tests"] if t["outcome"] == "fail" for c in t["clauses"]}
    got_w = {c for t in data["tests"] if t["outcome"] == "warn" for c in t["clauses"]}
    got_b = {c for t in data["tests"] if blocked(t) for c in t["clauses"]}
    if blocks == REST:
        blocks = {c for t in data["tests"] if t["outcome"] != "unsupported" for c in t["clauses"]} - fails
    broken = data["summary"]["harness-error"] or data["collection_errors"] or data["fatal_errors"]
    if broken:
        return "HARNESS ERROR", got_f, got_w, got_b
    expected_rc = 1 if fails else 0
    if got_f == fails and got_w == warns and got_b == blocks and data["exit_code"] == expected_rc:
        return "ok", got_f, got_w, got_b
    return "MISMATCH", got_f, got_w, got_b


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mock-worker", default=str(ROOT / "build" / "mock_workers" / "mock_worker"))
    ap.add_argument("--report-dir", default=None)
    ap.add_argument("--jobs", default="2")
    ap.add_argument("--only", nargs="*", default=[])
    args = ap.parse_args()
    mock = str(Path(args.mock_worker).resolve())
    if not Path(mock).is_file():
        print(f"mock_worker not found: {mock} (pass --mock-worker PATH)")
        return 2
    report_dir = Path(args.report_dir or ROOT / "build" / "worker-catches").resolve()
    report_dir.mkdir(parents=True, exist_ok=True)
    catches = [c for c in CATCHES if not args.only or c[0] in args.only]
    if not catches:
        print("no mode selected")
        return 2
    rows, worst = [], 0
    for name, margs, fails, warns, blocks, what in catches:
        data, output, secs = run_mode(mock, margs, report_dir / name, args.jobs)
        if data is None:
            verdict, got_f, got_w, got_b = "NO RESULTS", set(), set(), set()
        else:
            verdict, got_f, got_w, got_b = judge(data, fails, warns, blocks)
        shown_b = "all others" if blocks == REST and verdict == "ok" else fmt(got_b)
        worst = max(worst, 0 if verdict == "ok" else 1 if verdict == "MISMATCH" else 2)
        rows.append({"mode": name, "args": margs, "what": what, "expected_fail": fmt(fails),
                     "expected_warn": fmt(warns), "expected_blocked": blocks if blocks == REST else fmt(blocks),
                     "fail": fmt(got_f), "warn": fmt(got_w), "blocked": shown_b, "verdict": verdict,
                     "seconds": round(secs, 1)})
        print(f"{name:18} fail {fmt(got_f):24} warn {fmt(got_w):18} blocked {shown_b:26} {verdict} "
              f"({secs:.1f} s)", flush=True)
        if verdict != "ok":
            print(f"  expected fail {fmt(fails)}, warn {fmt(warns)}, blocked "
                  f"{blocks if blocks == REST else fmt(blocks)}\n  {output}")
    md = ["# mock_worker modes against the worker-side suite (profile plain)", "",
          "| mode | mock_worker arguments | fails (MUST) | warns (SHOULD) | blocked | verdict |",
          "|---|---|---|---|---|---|"]
    md += [f"| {r['mode']} | `{' '.join(r['args']) or '(none)'}` | {r['fail']} | {r['warn']} | {r['blocked'] or '-'} "
           f"| {r['verdict']} |" for r in rows]
    (report_dir / "catches.md").write_text("\n".join(md) + "\n")
    (report_dir / "catches.json").write_text(json.dumps(rows, indent=2) + "\n")
    ok = sum(r["verdict"] == "ok" for r in rows)
    print(f"{ok}/{len(rows)} modes fail on exactly the clauses they break; report in {report_dir}")
    return worst


if __name__ == "__main__":
    sys.exit(main())
