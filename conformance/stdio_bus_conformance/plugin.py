"""The pytest plugin of the conformance suite (loaded by conformance/conftest.py
and by run.py): options, markers, mode parametrisation, the `bus` fixture,
outcome mapping, baseline, coverage and reports.

Two subjects: a daemon (the default: clauses from SPEC.md, tests in tests/,
the `bus` fixture) or, with --worker/--worker-description, a worker (clauses
from WORKER_SPEC.md, tests in worker_tests/, the `worker` fixture). Outcomes,
exit codes, baselines, coverage and reports are the same in both.

Runs in three roles: a plain pytest process (collects and runs), an xdist
controller (no collection: receives reports, writes the reports), and an
xdist worker (collects, runs, and sends its inventory of cited clauses back
through workeroutput).
"""

from __future__ import annotations

import datetime
import json
import os
import random
import re
import shlex
import sys
import time
from pathlib import Path

import pytest

from . import baseline as bl
from . import reports
from .bus import Bus, RunContext
from .coverage import compute as compute_coverage
from . import contain, context
from . import version as kit_version
from .errors import DaemonCrashed, HarnessError
from .judge import ClauseFailure
from .outcomes import (EXIT_HARNESS, Phase, TestResult, Verdict, classify, exception_kind,
                       summary_line, verdict)
from .preflight import ITEMS as PREFLIGHT_ITEMS
from .preflight import Results as PreflightResults
from .preflight import blocked_message
from .preflight import run as run_preflight
from .preflight import summary_lines as preflight_lines
from .profile import MODES, load_profile
from .spec import CONFORMANCE_DIR, ID_RE, Registry
from .worker_desc import (FACTS, MCP_VERSIONS, PROFILES, clause_applies, from_options,
                          problems as worker_problems, speaks)
from .worker_run import WorkerContext, WorkerRun

STATE_KEY = "_sb_state"
ARTIFACT_RUN_CAP = 64 << 20  # bytes of artifacts a whole run may leave
_CATEGORY = {  # outcome -> (pytest stats category, letter, word)
    "pass": ("passed", ".", "PASSED"),
    "fail": ("failed", "F", "FAILED"),
    "warn": ("warn", "W", "WARN"),
    "xfail": ("xfail", "x", "XFAIL (baseline)"),
    "unsupported": ("unsupported", "u", "UNSUPPORTED"),
    "skipped": ("skipped", "s", "SKIPPED"),
    "harness-error": ("harness-error", "E", "HARNESS-ERROR"),
    "blocked": ("blocked", "b", "BLOCKED"),
    "unfinished": ("unfinished", "?", "UNFINISHED"),
}


# -- defaults --------------------------------------------------------------------
def _first_existing(*paths) -> str | None:
    for p in paths:
        if p and os.path.exists(p):
            return str(p)
    return None


def default_daemon() -> str:
    """build/stdio_bus in the source tree, else <prefix>/bin/stdio_bus when
    the suite is installed in <prefix>/share/stdio_bus/conformance."""
    tree, prefix = CONFORMANCE_DIR.parent, CONFORMANCE_DIR.parent.parent.parent
    return _first_existing(tree / "build" / "stdio_bus", prefix / "bin" / "stdio_bus") \
        or str(tree / "build" / "stdio_bus")


def default_mock() -> str:
    tree, prefix = CONFORMANCE_DIR.parent, CONFORMANCE_DIR.parent.parent.parent
    return _first_existing(tree / "build" / "mock_workers" / "mock_worker",
                           prefix / "libexec" / "stdio_bus" / "mock_worker") \
        or str(tree / "build" / "mock_workers" / "mock_worker")


def default_profile() -> str | None:
    return _first_existing(CONFORMANCE_DIR / "profiles" / "stdio_bus.toml")


# -- options and markers -----------------------------------------------------------
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
    g.addoption("--wait-timeout", type=float, default=5.0, help="default deadline of one wait (s)")
    g.addoption("--no-preflight", action="store_true",
                help="skip the preflight (systemic checks; tests standing on a broken one are blocked)")
    g.addoption("--no-coverage-gate", action="store_true", help="report untested MUST clauses, do not fail")
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
    if not _active(config):
        return
    state = State(config)
    setattr(config, STATE_KEY, state)
    config.pluginmanager.register(state, "sb_state")
    context.state.wait = config.getoption("wait_timeout")
    # whatever the daemon forks is re-parented to this process, never to init (contain.py)
    contain.become_subreaper()


def _active(config) -> bool:
    """Installed (pytest11 entry point), the plugin is loaded by every pytest
    run of its environment: it judges only a conformance run, one whose ini
    file sets stdio_bus_conformance = true (the suite's pytest.ini, which
    run.py passes) or that loads it by name (-p stdio_bus_conformance.plugin)."""
    named = "stdio_bus_conformance.plugin" in (getattr(config.known_args_namespace, "plugins", None) or [])
    return named or bool(config.getini("stdio_bus_conformance"))


def _state(config) -> "State":
    state = getattr(config, STATE_KEY, None)
    if state is None:
        raise HarnessError("the stdio Bus conformance plugin is inactive in this pytest run: set "
                           "stdio_bus_conformance = true in its ini file, or pass -p stdio_bus_conformance.plugin")
    return state


# -- the `bus` fixture -----------------------------------------------------------------
@pytest.fixture
def sb_mode(request) -> str:
    return getattr(request, "param", "stdio")


@pytest.fixture
def bus(request, sb_mode):
    """The daemon under test, in this test's mode. See stdio_bus_conformance.bus."""
    state = _state(request.config)
    if state.fatal:
        raise HarnessError("; ".join(state.fatal))
    if state.worker_mode:
        raise HarnessError("this test needs a daemon (the `bus` fixture) and the run judges a worker: "
                           "collect worker_tests/ with --worker")
    if not state.ctx.profile.supports(sb_mode):
        pytest.skip(f"unsupported: the profile {state.ctx.profile.name} does not support {sb_mode} mode")
    for m in request.node.iter_markers("requires"):
        missing = [f for f in m.args if f not in state.ctx.profile.features]
        if missing:
            pytest.skip(f"unsupported: the profile lacks feature(s) {', '.join(missing)}")
    cited = state.item_clauses(request.node)
    if state.ctx.preflight is not None:  # blocked before anything starts: fast
        for item in [f"start-{sb_mode}"] + [a for m in request.node.iter_markers("stands_on") for a in m.args]:
            r = state.ctx.preflight.blocking(item, cited)
            if r is not None:
                pytest.skip(blocked_message(r))
    b = Bus(state.ctx, sb_mode, request.node.nodeid)
    b.requires = {f for m in request.node.iter_markers("requires") for f in m.args}
    b.cited = tuple(cited)
    request.node._sb_bus = b
    context.state.bus = b
    try:
        yield b
    finally:
        crash = None
        try:
            try:
                b.stop()
            except DaemonCrashed as exc:
                crash = exc
            request.node._sb_findings = list(b.findings)
            if getattr(request.node, "_sb_failed", False) or crash is not None or \
                    any(f["kind"] != "flood" for f in b.findings):
                dest = state.artifact_dir(request.node.nodeid)
                b.write_artifacts(dest, state.rerun_command(request.node), state.artifact_room())
                state.write_rerun(dest, request.node)
                if b.truncated:
                    request.node._sb_findings.append(
                        {"kind": "truncated", "test": request.node.nodeid, "clause": None,
                         "detail": "artifacts cut to stay bounded: " + ", ".join(sorted(set(b.truncated)))})
        finally:
            b.cleanup()
        if crash is not None:
            raise crash


@pytest.fixture
def rng(bus):
    """random.Random seeded from the run's seed and the test id."""
    return bus.rng


# -- the `worker` fixture ----------------------------------------------------------------
@pytest.fixture
def worker(request):
    """The worker under test. See stdio_bus_conformance.worker_run."""
    state = _state(request.config)
    if state.fatal:
        raise HarnessError("; ".join(state.fatal))
    if not state.worker_mode:
        raise HarnessError("this test judges a worker (the `worker` fixture) and the run judges a daemon: "
                           "pass --worker 'COMMAND ARGS' --worker-profile P")
    desc = state.wctx.desc
    why = state.worker_unsupported(request.node)
    if why:
        pytest.skip(f"unsupported: {why}")
    for m in request.node.iter_markers("requires"):
        missing = [f for f in m.args if not desc.has(f)]
        if missing:
            pytest.skip(f"the worker description gives no {', '.join(missing)}")
    w = WorkerRun(state.wctx, request.node.nodeid, state.item_clauses(request.node))
    try:
        yield w
    finally:
        try:
            w.stop()
            if getattr(request.node, "_sb_failed", False):
                w.write_artifacts(state.artifact_dir(request.node.nodeid),
                                  state.rerun_command(request.node))
        finally:
            w.cleanup()


# -- the state object (a plugin instance: its hooks see the config) ---------------------------
class State:
    def __init__(self, config):
        self.config = config
        self.is_worker = hasattr(config, "workerinput")
        self.fatal: list[str] = []
        self.registry: Registry | None = None
        self.inventory: dict[str, list] = {}   # nodeid -> clause ids (all collected tests)
        self.inventory_complete = False
        self.have_inventory = False
        self.results: dict[str, TestResult] = {}
        self.findings: list[dict] = []
        self.interrupted = False
        self.collection_errors: list[dict] = []
        self.nothing_selected = False
        self.started = time.time()
        self.t0 = time.monotonic()
        opt = config.getoption
        self.report_dir = os.path.abspath(opt("report_dir"))
        seed = opt("seed")
        if seed is None and self.is_worker:
            seed = config.workerinput.get("sb_seed")
        self.seed = seed if seed is not None else random.SystemRandom().randrange(1, 2**31)
        token = config.workerinput.get("sb_token") if self.is_worker else None
        self.token = token or f"{os.getpid()}-{self.seed}-{random.SystemRandom().randrange(1 << 32):08x}"
        self.worker_mode = bool(opt("worker") or opt("worker_description") or opt("worker_profile")
                                or opt("worker_env") or opt("mcp_version"))
        self.preflight = PreflightResults.from_json(config.workerinput.get("sb_preflight")) \
            if self.is_worker and not self.worker_mode else None
        try:
            self.registry = Registry.load(opt("spec"), "WORKER_SPEC.md" if self.worker_mode else "SPEC.md")
        except HarnessError as exc:
            self.fatal.append(str(exc))
        if self.worker_mode:
            self._init_worker()
        else:
            self._init_daemon()
        self.baseline = bl.empty()
        if opt("baseline"):
            try:
                self.baseline = bl.load(opt("baseline"))
            except HarnessError as exc:
                self.fatal.append(str(exc))
        self.gate_enabled = not opt("no_coverage_gate")
        if not self.is_worker and not config.option.collectonly:
            self._clean_report_dir()

    def _init_worker(self):
        opt = self.config.getoption
        try:
            desc = from_options(opt("worker"), opt("worker_profile"), opt("worker_env"),
                                opt("worker_description"), opt("mcp_version"))
        except HarnessError as exc:
            self.fatal.append(str(exc))
            desc = from_options(None, [], [], None)
        if not self.config.option.collectonly:  # --coverage needs no worker
            self.fatal += worker_problems(desc)
        self.wctx = WorkerContext(desc=desc, seed=self.seed, timeout=desc.answer_timeout or opt("wait_timeout"))
        if self.is_worker:  # the controller ran the preflight (pytest_sessionstart)
            self._use_worker_preflight(self.config.workerinput.get("sb_worker_preflight") or {})

    # -- worker preflight (worker_preflight.py): once per run, before the tests ----------------
    def _worker_sessionstart(self):
        if self.is_worker or self.fatal or self.config.option.collectonly:
            return
        from . import worker_preflight
        try:
            result = worker_preflight.run(self.wctx.desc, self.wctx.timeout)
        except HarnessError as exc:
            self.fatal.append(f"worker preflight: {exc}")
            return
        os.makedirs(self.report_dir, exist_ok=True)
        with open(os.path.join(self.report_dir, "preflight.txt"), "w", encoding="utf-8") as f:
            f.write(result.pop("transcript", ""))
        self._use_worker_preflight(result)

    def _use_worker_preflight(self, result: dict) -> None:
        self.wctx.preflight = result
        desc = self.wctx.desc
        if desc.tool_call is None and result.get("tool_call"):
            desc.tool_call = result["tool_call"]
        if result.get("tool_note"):
            desc.tool_call_note = result["tool_note"]

    def _init_daemon(self):
        opt = self.config.getoption
        daemon = os.path.abspath(opt("daemon") or default_daemon())
        if not (os.path.isfile(daemon) and os.access(daemon, os.X_OK)):
            self.fatal.append(f"daemon not found or not executable: {daemon} (pass --daemon PATH)")
        # our own build is judged with our profile (our CLI, our extensions);
        # any other daemon with the spec's CLI and no extension unless --profile says otherwise
        ours = os.path.realpath(daemon) == os.path.realpath(default_daemon())
        profile_path = opt("profile") or (default_profile() if ours else None)
        try:
            profile = load_profile(profile_path)
        except HarnessError as exc:
            self.fatal.append(str(exc))
            profile = load_profile(None)
        mock = os.path.abspath(opt("mock_worker") or default_mock())
        self.ctx = RunContext(daemon=daemon, profile=profile, mock_worker=mock, seed=self.seed,
                              timeout=opt("wait_timeout"), token=f"{self.token}/{os.getpid()}")
        self._use_preflight(self.preflight)

    def _use_preflight(self, res) -> None:
        """Tests see the preflight through ctx; a daemon that does not exit on
        SIGTERM is killed at once at teardown instead of after shutdown_timeout."""
        self.preflight = res
        if not hasattr(self, "ctx"):
            return
        self.ctx.preflight = res
        term = res.items.get("sigterm") if res is not None else None
        if term is not None and term.status == "broken" and "did not exit" in term.message:
            self.ctx.term_grace = 0.2

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionstart(self, session):
        """The preflight, once per run, before the tests (and before xdist
        starts its workers, which receive its results): of the worker in
        worker mode, else of the daemon."""
        if self.worker_mode:
            self._worker_sessionstart()
            return
        opt = self.config.getoption
        if (self.is_worker or self.fatal or self.config.option.collectonly
                or opt("no_preflight") or self.preflight is not None):
            return
        if not (self.ctx.mock_worker and os.path.isfile(self.ctx.mock_worker)):
            return  # no mock worker: every test is a harness error anyway
        res = run_preflight(self.ctx)
        self._use_preflight(res)
        tr = self.config.pluginmanager.get_plugin("terminalreporter")
        for line in preflight_lines(res):
            if tr is not None:
                tr.write_line(line, red=line.startswith("  BROKEN"))

    def _clean_report_dir(self):
        import shutil
        os.makedirs(self.report_dir, exist_ok=True)
        shutil.rmtree(os.path.join(self.report_dir, "artifacts"), ignore_errors=True)

    # -- artifacts and reproducers ---------------------------------------------------------
    def artifact_room(self) -> int:
        """Bytes of artifacts the run may still write (ARTIFACT_RUN_CAP in all;
        xdist workers share the folder, so it is measured, not counted)."""
        used = 0
        for root, _, files in os.walk(os.path.join(self.report_dir, "artifacts")):
            for f in files:
                try:
                    used += os.stat(os.path.join(root, f)).st_size
                except OSError:
                    pass
        return max(0, ARTIFACT_RUN_CAP - used)

    def artifact_dir(self, nodeid: str) -> Path:
        safe = re.sub(r"[^A-Za-z0-9_.\-\[\]]+", "_", nodeid).strip("_")
        return Path(self.report_dir) / "artifacts" / safe

    def rerun_command(self, item) -> str:
        """The command that reruns just this test with the same daemon,
        profile, mock worker, spec and seed, from any directory: it collects
        what this run collected (so the node id is the same) and keeps only
        that node id."""
        opt = self.config.getoption
        cmd = [sys.executable, str(CONFORMANCE_DIR / "run.py")]
        if self.worker_mode:
            desc = self.wctx.desc
            if desc.path:
                cmd += ["--worker-description", desc.path]
            cmd += ["--worker", desc.command_line()]
            for p in desc.profiles:
                cmd += ["--worker-profile", p]
            for env_item in opt("worker_env"):  # not `item`: the test's node, used below
                cmd += ["--worker-env", env_item]
            cmd += ["--mcp-version", desc.mcp_version, "--wait-timeout", str(opt("wait_timeout"))]
        else:
            # everything else is in the artifact folder (rerun.json, profile.toml): see write_rerun
            return " ".join(shlex.quote(c) for c in cmd + ["--rerun", str(self.artifact_dir(item.nodeid))])
        if opt("spec"):
            cmd += ["--spec", os.path.abspath(opt("spec"))]
        cmd += ["--seed", str(self.seed), "-j", "1", "--no-coverage-gate",
                "--report-dir", os.path.join(self.report_dir, "rerun")]
        for arg in self.config.args:
            cmd += ["--tests-dir", os.path.abspath(str(arg).split("::")[0])]
        cmd += ["--only", item.nodeid]
        return " ".join(shlex.quote(c) for c in cmd)

    def write_rerun(self, dest: Path, item) -> None:
        """What `run.py --rerun <folder>` needs to rerun the test, in the
        folder itself: the profile (copied) and rerun.json. The daemon, the
        mock worker and the suite are named by path (absolute, or for the
        suite relative to run.py): a folder downloaded from CI reruns where
        they exist at the same place, or with --daemon/--mock-worker."""
        opt = self.config.getoption
        (dest / "profile.toml").write_text(self.ctx.profile.to_toml())

        def where(path: str) -> str:
            p = Path(path).resolve()
            return str(p.relative_to(CONFORMANCE_DIR)) if CONFORMANCE_DIR in p.parents else str(p)
        data = {
            "nodeid": item.nodeid,
            "daemon": self.ctx.daemon,
            "mock_worker": self.ctx.mock_worker,
            "profile": "profile.toml",
            "spec": os.path.abspath(opt("spec")) if opt("spec") else None,
            "seed": self.seed,
            "wait_timeout": opt("wait_timeout"),
            "timeout": opt("timeout") if hasattr(self.config.option, "timeout") else None,
            "tests_dirs": [where(str(a).split("::")[0]) for a in self.config.args],
            "preflight": not opt("no_preflight"),
        }
        (dest / "rerun.json").write_text(json.dumps(data, indent=2) + "\n")

    # -- collection ----------------------------------------------------------------------
    def item_clauses(self, item) -> list[str]:
        ids: list[str] = []
        for m in item.iter_markers("clause"):
            for a in m.args:
                if a not in ids:
                    ids.append(a)
        return ids

    def item_problems(self, item) -> list[str]:
        marks = list(item.iter_markers("clause"))
        if not marks:
            return [f"{item.nodeid}: no @pytest.mark.clause(...) marker: every test must cite "
                    "the spec clauses it checks"]
        problems = []
        for m in marks:
            if not m.args:
                problems.append(f"{item.nodeid}: @pytest.mark.clause() needs at least one clause id")
            for a in m.args:
                if not isinstance(a, str) or not ID_RE.match(a):
                    problems.append(f"{item.nodeid}: {a!r} is not a clause id (SB-<section>-<n> or SB-I-<n>)")
                elif self.registry is not None and a not in self.registry:
                    problems.append(f"{item.nodeid}: cites unknown clause {a} (not in {self.registry.path})")
                elif self.registry is not None and self.registry[a].retired:
                    problems.append(f"{item.nodeid}: cites {a}, which SPEC.md marks RETIRED")
        for m in item.iter_markers("stands_on"):
            bad = [x for x in m.args if x not in PREFLIGHT_ITEMS]
            if bad or not m.args:
                problems.append(f"{item.nodeid}: @pytest.mark.stands_on{m.args!r}: preflight items are "
                                f"{', '.join(PREFLIGHT_ITEMS)}")
        for m in item.iter_markers("modes"):
            bad = [x for x in m.args if x not in MODES]
            if bad or not m.args:
                problems.append(f"{item.nodeid}: @pytest.mark.modes{m.args!r}: modes are {', '.join(MODES)}")
        if self.worker_mode and not problems:
            problems += self.worker_item_problems(item)
        elif not problems:
            # an extension is judged only where the profile claims it (SB-X: @pytest.mark.requires)
            ext = [c for c in self.item_clauses(item) if c.startswith("SB-X-")]
            if ext and not any(m.args for m in item.iter_markers("requires")):
                problems.append(f"{item.nodeid}: cites {', '.join(ext)} (an extension) without "
                                "@pytest.mark.requires(<feature>): it would judge every daemon on our extension")
        return problems

    def worker_item_problems(self, item) -> list[str]:
        """A worker test cites clauses that name their profiles, not only MAY
        clauses (a permission cannot be failed, and must not warn), talks one
        profile at most (worker_profile), and requires only facts a
        description can give."""
        problems = []
        for m in item.iter_markers("worker_profile"):
            if len(m.args) != 1 or m.args[0] not in PROFILES:
                problems.append(f"{item.nodeid}: @pytest.mark.worker_profile{m.args!r}: one of "
                                f"{', '.join(PROFILES)}")
        clauses = [self.registry[c] for c in self.item_clauses(item)
                   if self.registry is not None and c in self.registry]
        for clause in clauses:
            if clause.profiles is None:
                problems.append(f"{item.nodeid}: {clause.id} has no 'profiles:' at the start of its Notes")
        if clauses and all(c.level == "MAY" for c in clauses):
            problems.append(f"{item.nodeid}: cites only MAY clauses: a permission cannot be failed")
        for m in item.iter_markers("requires"):
            bad = [f for f in m.args if f not in FACTS]
            if bad:
                problems.append(f"{item.nodeid}: @pytest.mark.requires{m.args!r}: worker facts are "
                                f"{', '.join(FACTS)}")
        return problems

    def worker_unsupported(self, item) -> str | None:
        """Why the worker under test is not judged by this test, or None:
        a cited clause belongs to no profile it claims (in its MCP revision),
        or the test talks a profile it does not claim."""
        desc = self.wctx.desc
        claims = ", ".join(desc.claims) or "nothing"
        for cid in self.item_clauses(item):
            clause = self.registry[cid]
            if not clause_applies(clause.profiles, desc.claims, desc.mcp_version):
                where = ", ".join(f"{p} {' '.join(r)}".strip() for p, r in (clause.profiles or {}).items())
                return f"the worker claims {claims} (MCP {desc.mcp_version}); {cid} belongs to {where}"
        m = item.get_closest_marker("worker_profile")
        if m is not None and m.args and not speaks(desc.claims, m.args[0]):
            return f"the worker claims {claims}; this test talks {m.args[0]}"
        return None

    def pytest_ignore_collect(self, collection_path, config):
        """A daemon run leaves worker_tests/ alone and a worker run tests/,
        unless the directory was named on the command line."""
        other = CONFORMANCE_DIR / ("tests" if self.worker_mode else "worker_tests")
        path = Path(collection_path).resolve()
        if path != other and other not in path.parents:
            return None
        for arg in config.args:
            a = Path(str(arg).split("::")[0]).resolve()
            if a == other or other in a.parents:
                return None
        return True

    @pytest.hookimpl(hookwrapper=True)
    def pytest_pycollect_makeitem(self, collector, name, obj):
        outcome = yield
        res = outcome.get_result()
        items = res if isinstance(res, list) else ([res] if res is not None else [])
        problems = []
        for it in items:
            if isinstance(it, pytest.Function):
                problems += self.item_problems(it)
        if problems:
            raise collector.CollectError("\n".join(problems))

    def pytest_generate_tests(self, metafunc):
        if "sb_mode" not in metafunc.fixturenames:
            return
        m = metafunc.definition.get_closest_marker("modes")
        modes = list(m.args) if m and m.args else list(MODES)
        metafunc.parametrize("sb_mode", modes, ids=modes, indirect=True)

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection_modifyitems(self, session, config, items):
        # the inventory (coverage) counts every collected test, before selection
        for it in items:
            self.inventory[it.nodeid] = self.item_clauses(it)
        self.have_inventory = True
        self.inventory_complete = all(os.path.isdir(a.split("::")[0]) for a in config.args)
        if self.is_worker:
            config.workeroutput["sb_inventory"] = self.inventory
            config.workeroutput["sb_inventory_complete"] = self.inventory_complete
        opt = config.getoption
        globs, excl, sections, only = opt("clause"), opt("exclude_clause"), opt("section"), set(opt("only"))
        if (globs or excl or sections or only) and self.registry is not None:
            keep, drop = [], []
            for it in items:
                ids = self.inventory[it.nodeid]
                wanted = self.registry.select(ids, globs, excl, sections) and (not only or it.nodeid in only)
                (keep if wanted else drop).append(it)
            if drop:
                config.hook.pytest_deselected(items=drop)
                items[:] = keep
            if not keep:
                self.nothing_selected = True

    def pytest_collection_finish(self, session):
        if self.worker_mode:  # which root-cause tests run: only those can block others
            self.wctx.selected = {it.name.split("[")[0] for it in session.items}

    def pytest_collectreport(self, report):
        if report.failed:
            self.collection_errors.append({"where": report.nodeid or "(session)",
                                           "message": str(report.longrepr)})

    # -- xdist (controller side) ---------------------------------------------------------------
    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node):
        node.workerinput["sb_seed"] = self.seed
        node.workerinput["sb_token"] = self.token
        if self.worker_mode:
            node.workerinput["sb_worker_preflight"] = self.wctx.preflight
        elif self.preflight is not None:
            node.workerinput["sb_preflight"] = self.preflight.to_json()

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node, error):
        out = getattr(node, "workeroutput", None) or {}
        self.findings += out.get("sb_findings", [])
        if "sb_inventory" in out:
            self.inventory.update(out["sb_inventory"])
            self.inventory_complete = bool(out.get("sb_inventory_complete"))
            self.have_inventory = True

    # -- running -------------------------------------------------------------------------
    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item):
        context.begin_test(item.nodeid, self.item_clauses(item))

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_teardown(self, item, nextitem):
        yield
        context.end_test()

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item, call):
        outcome = yield
        rep = outcome.get_result()
        rep.sb_clauses = self.item_clauses(item)
        spec = getattr(item, "callspec", None)
        rep.sb_mode = spec.params.get("sb_mode") if spec is not None else None
        rep.sb_kind, rep.sb_message, rep.sb_clause, rep.sb_finding = None, "", None, None
        if call.excinfo is not None:
            exc = call.excinfo.value
            if rep.skipped:
                reason = getattr(exc, "msg", None) or str(exc)
                rep.sb_kind = next((k for k in ("unsupported", "blocked") if str(reason).startswith(k + ":")),
                                   "skip")
                rep.sb_message = str(reason)
            elif rep.failed:
                rep.sb_kind = exception_kind(exc)
                text = re.sub(r"^stdio_bus_conformance\.[a-z_]+\.", "", call.excinfo.exconly().strip())
                if isinstance(exc, ClauseFailure):  # its clause is shown beside it: the detail says the rest
                    text = exc.detail or text
                rep.sb_message = text if len(text) < 2000 else text[:2000] + "..."
                # the clause the failure is judged by: the check's, else the test's first
                rep.sb_clause = exc.clause if isinstance(exc, ClauseFailure) else \
                    (rep.sb_clauses[0] if rep.sb_clauses else None)
                if isinstance(exc, DaemonCrashed):
                    rep.sb_finding = "crash"
        if call.when == "teardown":
            rep.sb_findings = list(getattr(item, "_sb_findings", []))
        if rep.failed:
            item._sb_failed = True

    def pytest_runtest_logreport(self, report):
        if self.is_worker:
            return
        r = self.results.get(report.nodeid)
        if r is None:
            r = self.results[report.nodeid] = TestResult(
                report.nodeid, list(getattr(report, "sb_clauses", []) or []), getattr(report, "sb_mode", None))
        details = ""
        if report.failed:
            details = report.longreprtext
        r.phases[report.when] = Phase(report.when, report.outcome, getattr(report, "sb_kind", None),
                                      getattr(report, "sb_message", "") or "", details, report.duration,
                                      bool(getattr(report, "wasxfail", None)),
                                      getattr(report, "sb_clause", None), getattr(report, "sb_finding", None))
        for f in getattr(report, "sb_findings", None) or []:
            self.findings.append(f)
            r.findings.append(f)
        self._finish(r)

    def level_of(self, cid: str | None) -> str:
        return self.registry.level(cid) if self.registry is not None else "MUST"

    def _finish(self, r: TestResult):
        r.outcome, r.message, r.details, r.clause = classify(r, self.level_of, r.nodeid in self.baseline)
        d = self.artifact_dir(r.nodeid)
        r.artifact_dir = str(d) if d.is_dir() else None

    def pytest_report_teststatus(self, report, config):
        if not hasattr(report, "sb_kind") or report.when == "collect":
            return None
        if report.passed:
            return _CATEGORY["pass"] if report.when == "call" else None
        r = TestResult(report.nodeid, list(report.sb_clauses), report.sb_mode)
        r.phases[report.when] = Phase(report.when, report.outcome, report.sb_kind, report.sb_message,
                                      "", 0.0, bool(getattr(report, "wasxfail", None)))
        r.phases[report.when].clause = getattr(report, "sb_clause", None)
        r.phases[report.when].finding = getattr(report, "sb_finding", None)
        outcome = classify(r, self.level_of, report.nodeid in self.baseline)[0]
        return _CATEGORY[outcome]

    # -- the end ------------------------------------------------------------------------------
    def summary(self, session) -> reports.RunSummary:
        order = {n: i for i, n in enumerate(self.inventory)}
        self.results = dict(sorted(self.results.items(), key=lambda kv: (order.get(kv[0], len(order)), kv[0])))
        for r in self.results.values():
            self._finish(r)
        root_causes = reports.root_causes(self.preflight, self.results, self.findings, self.level_of)
        expected_items = set()
        for rc in root_causes:
            # a broken item of a MUST clause fails the run, unless the baseline expects it
            # ("preflight::<item>"), or it blocked nothing and the baseline expects the
            # failures of its clause's own tests
            listed = bl.PREFLIGHT + rc["item"] in self.baseline
            own = [r.outcome for r in self.results.values() if r.clause == rc["clause"]]
            expected_by_tests = bool(own) and all(o == "xfail" for o in own)
            rc["binding"] = rc["level"] in ("MUST", "MUST NOT") and not listed and \
                (rc["blocked"] > 0 or not expected_by_tests)
            if listed or (rc["blocked"] == 0 and expected_by_tests):
                expected_items.add(rc["item"])
        coverage = None
        if self.registry is not None and self.have_inventory:
            coverage = compute_coverage(self.registry, self.inventory, self.results,
                                        complete=self.inventory_complete, gate=self.gate_enabled,
                                        preflight=self.preflight, expected_items=expected_items)
        blocked = sum(1 for r in self.results.values() if r.outcome == "blocked"
                      and not any(r.message.startswith(f"blocked: {i}:") for i in expected_items))
        base = bl.report(self.baseline, self.results, set(self.inventory) if self.inventory_complete else None,
                         self.preflight)
        counts = reports.count(self.results)
        v = verdict(counts, collection_errors=len(self.collection_errors), fatal=self.fatal, stale=base["stale"],
                    gate_failures=coverage.gate_failures if coverage else [],
                    min_tests=self.config.getoption("min_tests"), nothing_selected=self.nothing_selected,
                    findings=self.findings, interrupted=self.interrupted,
                    broken=[rc for rc in root_causes if rc["binding"]], blocked=blocked,
                    strict=self.config.getoption("strict_should"))
        opt = self.config.getoption
        meta = {
            "suite": "stdio Bus conformance kit",
            **self.subject_meta(),
            # kit, kit_version, spec_version: which kit, judging which spec revision
            **kit_version.about(None if self.worker_mode else self.registry),
            "spec": str(self.registry.path) if self.registry else None,
            "clauses": len(self.registry.clauses) if self.registry else 0,
            "seed": self.seed,
            "started_at": datetime.datetime.fromtimestamp(self.started).astimezone()
            .isoformat(timespec="seconds"),
            "duration": round(time.monotonic() - self.t0, 3),
            "report_dir": self.report_dir,
            "selection": {"clause": opt("clause"), "exclude_clause": opt("exclude_clause"),
                          "section": opt("section"), "keyword": opt("keyword") or None,
                          "only": opt("only")},
        }
        levels = {c.id: c.level for c in self.registry} if self.registry else {}
        return reports.RunSummary(meta, self.results, counts, coverage, v, levels, base,
                                  self.collection_errors, self.fatal, self.worker_subject(),
                                  findings=self.findings, preflight=self.preflight, root_causes=root_causes)

    def subject_meta(self) -> dict:
        """daemon/profile/mock_worker of results.json. A worker run keeps the
        same members (the schema is shared): `daemon` is the implementation
        under test, the worker's command line; `profile` its description and
        the profiles it is judged on."""
        if not self.worker_mode:
            return {"daemon": self.ctx.daemon,
                    "profile": self.ctx.profile.path or f"(built-in {self.ctx.profile.name})",
                    "mock_worker": self.ctx.mock_worker}
        d = self.wctx.desc
        return {"daemon": d.command_line(),
                "profile": f"{d.path or '(command line)'}; worker profiles {', '.join(d.claims) or 'none'}"
                           + (f"; MCP {d.mcp_version}" if "mcp" in d.claims else ""),
                "mock_worker": "(none: worker mode)"}

    def worker_subject(self) -> dict | None:
        if not self.worker_mode:
            return None
        d = self.wctx.desc
        return {"name": d.name, "command": d.command_line(), "description": d.path, "claims": d.claims,
                "env": d.env, "answer_timeout": self.wctx.timeout, "drain_timeout": d.drain_timeout,
                "mcp_version": d.mcp_version if "mcp" in d.claims else None,
                "tool_call": d.tool_call_note, "root_causes": self.wctx.preflight.get("findings", [])}

    def sweep_marked(self) -> list[dict]:
        """End of run: kills every process still carrying the run's mark
        (anything that escaped the per-test teardown); each is a leak."""
        if self.worker_mode:
            return []
        # an xdist worker sweeps its own processes only: the others may still run tests
        left = contain.kill_marked(self.ctx.token if self.is_worker else self.token)
        return [{"kind": "leak", "test": "(end of run)", "clause": "SB-10.2-4",
                 "detail": f"pid {p['pid']} ({p['cmdline'][:80]}) was still running at the end of the run "
                           f"(killed)"} for p in left]

    def pytest_keyboard_interrupt(self, excinfo):
        self.interrupted = True

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session, exitstatus):
        if self.is_worker:
            self.config.workeroutput["sb_findings"] = self.sweep_marked()
            return
        if exitstatus == pytest.ExitCode.INTERRUPTED or session.shouldstop:
            # Ctrl-C, or xdist stopping: what did not finish is unfinished, and the run exits 2
            self.interrupted = self.interrupted or exitstatus == pytest.ExitCode.INTERRUPTED
        self.findings += self.sweep_marked()
        s = self.summary(session)
        self.final = s
        if self.config.option.collectonly:
            # run.py --coverage: collection errors, fatal errors and the gate count
            broken = s.fatal or s.collection_errors
            if self.config.getoption("coverage_only"):
                broken = broken or s.coverage is None or s.coverage.gate_failures
            if broken:
                session.exitstatus = 2
            elif self.config.getoption("coverage_only"):
                session.exitstatus = 0
            return
        strict = self.config.getoption("strict_should")
        ub = self.config.getoption("update_baseline")
        if ub:
            try:
                s.baseline["update"] = bl.update(ub, s.meta["daemon"], self.results,
                                                 set(self.inventory) if self.inventory_complete else None,
                                                 self.preflight, s.root_causes, strict)
            except (HarnessError, OSError) as exc:  # the file is left as it was
                s.fatal.append(f"--update-baseline: {exc}")
                s.verdict = Verdict(EXIT_HARNESS, [s.fatal[-1]] + s.verdict.reasons)
        self.paths = reports.write_all(self.report_dir, s)
        wb = self.config.getoption("write_baseline")
        if wb:
            self.baseline_written = (wb, bl.write(wb, s.meta["daemon"], self.results, self.baseline,
                                                  s.root_causes, strict))
        session.exitstatus = s.verdict.exit_code

    def pytest_terminal_summary(self, terminalreporter, exitstatus, config):
        if self.is_worker or not hasattr(self, "final"):
            return
        s, tr = self.final, terminalreporter
        if config.option.collectonly and not config.getoption("coverage_only"):
            return
        for key, title in (("warn", "WARNINGS (SHOULD-level clauses not met)"),
                           ("harness-error", "HARNESS ERRORS (the suite's fault, not the daemon's)")):
            reps = [r for r in tr.stats.get(key, []) if getattr(r, "longrepr", None)]
            if reps:
                tr.write_sep("=", title)
                for rep in reps:
                    tr.write_sep("_", f"{rep.nodeid} ({rep.when})")
                    tr._outrep_summary(rep)
        tr.write_sep("=", reports.kit_line(s.meta))
        for msg in s.fatal:
            tr.write_line(f"harness error: {msg}", red=True)
        for f in (s.worker or {}).get("root_causes", []):  # worker preflight
            tr.write_line(f"root cause: {f['summary']} ({f['clause']}, {f['test']}); the tests "
                          "that stand on it are blocked", red=True)
        for e in s.collection_errors:
            tr.write_line(f"collection error in {e['where']}:", red=True)
            for line in e["message"].splitlines()[:20]:
                tr.write_line(f"    {line}")
        for line in reports.root_cause_lines(s):
            tr.write_line(line, red=line.startswith("  "))
        for line in reports.coverage_lines(s.coverage):
            tr.write_line(line)
        for line in reports.clause_failure_lines(s):
            tr.write_line(line, red=line.startswith("  FAIL"), yellow=line.startswith("  WARN"))
        for line in reports.finding_lines(s):
            tr.write_line(line)
        for line in bl.lines(s.baseline):
            tr.write_line(line, red=line.startswith(("stale", "new failure")))
        for r in s.results.values():
            if r.artifact_dir:
                tr.write_line(f"reproducer for {r.nodeid}: {r.artifact_dir}")
        if hasattr(self, "paths"):
            tr.write_line(f"reports: {os.path.dirname(self.paths['results.json'])}/"
                          "{results.json,junit.xml,report.md}")
        if hasattr(self, "baseline_written"):
            tr.write_line(f"baseline written: {self.baseline_written[0]} "
                          f"({self.baseline_written[1]} expected failures)")
        if not config.option.collectonly:
            tr.write_line(f"{summary_line(s.counts)}: exit {s.verdict.exit_code}" +
                          (" (" + "; ".join(s.verdict.reasons) + ")" if s.verdict.reasons else ""))
            for line in reports.verdict_lines(s):
                tr.write_line(line, bold=True)
