#!/usr/bin/python3
"""In which operating modes is each MUST clause judged?

    conformance/mutants/mode_coverage.py RESULTS.json [--spec SPEC.md] [--json] [--all]

Reads the results.json of one run (run.py writes one per run in
--report-dir) and lists, for every MUST / MUST NOT clause of SPEC.md whose
Check is black-box, the modes in which at least one test citing it ran
(outcome pass, fail, warn or xfail: a skipped or unsupported test judged
nothing; the modes where the citing tests were only skipped, e.g. the slow
ones without SB_CONFORMANCE_SLOW=1, are shown as "not run in"). It then compares them with the modes the clause applies to:

  all     the clause concerns what the daemon does with client traffic, so
          a daemon can break it in one mode and keep it in another (most of
          sections 3-8, 10, the appendices and the MUST interpretations);
  socket  it needs two clients, a listener or a client that leaves while the
          daemon runs on (4.1.2-2, 7.2, 8.2-1, 10.2-1, SB-I-4, ...);
  stdio / unix / tcp  it names one mode (4.1.1, 4.1.2-1, SB-I-5);
  any     it involves no client I/O at all (configuration, the restart
          policy, reaping): one mode judges it.

The table of exceptions is APPLIES below, each with its reason; every other
clause is `all`. Prints the clauses judged in fewer modes than they apply
to (the gaps), then a summary line:

  MUST clauses: 126 (all 87, any 24, ...); judged in every mode they apply to: 120;
  gaps: 6 (2 judged in one mode only, 3 in none); judged by a single test function: 42

Exit 0 when there is no gap, 1 when there is, 2 on a usage error.
Standard library only.
"""

import argparse
import fnmatch
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
from clauses_check import parse_spec  # noqa: E402

MODES = ("stdio", "unix", "tcp")
SCOPES = {"all": set(MODES), "socket": {"unix", "tcp"}, "stdio": {"stdio"},
          "unix": {"unix"}, "tcp": {"tcp"}}
RAN = {"pass", "fail", "warn", "xfail"}

# (glob, scope, reason). First match wins; clauses matching none are "all".
APPLIES = [
    ("SB-4.1.1-1", "stdio", "the --stdio flag"),
    ("SB-4.1.1-2", "stdio", "no mode flag means stdio"),
    ("SB-4.1.1-3", "unix", "the --unix flag"),
    ("SB-4.1.1-4", "tcp", "the --tcp flag"),
    ("SB-4.1.2-1", "stdio", "stdio mode has exactly one client"),
    ("SB-4.1.2-2", "socket", "many clients at once"),
    ("SB-3.4-3", "socket", "one owner among several clients"),
    ("SB-3.4-5", "socket", "the owner leaves while the daemon runs on (stdio: SB-I-5)"),
    ("SB-7.2-*", "socket", "a client leaves while the daemon runs on (stdio: SB-I-5)"),
    ("SB-8.2-6", "socket", "MAX_CONNECTIONS clients at once"),
    ("SB-10.2-1", "socket", "the listening socket"),
    ("SB-I-4", "socket", "a session of another client"),
    ("SB-I-23", "socket", "a client that has left"),
    ("SB-3.1-1", "any", "the configuration file is read before any client"),
    ("SB-3.3-1", "any", "how workers are spawned"),
    ("SB-7.1.1-2", "any", "reaping workers"),
    ("SB-7.1.3-*", "any", "the restart policy: worker supervision only"),
    ("SB-8.1-3", "any", "default max_restarts"),
    ("SB-8.1-4", "any", "default restart_window_sec"),
    ("SB-8.1-5", "any", "default drain_timeout_sec"),
    ("SB-8.3-3", "any", "max_restarts enforced"),
    ("SB-9.*", "any", "the configuration file"),
    ("SB-I-9", "any", "the restart policy"),
    ("SB-I-10", "any", "the restart policy"),
]


def scope_of(cid: str) -> tuple[str, str]:
    for pattern, scope, reason in APPLIES:
        if fnmatch.fnmatchcase(cid, pattern):
            return scope, reason
    return "all", ""


def analyse(results: dict, clauses: list[dict]) -> list[dict]:
    judged: dict[str, set[str]] = {}
    idle: dict[str, set[str]] = {}  # modes whose citing tests were skipped or unsupported
    tests: dict[str, set[str]] = {}
    for t in results.get("tests", []):
        if not t.get("mode"):
            continue
        for c in t.get("clauses", []):
            if t.get("outcome") in RAN:
                judged.setdefault(c, set()).add(t["mode"])
                tests.setdefault(c, set()).add(t["nodeid"].split("[")[0])
            else:
                idle.setdefault(c, set()).add(t["mode"])
    rows = []
    for c in clauses:
        if c["level"] not in ("MUST", "MUST NOT") or c["check"] != "black-box":
            continue
        scope, reason = scope_of(c["id"])
        modes = judged.get(c["id"], set())
        if scope == "any":
            missing = set() if modes else {"(any)"}
        else:
            missing = SCOPES[scope] - modes
        not_run = idle.get(c["id"], set()) - modes
        rows.append({"id": c["id"], "level": c["level"], "scope": scope, "reason": reason,
                     "modes": sorted(modes, key=MODES.index), "missing": sorted(missing, key=lambda m: MODES.index(m) if m in MODES else -1),
                     "not_run": sorted(not_run, key=MODES.index),
                     "tests": sorted(tests.get(c["id"], set()))})
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("results", help="results.json of a run")
    ap.add_argument("--spec", default=str(HERE.parents[1] / "SPEC.md"))
    ap.add_argument("--json", action="store_true", help="print the table as JSON")
    ap.add_argument("--all", action="store_true", help="list every clause, not only the gaps")
    args = ap.parse_args(argv)
    try:
        results = json.loads(Path(args.results).read_text())
        clauses = parse_spec(args.spec)
    except (OSError, ValueError) as e:
        print(f"mode_coverage: {e}", file=sys.stderr)
        return 2
    rows = analyse(results, clauses)
    gaps = [r for r in rows if r["missing"]]
    if args.json:
        print(json.dumps(rows, indent=1))
        return 1 if gaps else 0
    shown = rows if args.all else gaps
    if shown:
        print(f"{'clause':<12} {'applies':<7} {'judged in':<16} {'missing':<16} {'not run in':<16} tests")
    for r in shown:
        print(f"{r['id']:<12} {r['scope']:<7} {','.join(r['modes']) or '-':<16} "
              f"{','.join(r['missing']) or '-':<16} {','.join(r['not_run']) or '-':<16} {len(r['tests'])}"
              + (f"  ({', '.join(t.split('::')[-1] for t in r['tests'][:2])})" if r["tests"] else ""))
    by_scope = {}
    for r in rows:
        by_scope[r["scope"]] = by_scope.get(r["scope"], 0) + 1
    single = [r for r in rows if r["scope"] != "any" and len(r["modes"]) == 1
              and len(SCOPES[r["scope"]]) > 1]
    print(f"MUST clauses: {len(rows)} ("
          + ", ".join(f"{k} {v}" for k, v in sorted(by_scope.items())) + "); "
          f"judged in every mode they apply to: {len(rows) - len(gaps)}; gaps: {len(gaps)} "
          f"({len(single)} judged in one mode only, "
          f"{sum(1 for r in rows if not r['modes'])} in none); "
          f"judged by a single test function: {sum(1 for r in rows if len(r['tests']) == 1)}")
    return 1 if gaps else 0


if __name__ == "__main__":
    sys.exit(main())
