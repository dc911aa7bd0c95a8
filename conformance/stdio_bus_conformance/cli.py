"""Run the stdio Bus conformance suite against a daemon, or against a worker.

    run.py [--daemon PATH] [--profile FILE] [--baseline FILE] [-j N] [TEST_ID ...]
    run.py --worker 'COMMAND ARGS' --worker-profile plain|jsonrpc|mcp|acp [--worker-env K=V] ...
    run.py --worker-description FILE [--worker 'COMMAND ARGS'] ...
    run.py --compare OLD_DIR NEW_DIR          (two runs' reports compared)
    run.py --matrix [NAME=]RUN_DIR... --report-dir OUT   (runs side by side)

In worker mode the suite spawns the worker itself, plays its daemon/client,
and judges it against WORKER_SPEC.md with the tests in worker_tests/.

Exit status: 0 every test passed (SHOULD-level warnings allowed); 1 a test
failed, or the baseline has a stale entry; 2 the run cannot be trusted (a
harness error, a collection error, nothing selected, fewer than --min-tests
tests ran, or a MUST clause without a test); 3 nothing failed, but a whole
run judged fewer than --min-judged (half) of the MUST clauses that apply to
the subject. See README.md.
"""

from __future__ import annotations

import argparse
import os
import random
import sys

from .common.location import SUITE_DIR
from .repeat import MAX_REPEAT

# the suite's directory (run.py, pytest.ini, tests/, profiles/): see location.py
HERE = str(SUITE_DIR)


def default_bite_map():
    return SUITE_DIR / "bite_map.toml"


def default_bite_results():
    """The last whole verification of the bite map, else the last fast one
    (verify_bites.py writes them in the source tree's build/bite/)."""
    d = SUITE_DIR.parent / "build" / "bite"
    whole = d / "verify.json"
    return whole if whole.exists() or not (d / "verify-fast.json").exists() else d / "verify-fast.json"


def _import_pytest():
    import importlib.util
    try:
        missing = [m for m in ("pytest", "pytest_timeout", "xdist") if importlib.util.find_spec(m) is None]
        if missing:
            raise ImportError(f"missing module(s): {', '.join(missing)}")
        import pytest
        return pytest
    except ImportError as exc:
        # The python3 first on PATH may lack the packages the Debian one has.
        alt = "/usr/bin/python3"
        if os.path.exists(alt) and os.path.realpath(sys.executable) != os.path.realpath(alt) \
                and not os.environ.get("SB_CONFORMANCE_REEXEC"):
            os.environ["SB_CONFORMANCE_REEXEC"] = "1"
            os.execv(alt, [alt] + sys.argv)
        sys.stderr.write(f"run.py: {exc}: the suite needs pytest, pytest-xdist and pytest-timeout "
                         "(Debian: apt-get install python3-pytest python3-pytest-xdist "
                         "python3-pytest-timeout)\n")
        sys.exit(2)


def parse_args(argv):
    from .spec.version import version_line
    p = argparse.ArgumentParser(
        prog=os.path.basename(sys.argv[0]) or "run.py", description="stdio Bus conformance suite",
        epilog="Arguments after -- go to pytest unchanged.")
    p.add_argument("--version", action="version", version=version_line(),
                   help="print the kit's version and the spec revision it judges, and exit")
    p.add_argument("tests", nargs="*", metavar="TEST_ID",
                   help="test ids or files to run (default: the whole suite)")
    p.add_argument("--daemon", help="daemon under test (default: build/stdio_bus or <prefix>/bin/stdio_bus)")
    p.add_argument("--profile", help="daemon profile (TOML; default: profiles/stdio_bus.toml)")
    p.add_argument("--mock-worker", help="mock worker binary")
    p.add_argument("--spec", help="SPEC.md (default: next to run.py, or at the top of the source tree)")
    p.add_argument("--report-dir", default="conformance-results", help="default: %(default)s")
    p.add_argument("--baseline", help="expected failures of this daemon (JSON)")
    p.add_argument("--write-baseline", metavar="FILE",
                   help="write this run's failures as a baseline (replaces FILE; see --update-baseline)")
    p.add_argument("--update-baseline", metavar="FILE",
                   help="merge this run into the baseline FILE: keep entries outside the selection and every "
                        "reason, add new failures (reason to write), drop entries now passing")
    p.add_argument("--strict", action="store_true",
                   help="SHOULD-level failures (warnings) fail the run too (exit 1)")
    p.add_argument("--repeat", type=int, default=0, metavar="N",
                   help="rerun each failed test N times and report it flaky (mixed outcomes) or steady")
    p.add_argument("--clause", action="append", default=[], metavar="GLOB",
                   help="run tests citing a matching clause, e.g. 'SB-6.*' (repeatable)")
    p.add_argument("--exclude-clause", action="append", default=[], metavar="GLOB",
                   help="leave out tests citing a matching clause (repeatable)")
    p.add_argument("--section", action="append", default=[], metavar="N",
                   help="run tests citing a clause of section N, e.g. 6.1 (repeatable)")
    p.add_argument("--only", action="append", default=[], metavar="NODEID",
                   help="run only the test with this exact node id (repeatable; reproducers use it)")
    p.add_argument("-k", dest="keyword", metavar="EXPR", help="pytest -k expression")
    # 8 on 2 cores: the tests mostly wait on the daemon (CPU use is about a third of one core
    # per job), and the four long_wait tests (the 30-60 s defaults of 8.1) each hold one job
    p.add_argument("-j", "--jobs", type=int, default=8, help="parallel workers (default: %(default)s)")
    p.add_argument("--timeout", type=float, default=60, help="per-test timeout in s (default: %(default)s)")
    p.add_argument("--wait-timeout", type=float,
                   help="deadline of one wait for the subject, in s: fixed, instead of the default (5 s, or "
                        "more for a subject the preflight found slow: conformance/README.md, Waits)")
    p.add_argument("--seed", type=int, help="seed of the run (default: random, printed)")
    p.add_argument("--min-tests", type=int, default=0, help="exit 2 if fewer tests ran")
    p.add_argument("--min-judged", type=float, default=None, metavar="SHARE",
                   help="exit 3 when a whole run judges fewer than this share of the MUST clauses that "
                        "apply (default: 0.5; 0 turns it off)")
    p.add_argument("--tests-dir", dest="tests_dirs", action="append", default=[], metavar="DIR",
                   help="test directory or file to collect (repeatable; default: the suite's tests/)")
    p.add_argument("--coverage", action="store_true",
                   help="only list clause coverage; exit 2 if a MUST clause has no test")
    p.add_argument("--no-coverage-gate", action="store_true",
                   help="list untested MUST clauses without failing the run")
    p.add_argument("--bite", nargs="?", const="", default=None, metavar="MAP",
                   help="judge the coverage by the bite map too (default map: bite_map.toml of the suite): "
                        "which MUST clauses are proven to fail on a break; the gate fails a clause "
                        "not in the map (see README, Bite map)")
    p.add_argument("--bite-results", metavar="FILE",
                   help="verify_bites.py's results (default: build/bite/verify.json of the source tree, "
                        "else verify-fast.json there)")
    p.add_argument("--no-preflight", action="store_true",
                   help="skip the preflight (systemic checks before the tests; see README)")
    w = p.add_argument_group("worker mode", "judge a worker against WORKER_SPEC.md instead of a daemon")
    w.add_argument("--worker", metavar="'COMMAND ARGS'",
                   help="the worker: its command line as one shell-quoted string")
    w.add_argument("--worker-profile", action="append", default=[], choices=("plain", "jsonrpc", "mcp", "acp"),
                   help="profile the worker claims (repeatable; none implies another)")
    w.add_argument("--mcp-version", choices=("2025-03-26", "2025-06-18", "2025-11-25"),
                   help="MCP revision an mcp worker is judged on (default: the newest, 2025-11-25)")
    w.add_argument("--worker-env", action="append", default=[], metavar="KEY=VALUE",
                   help="environment variable for the worker (repeatable)")
    w.add_argument("--worker-description", metavar="FILE",
                   help="worker description (TOML): command, profiles, env, facts (see README.md)")
    p.add_argument("--rerun", metavar="DIR",
                   help="rerun the test of a reproducer folder (artifacts/<test>/: its rerun.json and "
                        "profile.toml); --daemon, --mock-worker and --report-dir override what it names")
    a = p.add_argument_group("across runs", "read report folders; run no test")
    a.add_argument("--compare", nargs=2, metavar=("OLD_DIR", "NEW_DIR"),
                   help="newly failing, newly passing and changed clauses between two runs: the console, "
                        "compare.md (in --report-dir if given, else NEW_DIR) and a section in NEW_DIR/report.html; "
                        "exit 1 when a clause newly fails")
    a.add_argument("--matrix", nargs="+", metavar="[NAME=]RUN_DIR",
                   help="implementation x clause: --report-dir/matrix.html and matrix.md, each cell linking to "
                        "that run's report.html")
    p.add_argument("-v", "--verbose", action="count", default=0)
    p.add_argument("-q", "--quiet", action="count", default=0)
    if "--" in argv:
        i = argv.index("--")
        opts, extra = p.parse_args(argv[:i]), argv[i + 1:]
    else:
        opts, extra = p.parse_args(argv), []
    opts.report_dir_given = any(a == "--report-dir" or a.startswith("--report-dir=") for a in argv)
    if opts.compare and opts.matrix:
        p.error("--compare and --matrix: one at a time")
    if opts.matrix and not opts.report_dir_given:
        p.error("--matrix: name the folder to write matrix.html in with --report-dir OUT")
    if worker_mode(opts):
        clash = [o for o, v in (("--daemon", opts.daemon), ("--profile", opts.profile),
                                ("--mock-worker", opts.mock_worker)) if v]
        if clash:
            p.error(f"{', '.join(clash)}: daemon options, not for a worker run")
    if not 0 <= opts.repeat <= MAX_REPEAT:
        p.error(f"--repeat: 0 to {MAX_REPEAT}")
    if opts.rerun:
        load_rerun(p, opts, "--report-dir" in argv)
    return opts, extra


def load_rerun(p, opts, report_dir_given: bool) -> None:
    """Fills opts from a reproducer folder. Paths in rerun.json: the profile
    is the folder's own copy, the suite is relative to this run.py when it was
    inside the kit; the daemon and the mock worker as they were, unless given
    on the command line."""
    import json
    folder = os.path.abspath(opts.rerun)
    try:
        with open(os.path.join(folder, "rerun.json"), encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError) as exc:
        p.error(f"--rerun {opts.rerun}: no readable rerun.json ({exc})")
    opts.daemon = opts.daemon or data["daemon"]
    opts.mock_worker = opts.mock_worker or data["mock_worker"]
    opts.profile = opts.profile or os.path.join(folder, data.get("profile") or "profile.toml")
    opts.spec = opts.spec or data.get("spec")
    opts.seed = data["seed"] if opts.seed is None else opts.seed
    opts.wait_timeout = data.get("wait_timeout") or opts.wait_timeout
    if data.get("timeout"):
        opts.timeout = data["timeout"]
    opts.tests_dirs = [d if os.path.isabs(d) else os.path.join(HERE, d) for d in data.get("tests_dirs", [])]
    opts.only = [data["nodeid"]]
    opts.jobs = 1
    opts.no_coverage_gate = True
    opts.no_preflight = opts.no_preflight or not data.get("preflight", True)
    if not report_dir_given:
        opts.report_dir = os.path.join(folder, "rerun")
    for what, path in (("daemon", opts.daemon), ("mock worker", opts.mock_worker)):
        if not os.path.exists(path):
            p.error(f"--rerun: the {what} {path} is not here: pass --{what.replace(' ', '-')} PATH")


def worker_mode(opts) -> bool:
    return bool(opts.worker or opts.worker_description or opts.worker_profile or opts.worker_env
                or opts.mcp_version)


def _resolve_test(arg: str) -> str:
    """A test id as printed by the suite is relative to the conformance
    directory; accept it from any working directory."""
    path, sep, rest = arg.partition("::")
    if os.path.exists(path):
        return os.path.abspath(path) + sep + rest
    alt = os.path.join(HERE, path)
    if os.path.exists(alt):
        return alt + sep + rest
    return arg


SUBJECT_FILES = ("daemon", "profile", "mock_worker", "spec", "worker_description")


def subject_args(opts, files=SUBJECT_FILES) -> list[str]:
    """The options naming what is judged (file options made absolute, the
    worker and its profiles): the same for a run and for its reruns."""
    a = []
    for name in files:
        value = getattr(opts, name)
        if value:
            a += [f"--{name.replace('_', '-')}", os.path.abspath(value)]
    if opts.worker:
        a += ["--worker", opts.worker]
    for prof in opts.worker_profile:
        a += ["--worker-profile", prof]
    for item in opts.worker_env:
        a += ["--worker-env", item]
    if opts.mcp_version:
        a += ["--mcp-version", opts.mcp_version]
    return a


def pytest_args(opts, extra) -> list[str]:
    a = ["-c", os.path.join(HERE, "pytest.ini"), "--rootdir", HERE,
         "-p", "stdio_bus_conformance.plugin", "-p", "no:cacheprovider"]
    a += subject_args(opts, SUBJECT_FILES + ("baseline", "write_baseline", "update_baseline"))
    a += ["--report-dir", os.path.abspath(opts.report_dir), "--seed", str(opts.seed),
          "--min-tests", str(opts.min_tests)]
    if opts.min_judged is not None:
        a += ["--min-judged", str(opts.min_judged)]
    if opts.wait_timeout is not None:
        a += ["--wait-timeout", str(opts.wait_timeout)]
    for g in opts.clause:
        a += ["--clause", g]
    for g in opts.exclude_clause:
        a += ["--exclude-clause", g]
    for s in opts.section:
        a += ["--section", s]
    for n in opts.only:
        a += ["--only", n]
    if opts.keyword:
        a += ["-k", opts.keyword]
    if opts.no_coverage_gate:
        a.append("--no-coverage-gate")
    if opts.no_preflight:
        a.append("--no-preflight")
    if opts.bite is not None:
        a += ["--bite-map", os.path.abspath(opts.bite) if opts.bite else str(default_bite_map())]
        a += ["--bite-results", os.path.abspath(opts.bite_results) if opts.bite_results
              else str(default_bite_results())]
    if opts.strict:
        a.append("--strict-should")  # pytest's own --strict is another option
    if opts.coverage:
        a += ["--collect-only", "-qq", "--coverage-only", "-p", "no:xdist"]
    else:
        a += ["--timeout", str(opts.timeout)]
        a += ["-n", str(opts.jobs)] if opts.jobs > 1 else ["-p", "no:xdist"]
        a += ["-v"] * opts.verbose + ["-q"] * opts.quiet
        a += ["-rN"]
    a += extra
    if opts.tests:
        a += [_resolve_test(t) for t in opts.tests]
    else:
        dirs = opts.tests_dirs or [os.path.join(HERE, "worker_tests" if worker_mode(opts) else "tests")]
        a += [os.path.abspath(d) for d in dirs]
    return a


class _Capture:
    """Keeps the pytest config so the summary can be read after the run."""
    config = None

    def pytest_configure(self, config):
        _Capture.config = config


def main(argv=None) -> int:
    opts, extra = parse_args(sys.argv[1:] if argv is None else argv)
    if opts.compare or opts.matrix:
        from . import across
        if opts.compare:
            return across.compare_runs(*opts.compare, opts.report_dir if opts.report_dir_given else None)
        return across.matrix_runs(opts.matrix, opts.report_dir)
    if opts.seed is None:
        opts.seed = random.SystemRandom().randrange(1, 2**31)
    # xdist workers import the plugin too: make the package importable there
    os.environ["PYTHONPATH"] = HERE + (os.pathsep + os.environ["PYTHONPATH"]
                                       if os.environ.get("PYTHONPATH") else "")
    if HERE not in sys.path:
        sys.path.insert(0, HERE)
    pytest = _import_pytest()
    args = pytest_args(opts, extra)
    rc = int(pytest.main(args, plugins=[_Capture()]))
    if rc not in (0, 1, 2):  # pytest's own: internal error, usage error, no tests
        rc = 2
    from stdio_bus_conformance.plugin.keys import FINISH  # needs pytest: imported once it ran
    finish = _Capture.config.stash.get(FINISH, None) if _Capture.config else None
    final = getattr(finish, "final", None)
    if final is not None and not opts.coverage:
        from stdio_bus_conformance import repeat
        from stdio_bus_conformance.reports.outcomes import summary_line
        from stdio_bus_conformance.reports.console import verdict_lines
        from stdio_bus_conformance.reports.render import write_all
        if opts.repeat and not final.fatal and not final.counts.get("unfinished"):
            final.repeat = repeat.run(opts, subject_args(opts), extra, HERE, final.results,
                                      os.path.abspath(opts.report_dir), opts.repeat)
            if final.repeat:
                write_all(os.path.abspath(opts.report_dir), final)  # the reports now say it
                for line in repeat.lines(final.repeat):
                    print(line)
        from stdio_bus_conformance.reports.words import kit_line
        print(f"{kit_line(final.meta)}; seed {opts.seed}; reports in {os.path.abspath(opts.report_dir)}")
        for line in verdict_lines(final):  # the verdict on the spec itself, tier by tier
            print(line)
        print(summary_line(final.counts))  # the last line stays the counts (scripts read it)
    return rc

