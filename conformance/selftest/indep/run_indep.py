#!/usr/bin/env python3
"""Runs the suite against one of the independent implementations in this
folder and holds it to what a daemon written from the seed alone must get
(issue 22): exit 0, no spec-tier failure, no harness error. Failures of our
interpretations are reported in its results but do not count (its readings
may differ from ours wherever the seed is silent).

usage: run_indep.py NAME --mock-worker PATH --report-dir DIR [run.py options]
NAME is a folder here (nodebus, plbus); its profile is profiles/NAME.toml and
its executable NAME/NAME.
"""
import json
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
SUITE = HERE.parents[1]


def judge(results: dict) -> list[str]:
    """What keeps a run from counting as a pass for an independent daemon."""
    problems = []
    if results["exit_code"] != 0:
        problems.append(f"exit {results['exit_code']}: {'; '.join(results['exit_reasons'])}")
    spec = [t["nodeid"] for t in results["tests"] if t["outcome"] == "fail" and t["tier"] == "spec"]
    if spec:
        problems.append(f"{len(spec)} spec-tier failure(s): {', '.join(spec[:5])}")
    errors = [t["nodeid"] for t in results["tests"] if t["outcome"] == "harness-error"]
    if errors or results["fatal_errors"] or results["collection_errors"]:
        problems.append(f"harness errors: {errors[:5] or results['fatal_errors'] or results['collection_errors']}")
    return problems


def main(argv: list[str]) -> int:
    if not argv or argv[0].startswith("-"):
        print(__doc__, file=sys.stderr)
        return 2
    name, rest = argv[0], argv[1:]
    daemon = HERE / name / name
    profile = SUITE / "profiles" / f"{name}.toml"
    if not daemon.is_file() or not profile.is_file():
        print(f"run_indep: no {daemon} or {profile}", file=sys.stderr)
        return 2
    report_dir = Path(rest[rest.index("--report-dir") + 1]) if "--report-dir" in rest else Path("conformance-results")
    cmd = [sys.executable, str(SUITE / "run.py"), "--daemon", str(daemon), "--profile", str(profile), *rest]
    rc = subprocess.call(cmd)
    try:
        results = json.loads((report_dir / "results.json").read_text())
    except (OSError, ValueError) as exc:
        print(f"run_indep: {name}: no results ({exc}); run.py exited {rc}", file=sys.stderr)
        return 2
    problems = judge(results)
    for p in problems:
        print(f"run_indep: {name}: {p}", file=sys.stderr)
    s = results["summary"]
    print(f"run_indep: {name}: {'PASS' if not problems else 'FAIL'} ({s['pass']} passed, {s['fail']} failed "
          f"[interpretations, not gated], {s['warn']} warned, {s['unsupported']} unsupported)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
