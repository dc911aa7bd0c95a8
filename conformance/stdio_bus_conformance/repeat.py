"""--repeat N: after the run, rerun each test that failed (fail, warn or a
baseline's xfail) N more times, each time in a fresh run of the suite with
the same daemon, profile, seed and options, and call it

    flaky   it passed at least once as well as failing (mixed outcomes)
    steady  it failed every time
    inconclusive  it never passed, and some reruns did not judge it
            (blocked, harness error, ...)

The verdict of the run (its exit code) does not change: a failure is a
failure; the repeat says whether to look for a race or for a defect, and
whether `"intermittent": true` in the baseline is the right answer.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

FAILED = ("fail", "warn", "xfail")
MAX_REPEAT = 50


def candidates(results: dict) -> list[str]:
    return [n for n, r in results.items() if r.outcome in FAILED]


def argv(opts, subject: list[str], extra: list, conformance_dir: str, nodeids: list,
         report_dir: str) -> list[str]:
    """The run.py command line of one rerun: the first run's subject (its
    options as cli.subject_args gives them) and options, only the given
    tests, no baseline, no coverage gate."""
    a = [sys.executable, os.path.join(conformance_dir, "run.py")] + subject
    dirs = [t.split("::")[0] for t in opts.tests] or opts.tests_dirs
    for d in dict.fromkeys(dirs):
        a += ["--tests-dir", os.path.abspath(d) if os.path.exists(d) else os.path.join(conformance_dir, d)]
    for n in nodeids:
        a += ["--only", n]
    a += ["--seed", str(opts.seed), "--timeout", str(opts.timeout),
          "-j", str(max(1, min(opts.jobs, len(nodeids)))), "--no-coverage-gate", "--report-dir", report_dir, "-q"]
    if opts.wait_timeout is not None:
        a += ["--wait-timeout", str(opts.wait_timeout)]
    if opts.no_preflight:
        a.append("--no-preflight")
    if extra:
        a += ["--"] + list(extra)
    return a


def judge(outcomes: list[str]) -> str:
    failed = [o in FAILED for o in outcomes]
    if all(failed):
        return "steady"
    if "pass" in outcomes:
        return "flaky"
    return "inconclusive"


def run(opts, subject: list[str], extra: list, conformance_dir: str, results: dict, report_dir: str,
        n: int, echo=print) -> dict | None:
    """Reruns the failed tests n times; returns the repeat member of the
    reports ({"n", "tests": [{"test", "outcomes", "verdict"}]}), or None when
    nothing failed."""
    tests = candidates(results)
    if not tests:
        return None
    outcomes = {t: [results[t].outcome] for t in tests}
    for i in range(1, n + 1):
        where = os.path.join(report_dir, "repeat", str(i))
        echo(f"repeat {i}/{n}: rerunning {len(tests)} failed test(s) (reports in {where})")
        p = subprocess.run(argv(opts, subject, extra, conformance_dir, tests, where), stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, env=os.environ.copy())
        try:
            with open(os.path.join(where, "results.json"), encoding="utf-8") as f:
                got = {t["nodeid"]: t["outcome"] for t in json.load(f)["tests"]}
        except (OSError, ValueError, KeyError):
            got = {}
        for t in tests:
            outcomes[t].append(got.get(t, "harness-error" if p.returncode == 2 else "unfinished"))
    return {"n": n, "tests": [{"test": t, "outcomes": o, "verdict": judge(o)} for t, o in outcomes.items()]}


def lines(rep: dict | None) -> list[str]:
    if not rep:
        return []
    out = [f"repeat: each failed test rerun {rep['n']} time(s):"]
    for t in rep["tests"]:
        out.append(f"  {t['verdict']:<12} {t['test']} ({', '.join(t['outcomes'])})")
    return out
