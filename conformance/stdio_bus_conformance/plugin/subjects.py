"""What the run judges, set up once per process: the daemon (its path,
profile, mock worker and preflight) or the worker (its description and
preflight); the seed and token xdist workers share; the end-of-run sweep of
what the daemon left running."""

from __future__ import annotations

import os

import pytest

from ..common import context
from ..common.errors import HarnessError
from ..common.pace import Pace
from ..daemon import contain
from ..daemon.bus import RunContext
from ..daemon.items import Results as PreflightResults
from ..daemon.preflight import paced
from ..daemon.preflight import run as run_preflight
from ..daemon.preflight import summary_lines as preflight_lines
from ..daemon.profile import load_profile
from ..spec.registry import CONFORMANCE_DIR
from ..worker.description import from_options
from ..worker.description import problems as worker_problems
from ..worker.run import WorkerContext


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


class Subjects:
    """The subject under test, set up once per process (one of the run's
    plugins, keys.SUBJECTS): the daemon's context, or the worker's, and the
    preflight's results."""

    def __init__(self, run):
        self.run = run
        self.fatal: list[str] = []   # the subject cannot be judged (besides the Run's own fatal errors)
        self.ctx: RunContext | None = None        # daemon mode
        self.wctx: WorkerContext | None = None    # worker mode
        # an xdist worker of a daemon run gets the controller's preflight (pytest_configure_node)
        self.preflight = PreflightResults.from_json(run.config.workerinput.get("sb_preflight")) \
            if run.is_worker and not run.worker_mode else None
        if run.worker_mode:
            self._init_worker()
        else:
            self._init_daemon()

    def _init_worker(self):
        opt = self.run.config.getoption
        try:
            desc = from_options(opt("worker"), opt("worker_profile"), opt("worker_env"),
                                opt("worker_description"), opt("mcp_version"))
        except HarnessError as exc:
            self.fatal.append(str(exc))
            desc = from_options(None, [], [], None)
        if not self.run.config.option.collectonly:  # --coverage needs no worker
            self.fatal += worker_problems(desc)
        self.wctx = WorkerContext(desc=desc, seed=self.run.seed,
                                  timeout=desc.answer_timeout or opt("wait_timeout") or context.DEFAULT_WAIT)
        if self.run.is_worker:  # the controller ran the preflight (pytest_sessionstart)
            self._use_worker_preflight(self.run.config.workerinput.get("sb_worker_preflight") or {})

    # -- worker preflight (worker/preflight.py): once per run, before the tests ----------------
    def _worker_sessionstart(self):
        if self.run.is_worker or self.run.fatal or self.fatal or self.run.config.option.collectonly:
            return
        from ..worker import preflight as worker_preflight
        try:
            # a deadline the run was given (--wait-timeout, the description's answer_timeout)
            fixed = self.run.config.getoption("wait_timeout") or self.wctx.desc.answer_timeout
            result = worker_preflight.run(self.wctx.desc, self.wctx.timeout, fixed)
        except HarnessError as exc:
            self.fatal.append(f"worker preflight: {exc}")
            return
        os.makedirs(self.run.report_dir, exist_ok=True)
        with open(os.path.join(self.run.report_dir, "preflight.txt"), "w", encoding="utf-8") as f:
            f.write(result.pop("transcript", ""))
        self._use_worker_preflight(result)

    def _use_worker_preflight(self, result: dict) -> None:
        self.wctx.preflight = result
        # the worker's pace (common/pace.py): a fresh worker's first answer, and one after it;
        # a deadline the run was given (--wait-timeout, the description's answer_timeout) stays
        pace = Pace.from_json(result.get("pace"))
        context.state.pace = pace
        if not (self.run.config.getoption("wait_timeout") or self.wctx.desc.answer_timeout):
            self.wctx.timeout = pace.bound("answer", self.wctx.timeout)
        self.wctx.first_timeout = pace.bound("initialize", self.wctx.timeout)
        desc = self.wctx.desc
        if desc.tool_call is None and result.get("tool_call"):
            desc.tool_call = result["tool_call"]
        if result.get("tool_note"):
            desc.tool_call_note = result["tool_note"]

    def _init_daemon(self):
        opt = self.run.config.getoption
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
        self.ctx = RunContext(daemon=daemon, profile=profile, mock_worker=mock, seed=self.run.seed,
                              timeout=opt("wait_timeout") or context.DEFAULT_WAIT,
                              fixed_wait=opt("wait_timeout") is not None,
                              token=f"{self.run.token}/{os.getpid()}")
        self._use_preflight(self.preflight)

    def _use_preflight(self, res) -> None:
        """Tests see the preflight through ctx; a daemon that does not exit on
        SIGTERM is killed at once at teardown instead of after shutdown_timeout."""
        self.preflight = res
        if self.ctx is None:
            return
        if res is not None:  # every wait from here on at the daemon's measured pace
            self.ctx = paced(self.ctx, res.pace)
            context.state.wait, context.state.pace = self.ctx.timeout, res.pace
        self.ctx.preflight = res
        term = res.items.get("sigterm") if res is not None else None
        if term is not None and term.status == "broken" and "did not exit" in term.message:
            self.ctx.term_grace = 0.2

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionstart(self, session):
        """The preflight, once per run, before the tests (and before xdist
        starts its workers, which receive its results): of the worker in
        worker mode, else of the daemon."""
        if self.run.worker_mode:
            self._worker_sessionstart()
            return
        opt = self.run.config.getoption
        if (self.run.is_worker or self.run.fatal or self.fatal or self.run.config.option.collectonly
                or opt("no_preflight") or self.preflight is not None):
            return
        if not (self.ctx.mock_worker and os.path.isfile(self.ctx.mock_worker)):
            return  # no mock worker: every test is a harness error anyway
        res = run_preflight(self.ctx)
        self._use_preflight(res)
        tr = self.run.config.pluginmanager.get_plugin("terminalreporter")
        for line in preflight_lines(res):
            if tr is not None:
                tr.write_line(line, red=line.startswith("  BROKEN"))

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, session, config, items):
        """Each test's own time limit (pytest-timeout) grows with its waits:
        a slow daemon (the preflight's pace) gets as many times the limit as
        its waits got times the run's floor."""
        if self.wctx is not None:  # worker mode: each fresh worker's start-up on top
            scale, extra = self.wctx.timeout / context.DEFAULT_WAIT, 4 * self.wctx.first_timeout
        elif self.ctx is not None and not self.ctx.fixed_wait:
            scale, extra = self.ctx.timeout / context.DEFAULT_WAIT, 0.0
        else:
            return
        if scale <= 1.0 and extra <= 0:
            return
        default = config.getoption("timeout", None) or float(config.getini("timeout") or 0)
        for item in items:
            mark = item.get_closest_marker("timeout")
            limit = mark.args[0] if mark is not None and mark.args else default
            if limit:
                item.add_marker(pytest.mark.timeout(limit * max(1.0, scale) + extra), append=False)

    def pytest_collection_finish(self, session):
        if self.run.worker_mode:  # which root-cause tests run: only those can block others
            self.wctx.selected = {it.name.split("[")[0] for it in session.items}

    # -- xdist (controller side) ---------------------------------------------------------------
    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node):
        node.workerinput["sb_seed"] = self.run.seed
        node.workerinput["sb_token"] = self.run.token
        if self.run.worker_mode:
            node.workerinput["sb_worker_preflight"] = self.wctx.preflight
        elif self.preflight is not None:
            node.workerinput["sb_preflight"] = self.preflight.to_json()

    def sweep_marked(self) -> list[dict]:
        """End of run: kills every process still carrying the run's mark
        (anything that escaped the per-test teardown); each is a leak."""
        if self.run.worker_mode:
            return []
        # an xdist worker sweeps its own processes only: the others may still run tests
        left = contain.kill_marked(self.ctx.token if self.run.is_worker else self.run.token)
        return [{"kind": "leak", "test": "(end of run)", "clause": "SB-10.2-4",
                 "detail": f"pid {p['pid']} ({p['cmdline'][:80]}) was still running at the end of the run "
                           f"(killed)"} for p in left]

    def subject_meta(self) -> dict:
        """daemon/profile/mock_worker of results.json. A worker run keeps the
        same members (the schema is shared): `daemon` is the implementation
        under test, the worker's command line; `profile` its description and
        the profiles it is judged on."""
        if not self.run.worker_mode:
            return {"daemon": self.ctx.daemon,
                    "profile": self.ctx.profile.path or f"(built-in {self.ctx.profile.name})",
                    "mock_worker": self.ctx.mock_worker}
        d = self.wctx.desc
        return {"daemon": d.command_line(),
                "profile": f"{d.path or '(command line)'}; worker profiles {', '.join(d.claims) or 'none'}"
                           + (f"; MCP {d.mcp_version}" if "mcp" in d.claims else ""),
                "mock_worker": "(none: worker mode)"}

    def worker_subject(self) -> dict | None:
        if not self.run.worker_mode:
            return None
        d = self.wctx.desc
        return {"name": d.name, "command": d.command_line(), "description": d.path, "claims": d.claims,
                "env": d.env, "answer_timeout": self.wctx.timeout, "drain_timeout": d.drain_timeout,
                "mcp_version": d.mcp_version if "mcp" in d.claims else None,
                "tool_call": d.tool_call_note, "root_causes": self.wctx.preflight.get("findings", [])}
