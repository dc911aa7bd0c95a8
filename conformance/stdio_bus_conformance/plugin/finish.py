"""The end of the run, in the controlling process: the results, root causes,
coverage, baseline and verdict gathered into one RunSummary, the reports
written from it, the exit status, and the console's closing lines."""

from __future__ import annotations

import datetime
import os
import re
import time

import pytest

from ..reports import baseline as bl
from ..reports import bite
from ..reports import render as reports
from ..reports.coverage import compute as compute_coverage
from ..common.errors import HarnessError
from ..reports.outcomes import EXIT_HARNESS, Verdict, gates, summary_line, ungated_failures, verdict
from ..spec.judge import tier
from ..spec import version as kit_version


class Finish:
    """State's end of the run (a base of State)."""

    def gate_interpretations(self) -> bool:
        """Whether failures of our interpretations (SB-I) fail the run:
        --strict, or the profile says so (ours does)."""
        if self.config.getoption("strict_should"):
            return True
        ctx = getattr(self, "ctx", None)
        return True if self.worker_mode or ctx is None else ctx.profile.gate_interpretations

    def summary(self, session) -> reports.RunSummary:
        order = {n: i for i, n in enumerate(self.inventory)}
        self.results = dict(sorted(self.results.items(), key=lambda kv: (order.get(kv[0], len(order)), kv[0])))
        gate_i = self.gate_interpretations()
        for r in self.results.values():
            self._finish(r)
            r.gated = r.outcome != "fail" or gates(tier(r.clause) if r.clause else None, gate_interpretations=gate_i)
        ungated = ungated_failures(((r.outcome, tier(r.clause) if r.clause else None)
                                    for r in self.results.values()), gate_interpretations=gate_i)
        root_causes = reports.root_causes(self.preflight, self.results, self.findings, self.level_of)
        expected_items = set()
        for rc in root_causes:
            # a broken item of a MUST clause fails the run, unless the baseline expects it
            # ("preflight::<item>"), or it blocked nothing and the baseline expects the
            # failures of its clause's own tests
            listed = bl.PREFLIGHT + rc["item"] in self.baseline
            own = [r.outcome for r in self.results.values() if r.clause == rc["clause"]]
            expected_by_tests = bool(own) and all(o == "xfail" for o in own)
            # an item of an interpretation that does not gate (the seed is silent there) is
            # reported, and the tests it blocked count as not judged, not as a failure
            gated = gates(rc["tier"], gate_interpretations=gate_i)
            rc["binding"] = rc["level"] in ("MUST", "MUST NOT") and not listed and gated and \
                (rc["blocked"] > 0 or not expected_by_tests)
            if listed or not gated or (rc["blocked"] == 0 and expected_by_tests):
                expected_items.add(rc["item"])
        coverage = None
        if self.registry is not None and self.have_inventory:
            coverage = compute_coverage(self.registry, self.inventory, self.results,
                                        complete=self.inventory_complete, gate=self.gate_enabled,
                                        preflight=self.preflight, expected_items=expected_items)
            if self.config.getoption("bite_map"):
                bite.attach(coverage, self.config.getoption("bite_map"), self.config.getoption("bite_results") or "")
        # worker mode: a root cause is named by a test; when the baseline expects that test's
        # failure, the tests it blocked are not judged, and fail nothing (as "preflight::<item>")
        expected_tests = {n.split("::")[-1].split("[")[0] for n, r in self.results.items() if r.outcome == "xfail"}
        blocked = sum(1 for r in self.results.values() if r.outcome == "blocked"
                      and not any(r.message.startswith(f"blocked: {i}:") for i in expected_items)
                      and not _named_by(r.message, expected_tests))
        base = bl.report(self.baseline, self.results, set(self.inventory) if self.inventory_complete else None,
                         self.preflight)
        counts = reports.count(self.results)
        v = verdict(counts, collection_errors=len(self.collection_errors), fatal=self.fatal, stale=base["stale"],
                    gate_failures=coverage.gate_failures if coverage else [],
                    min_tests=self.config.getoption("min_tests"), nothing_selected=self.nothing_selected,
                    findings=self.findings, interrupted=self.interrupted,
                    broken=[rc for rc in root_causes if rc["binding"]], blocked=blocked,
                    strict=self.config.getoption("strict_should"), ungated=ungated)
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
            # whether failures of our interpretations decide the exit status, and why
            "gate": {"interpretations": gate_i,
                     "why": "--strict" if self.config.getoption("strict_should") else
                     ("profile" if gate_i else "default: reported, not gated")},
            "report_dir": self.report_dir,
            "selection": {"clause": opt("clause"), "exclude_clause": opt("exclude_clause"),
                          "section": opt("section"), "keyword": opt("keyword") or None,
                          "only": opt("only")},
        }
        levels = {c.id: c.level for c in self.registry} if self.registry else {}
        return reports.RunSummary(meta, self.results, counts, coverage, v, levels, base,
                                  self.collection_errors, self.fatal, self.worker_subject(),
                                  findings=self.findings, preflight=self.preflight, root_causes=root_causes)

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
                s.verdict = Verdict(EXIT_HARNESS, [s.fatal[-1]] + s.verdict.reasons, s.verdict.notes)
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
            for note in s.verdict.notes:
                tr.write_line(f"note: {note}", yellow=True)
            for line in reports.verdict_lines(s):
                tr.write_line(line, bold=True)


_NAMED_BY = re.compile(r"\(root cause, named by \S+ in (\w+)\)")


def _named_by(message: str, tests: set) -> bool:
    """Whether a worker-mode `blocked:` message names its root cause's test
    among `tests` (WorkerRun.blocked_by writes "... (root cause, named by
    <clause> in <test>)")."""
    m = _NAMED_BY.search(message or "")
    return m is not None and m.group(1) in tests
