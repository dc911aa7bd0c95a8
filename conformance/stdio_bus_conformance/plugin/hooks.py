"""The pytest plugin of the conformance suite (loaded by conformance/conftest.py
and by run.py as `-p stdio_bus_conformance.plugin`): its options and markers,
and the run's givens (Run) and roles, made once per process at configure time.

Two subjects: a daemon (the default: clauses from SPEC.md, tests in tests/,
the `bus` fixture) or, with --worker/--worker-description, a worker (clauses
from WORKER_SPEC.md, tests in worker_tests/, the `worker` fixture). Outcomes,
exit codes, baselines, coverage and reports are the same in both.

Runs in three roles: a plain pytest process (collects and runs), an xdist
controller (no collection: receives reports, writes the reports), and an
xdist worker (collects, runs, and sends its inventory of cited clauses back
through workeroutput).

What the run is given is one Run (state.py), read only; its roles are
plugins of their own, each the only writer of what it gathers: subjects.py
(both modes' set-up and preflight), selection.py (collection rules, the
inventory and the selection), results.py (each test's outcome, the
findings), artifacts.py (reproducers), finish.py (the verdict and the
reports). Each is published in config.stash (keys.py); a role is handed the
roles it reads when it is made.
"""

from __future__ import annotations

from ..common import context
from ..common.interrupt import sigterm_interrupts
from ..daemon import contain
from ..worker.description import MCP_VERSIONS, PROFILES
from . import keys
from .artifacts import Artifacts
from .finish import Finish
from .results import Results
from .selection import Selection
from .state import Run
from .subjects import Subjects


def pytest_addoption(parser):
    g = parser.getgroup("stdio-bus", "stdio Bus conformance")
    g.addoption("--daemon", help="daemon under test (default: build/stdio_bus)")
    g.addoption("--profile", help="daemon profile, TOML (default: profiles/stdio_bus.toml)")
    g.addoption("--mock-worker", help="mock worker binary (default: build/mock_workers/mock_worker)")
    g.addoption("--spec", help="SPEC.md to read the clauses from (default: found next to the suite)")
    g.addoption("--seed", type=int, help="seed of the run (default: random; written to the reports)")
    g.addoption("--report-dir", default="conformance-results", help="where reports and artifacts go")
    g.addoption("--baseline", help="expected failures of this daemon (JSON)")
    g.addoption("--write-baseline", metavar="FILE", help="write this run's failures as a baseline")
    g.addoption("--update-baseline", metavar="FILE",
                help="merge this run into the baseline FILE (keeps entries outside the selection; baseline.py)")
    g.addoption("--strict-should", action="store_true",
                help="SHOULD-level failures (warnings) fail the run too (run.py --strict)")
    g.addoption("--clause", action="append", default=[], metavar="GLOB",
                help="run tests citing a clause matching GLOB (repeatable), e.g. 'SB-6.*'")
    g.addoption("--exclude-clause", action="append", default=[], metavar="GLOB",
                help="skip tests citing a clause matching GLOB (repeatable)")
    g.addoption("--section", action="append", default=[], metavar="N",
                help="run tests citing a clause of spec section N or its subsections (repeatable)")
    g.addoption("--only", action="append", default=[], metavar="NODEID",
                help="run only the test with this node id (repeatable; used by reproducers)")
    g.addoption("--min-tests", type=int, default=0, help="exit 2 when fewer tests ran")
    g.addoption("--min-judged", type=float, default=None, metavar="SHARE",
                help="exit 3 when a whole run judges fewer than this share of the MUST clauses that apply "
                     "(default 0.5; 0: off)")
    g.addoption("--wait-timeout", type=float,
                help="deadline of one wait (s), fixed; default: 5 s or, for a subject the preflight "
                     "found slow, more (common/pace.py)")
    g.addoption("--no-preflight", action="store_true",
                help="skip the preflight (systemic checks; tests standing on a broken one are blocked)")
    g.addoption("--no-coverage-gate", action="store_true", help="report untested MUST clauses, do not fail")
    g.addoption("--bite-map", metavar="FILE", help="the bite map: judge which MUST clauses are proven to bite")
    g.addoption("--bite-results", metavar="FILE", help="verify_bites.py's results for --bite-map")
    g.addoption("--coverage-only", action="store_true", help="with --collect-only: print coverage, gate it")
    parser.addini("stdio_bus_conformance", type="bool", default=False,
                  help="this pytest run is a stdio Bus conformance run (the suite's pytest.ini says so)")
    w = parser.getgroup("stdio-bus-worker", "stdio Bus worker conformance (WORKER_SPEC.md)")
    w.addoption("--worker", metavar="'COMMAND ARGS'",
                help="judge this worker instead of a daemon (one shell-quoted string)")
    w.addoption("--worker-profile", action="append", default=[], choices=PROFILES,
                help="profile the worker claims (repeatable; none implies another)")
    w.addoption("--mcp-version", choices=MCP_VERSIONS,
                help=f"MCP revision the worker is judged on (default: {MCP_VERSIONS[-1]})")
    w.addoption("--worker-env", action="append", default=[], metavar="KEY=VALUE",
                help="environment variable for the worker (repeatable)")
    w.addoption("--worker-description", metavar="FILE",
                help="worker description (TOML): command, profiles, env, facts")


def pytest_configure(config):
    config.addinivalue_line("markers", "clause(*ids): spec clauses the test checks (required)")
    config.addinivalue_line("markers", "modes(*modes): operating modes to run in (default: stdio, unix, tcp)")
    config.addinivalue_line("markers", "requires(*features): profile features (worker tests: description "
                            "facts) the test needs")
    config.addinivalue_line("markers", "worker_profile(name): what a worker test talks (plain: sessionIds; "
                            "jsonrpc: error codes; mcp: MCP calls): the worker must claim it too")
    config.addinivalue_line("markers", "stands_on(*items): preflight items the test needs and does not judge "
                            "(restart-exit0, restart-crash, big-line, burst, malformed, ...): blocked when broken")
    config.addinivalue_line("markers", "long_wait: the test waits out a default limit of tens of seconds "
                            "(8.1) or a long idle period; it runs by default, and is handed out first "
                            "(plugin/order.py) so its wait overlaps the rest of the suite")
    if not _active(config):
        return
    # the floor of every wait; the subjects (subjects.py) raise it to the preflight's pace
    context.state.wait = config.getoption("wait_timeout") or context.DEFAULT_WAIT
    context.state.fixed = config.getoption("wait_timeout") is not None
    run = Run(config)
    config.stash[keys.RUN] = run
    subjects = Subjects(run)
    artifacts = Artifacts(run, subjects)
    selection = Selection(run, subjects)
    results = Results(run, artifacts)
    finish = Finish(run, subjects, selection, results)
    # one name per role: file x.py, class X, plugin sb_x, stash key keys.X; registered in the order
    # they always were, which decides the order pluggy calls their hooks in
    for key, name, plugin in ((keys.SUBJECTS, "sb_subjects", subjects), (keys.ARTIFACTS, "sb_artifacts", artifacts),
                              (keys.SELECTION, "sb_selection", selection), (keys.RESULTS, "sb_results", results),
                              (keys.FINISH, "sb_finish", finish)):
        config.stash[key] = plugin
        config.pluginmanager.register(plugin, name)
    # whatever the daemon forks is re-parented to this process, never to init (daemon/contain.py)
    contain.become_subreaper()
    # a CI's cancel (SIGTERM) ends the run as Ctrl-C does: exit 2, reports written, nothing left
    sigterm_interrupts()


def _active(config) -> bool:
    """Installed (pytest11 entry point), the plugin is loaded by every pytest
    run of its environment: it judges only a conformance run, one whose ini
    file sets stdio_bus_conformance = true (the suite's pytest.ini, which
    run.py passes) or that loads it by name (-p stdio_bus_conformance.plugin)."""
    named = "stdio_bus_conformance.plugin" in (getattr(config.known_args_namespace, "plugins", None) or [])
    return named or bool(config.getini("stdio_bus_conformance"))
