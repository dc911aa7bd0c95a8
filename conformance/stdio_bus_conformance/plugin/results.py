"""Each test's outcome: the clause a failure is judged by (makereport, in the
process that ran the test), the phases gathered into a TestResult and
classified (logreport, in the controlling process), the console letter, and
what xdist workers send back at their end."""

from __future__ import annotations

import re

import pytest

from ..common import context
from ..common.errors import DaemonCrashed
from ..reports.outcomes import Phase, TestResult, classify, exception_kind
from ..spec.judge import ClauseFailure
from . import keys
from .selection import item_clauses

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


class Results:
    """The outcome of each test (one of the run's plugins, keys.RESULTS): the
    only writer of the results, the findings and whether the run was
    interrupted."""

    def __init__(self, run, artifacts):
        self.run = run
        self.artifacts = artifacts   # where a test's reproducer is
        self.results: dict[str, TestResult] = {}
        self.findings: list[dict] = []
        self.interrupted = False     # Ctrl-C (or SIGTERM, common/interrupt.py)

    # -- xdist (controller side) ---------------------------------------------------------------
    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node, error):
        out = getattr(node, "workeroutput", None) or {}
        self.findings += out.get("sb_findings", [])

    # -- running -------------------------------------------------------------------------
    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item):
        context.begin_test(item.nodeid, item_clauses(item))

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_teardown(self, item, nextitem):
        yield
        context.end_test()

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item, call):
        outcome = yield
        rep = outcome.get_result()
        rep.sb_clauses = item_clauses(item)
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
                text = re.sub(r"^stdio_bus_conformance\.(?:[a-z_]+\.)+", "", call.excinfo.exconly().strip())
                if isinstance(exc, ClauseFailure):  # its clause is shown beside it: the detail says the rest
                    text = exc.detail or text
                rep.sb_message = text if len(text) < 2000 else text[:2000] + "..."
                # the clause the failure is judged by: the check's, else the test's first
                rep.sb_clause = exc.clause if isinstance(exc, ClauseFailure) else \
                    (rep.sb_clauses[0] if rep.sb_clauses else None)
                if isinstance(exc, DaemonCrashed):
                    rep.sb_finding = "crash"
        if call.when == "teardown":
            rep.sb_findings = list(item.stash.get(keys.FINDINGS, []))
        if rep.failed:
            item.stash[keys.FAILED] = True

    def pytest_runtest_logreport(self, report):
        if self.run.is_worker:
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
        self.finish_result(r)

    def level_of(self, cid: str | None) -> str:
        return self.run.registry.level(cid) if self.run.registry is not None else "MUST"

    def in_run_order(self, inventory: dict) -> dict:
        """The end of the run: the results in collection order (the
        inventory's; any other after them, by node id), each classified
        again now that its reproducer is written."""
        order = {n: i for i, n in enumerate(inventory)}
        self.results = dict(sorted(self.results.items(), key=lambda kv: (order.get(kv[0], len(order)), kv[0])))
        for r in self.results.values():
            self.finish_result(r)
        return self.results

    def finish_result(self, r: TestResult):
        r.outcome, r.message, r.details, r.clause = classify(r, self.level_of, r.nodeid in self.run.baseline)
        d = self.artifacts.artifact_dir(r.nodeid)
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
        outcome = classify(r, self.level_of, report.nodeid in self.run.baseline)[0]
        return _CATEGORY[outcome]

    def pytest_keyboard_interrupt(self, excinfo):
        self.interrupted = True
