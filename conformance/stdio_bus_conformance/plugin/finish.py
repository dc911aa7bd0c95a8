"""The end of the run, in the controlling process: what the run gathered,
as plain data (RunFacts), summarized into one RunSummary (reports/summary.py:
summarize), the reports written from it, the exit status, and the console's
closing lines."""

from __future__ import annotations

import datetime
import os
import time

import pytest

from ..common.errors import HarnessError
from ..reports import baseline as bl
from ..reports import console
from ..reports import summary as run_summary
from ..reports.outcomes import EXIT_HARNESS, MIN_JUDGED, Verdict, summary_line
from ..reports.render import write_all
from ..reports.words import kit_line
from ..spec import version as kit_version


class Finish:
    """The run's verdict and reports, at its end (one of the run's plugins,
    keys.FINISH). It reads what the other roles gathered and writes only
    its own: the RunSummary and the reports."""

    def __init__(self, run, subjects, selection, results):
        self.run = run
        self.subjects, self.selection, self.results = subjects, selection, results
        self.final: run_summary.RunSummary | None = None   # once the verdict is in (run.py reads it)
        self.paths: dict | None = None             # the reports written
        self.baseline_written: tuple | None = None  # (file, entries) of --write-baseline

    def gate_interpretations(self) -> bool:
        """Whether failures of our interpretations (SB-I) fail the run:
        --strict, or the profile says so (ours does)."""
        if self.run.config.getoption("strict_should"):
            return True
        ctx = self.subjects.ctx
        return True if self.run.worker_mode or ctx is None else ctx.profile.gate_interpretations

    def facts(self, results: dict, findings: list, interrupted: bool) -> run_summary.RunFacts:
        """What this run gathered, as plain data for run_summary.summarize."""
        opt = self.run.config.getoption
        gate_i = self.gate_interpretations()
        meta = {
            "suite": "stdio Bus conformance kit",
            **self.subjects.subject_meta(),
            # kit, kit_version, spec_version: which kit, judging which spec revision
            **kit_version.about(None if self.run.worker_mode else self.run.registry),
            "spec": str(self.run.registry.path) if self.run.registry else None,
            "clauses": len(self.run.registry.clauses) if self.run.registry else 0,
            "seed": self.run.seed,
            "started_at": datetime.datetime.fromtimestamp(self.run.started).astimezone()
            .isoformat(timespec="seconds"),
            "duration": round(time.monotonic() - self.run.t0, 3),
            "report_dir": self.run.report_dir,
            "selection": {"clause": opt("clause"), "exclude_clause": opt("exclude_clause"),
                          "section": opt("section"), "keyword": opt("keyword") or None,
                          "only": opt("only")},
        }
        return run_summary.RunFacts(
            results=results, registry=self.run.registry, inventory=self.selection.inventory,
            inventory_complete=self.selection.inventory_complete, have_inventory=self.selection.have_inventory,
            findings=findings, preflight=self.subjects.preflight, baseline=self.run.baseline,
            collection_errors=self.selection.collection_errors, fatal=self.run.fatal + self.subjects.fatal,
            nothing_selected=self.selection.nothing_selected, interrupted=interrupted,
            gate_enabled=self.run.gate_enabled, gate_interpretations=gate_i,
            gate_why="--strict" if opt("strict_should") else ("profile" if gate_i else "default: reported, not gated"),
            strict=opt("strict_should"), min_tests=opt("min_tests"),
            min_judged=MIN_JUDGED if opt("min_judged") is None else opt("min_judged"),
            bite_map=opt("bite_map"), bite_results=opt("bite_results") or "",
            meta=meta, worker=self.subjects.worker_subject())

    def summary(self, session, findings: list, interrupted: bool) -> run_summary.RunSummary:
        results = self.results.in_run_order(self.selection.inventory)
        return run_summary.summarize(self.facts(results, findings, interrupted))

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session, exitstatus):
        if self.run.is_worker:
            self.run.config.workeroutput["sb_findings"] = self.subjects.sweep_marked()
            return
        # Ctrl-C (pytest_keyboard_interrupt, or this exit status): what did not finish is unfinished, exit 2
        interrupted = self.results.interrupted or exitstatus == pytest.ExitCode.INTERRUPTED
        findings = self.results.findings + self.subjects.sweep_marked()  # a leak swept at the end is one too
        s = self.summary(session, findings, interrupted)
        self.final = s
        if self.run.config.option.collectonly:
            # run.py --coverage: collection errors, fatal errors and the gate count
            broken = s.fatal or s.collection_errors
            if self.run.config.getoption("coverage_only"):
                broken = broken or s.coverage is None or s.coverage.gate_failures
            if broken:
                session.exitstatus = 2
            elif self.run.config.getoption("coverage_only"):
                session.exitstatus = 0
            return
        strict = self.run.config.getoption("strict_should")
        ub = self.run.config.getoption("update_baseline")
        if ub:
            try:
                s.baseline["update"] = bl.update(ub, s.meta["daemon"], s.results,
                                                 set(self.selection.inventory)
                                                 if self.selection.inventory_complete else None,
                                                 self.subjects.preflight, s.root_causes, strict)
            except (HarnessError, OSError) as exc:  # the file is left as it was
                s.fatal.append(f"--update-baseline: {exc}")
                s.verdict = Verdict(EXIT_HARNESS, [s.fatal[-1]] + s.verdict.reasons, s.verdict.notes)
        self.paths = write_all(self.run.report_dir, s)
        wb = self.run.config.getoption("write_baseline")
        if wb:
            self.baseline_written = (wb, bl.write(wb, s.meta["daemon"], s.results, self.run.baseline,
                                                  s.root_causes, strict))
        session.exitstatus = s.verdict.exit_code

    def pytest_terminal_summary(self, terminalreporter, exitstatus, config):
        if self.run.is_worker or self.final is None:
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
        tr.write_sep("=", kit_line(s.meta))
        for msg in s.fatal:
            tr.write_line(f"harness error: {msg}", red=True)
        for f in (s.worker or {}).get("root_causes", []):  # worker preflight
            if f.get("environment"):  # what this environment lacks: once, on its own line, no failure
                n = sum(1 for r in s.results.values() if r.outcome == "blocked"
                        and r.message.startswith(f"{run_summary.ENV_BLOCKED} {f['summary']}"))
                tr.write_line(f"blocked: {f['summary']} ({n} test(s) not judged)", yellow=True)
                continue
            tr.write_line(f"root cause: {f['summary']} ({f['clause']}, {f['test']}); the tests "
                          "that stand on it are blocked", red=True)
        for e in s.collection_errors:
            tr.write_line(f"collection error in {e['where']}:", red=True)
            for line in e["message"].splitlines()[:20]:
                tr.write_line(f"    {line}")
        for line in console.root_cause_lines(s):
            tr.write_line(line, red=line.startswith("  "))
        for line in console.coverage_lines(s.coverage):
            tr.write_line(line)
        for line in console.clause_failure_lines(s):
            tr.write_line(line, red=line.startswith("  FAIL"), yellow=line.startswith("  WARN"))
        for line in console.finding_lines(s):
            tr.write_line(line)
        for line in bl.lines(s.baseline):
            tr.write_line(line, red=line.startswith(("stale", "new failure")))
        for r in s.results.values():
            if r.artifact_dir:
                tr.write_line(f"reproducer for {r.nodeid}: {r.artifact_dir}")
        if self.paths is not None:
            tr.write_line(f"reports: {os.path.dirname(self.paths['results.json'])}/"
                          "{report.html,report.md,results.json,junit.xml}")
        if self.baseline_written is not None:
            tr.write_line(f"baseline written: {self.baseline_written[0]} "
                          f"({self.baseline_written[1]} expected failures)")
        if not config.option.collectonly:
            tr.write_line(f"{summary_line(s.counts)}: exit {s.verdict.exit_code}" +
                          (" (" + "; ".join(s.verdict.reasons) + ")" if s.verdict.reasons else ""))
            for note in s.verdict.notes:
                tr.write_line(f"note: {note}", yellow=True)
            tr.write_line(s.judged.line(s.min_judged) + ("" if s.judged.whole else " (a selection: not gated)"),
                          yellow=s.judged.too_few(s.min_judged))
            for line in console.verdict_lines(s):
                tr.write_line(line, bold=True)
