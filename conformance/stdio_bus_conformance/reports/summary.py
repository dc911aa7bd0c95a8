"""What a run concludes, as one RunSummary every report is written from:
the results, counts, root causes, coverage and verdict."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from . import baseline as bl
from . import bite
from .coverage import Coverage
from .coverage import compute as compute_coverage
from ..spec.judge import tier
from .coverage import JUDGED as JUDGED_CLAUSE
from .outcomes import MIN_JUDGED, OUTCOMES, Judged, Verdict, gates, ungated_failures, verdict
from .words import MANDATORY


@dataclass
class RunSummary:
    meta: dict
    results: dict                   # nodeid -> TestResult, in run order
    counts: dict
    coverage: Coverage | None
    verdict: Verdict
    levels: dict = field(default_factory=dict)        # clause id -> level
    baseline: dict = field(default_factory=dict)
    collection_errors: list = field(default_factory=list)  # [{"where", "message"}]
    fatal: list = field(default_factory=list)
    worker: dict | None = None      # worker mode: name, command, description, claims, env, timeouts
    findings: list = field(default_factory=list)  # [{"kind", "test", "detail", "clause"}]
    preflight: object = None        # preflight.Results
    root_causes: list = field(default_factory=list)
    repeat: dict | None = None      # --repeat: {"n", "tests": [{"test", "outcomes", "verdict"}]}
    judged: Judged = field(default_factory=Judged)   # MUST clauses judged, of those that apply
    min_judged: float | None = MIN_JUDGED

    def repeated(self, nodeid: str) -> dict | None:
        return next((t for t in (self.repeat or {}).get("tests", []) if t["test"] == nodeid), None)


def root_causes(preflight, results: dict, findings: list, level_of) -> list[dict]:
    """One entry per broken preflight item: its clause, tier and level, what
    is broken, and how many tests it blocked and findings it explains."""
    if preflight is None:
        return []
    out = []
    for r in preflight.items.values():
        if r.status != "broken":
            continue
        blocked = [n for n, t in results.items() if t.outcome == "blocked"
                   and t.message.startswith(f"blocked: {r.name}:")]
        explained = [f for f in findings if f.get("root_cause") == r.name]
        out.append({"item": r.name, "clause": r.clause, "tier": tier(r.clause), "level": level_of(r.clause),
                    "mode": r.mode, "message": r.message, "blocked": len(blocked),
                    "blocked_tests": blocked[:50], "findings": len(explained)})
    out.sort(key=lambda rc: (rc["level"] not in MANDATORY, -rc["blocked"], rc["item"]))
    return out


def count(results: dict) -> dict:
    counts = {o: 0 for o in OUTCOMES}
    for r in results.values():
        counts[r.outcome] += 1
    counts["total"] = len(results)
    return counts


@dataclass
class RunFacts:
    """What the plugin gathered during a run, as plain data: everything the
    verdict and the reports are computed from (summarize), so that they can
    be computed, and tested, without pytest."""
    results: dict                   # nodeid -> TestResult, classified (outcome, clause), in run order
    registry: object = None         # spec.registry.Registry, None when SPEC.md could not be read
    inventory: dict = field(default_factory=dict)   # nodeid -> cited clause ids, every collected test
    inventory_complete: bool = False   # the whole suite was collected (the coverage gate applies)
    have_inventory: bool = False
    findings: list = field(default_factory=list)
    preflight: object = None        # daemon.items.Results, when the preflight ran
    baseline: dict = field(default_factory=bl.empty)
    collection_errors: list = field(default_factory=list)
    fatal: list = field(default_factory=list)
    nothing_selected: bool = False
    interrupted: bool = False
    gate_enabled: bool = True       # the coverage gate (--no-coverage-gate turns it off)
    gate_interpretations: bool = True
    gate_why: str = "profile"
    strict: bool = False            # SHOULD failures fail the run too
    min_tests: int = 0
    min_judged: float | None = MIN_JUDGED   # --min-judged: the share of MUST clauses a whole run judges
    bite_map: str | None = None
    bite_results: str = ""
    meta: dict = field(default_factory=dict)   # the subject, seed, times, selection (results.json meta)
    worker: dict | None = None      # worker mode: the worker's description


def judged_musts(coverage: Coverage | None, whole: bool) -> Judged:
    """Of the MUST clauses some test cites, those that apply to the subject
    (not every test of theirs unsupported: another profile's, or a mode or
    feature the subject does not claim), and how many of them were judged."""
    if coverage is None:
        return Judged(whole=whole)
    apply = [c for c in coverage.clauses if c.level in MANDATORY and c.status == "tested"
             and c.outcome not in ("unsupported", "not run")]
    return Judged(sum(1 for c in apply if c.outcome in JUDGED_CLAUSE), len(apply), whole)


def environment_blocked(message: str) -> bool:
    """A test blocked by what the environment lacks (a login, a model back
    end), not by a defect of the subject: not judged, never a failure."""
    return (message or "").startswith(ENV_BLOCKED)


ENV_BLOCKED = "blocked: environment:"


def level_of(registry, cid: str | None) -> str:
    return registry.level(cid) if registry is not None else "MUST"


def summarize(f: RunFacts) -> RunSummary:
    """The run's conclusion: which failures gate, the root causes, coverage
    (and the bite map), the baseline report, the counts and the verdict."""
    gate_i = f.gate_interpretations
    for r in f.results.values():
        r.gated = r.outcome != "fail" or gates(tier(r.clause) if r.clause else None, gate_interpretations=gate_i)
    ungated = ungated_failures(((r.outcome, tier(r.clause) if r.clause else None)
                                for r in f.results.values()), gate_interpretations=gate_i)
    causes = root_causes(f.preflight, f.results, f.findings, lambda cid: level_of(f.registry, cid))
    expected_items = set()
    for rc in causes:
        # a broken item of a MUST clause fails the run, unless the baseline expects it
        # ("preflight::<item>"), or it blocked nothing and the baseline expects the
        # failures of its clause's own tests
        listed = bl.PREFLIGHT + rc["item"] in f.baseline
        own = [r.outcome for r in f.results.values() if r.clause == rc["clause"]]
        expected_by_tests = bool(own) and all(o == "xfail" for o in own)
        # an item of an interpretation that does not gate (the seed is silent there) is
        # reported, and the tests it blocked count as not judged, not as a failure
        gated = gates(rc["tier"], gate_interpretations=gate_i)
        rc["binding"] = rc["level"] in MANDATORY and not listed and gated and \
            (rc["blocked"] > 0 or not expected_by_tests)
        if listed or not gated or (rc["blocked"] == 0 and expected_by_tests):
            expected_items.add(rc["item"])
    coverage = None
    if f.registry is not None and f.have_inventory:
        coverage = compute_coverage(f.registry, f.inventory, f.results, complete=f.inventory_complete,
                                    gate=f.gate_enabled, preflight=f.preflight, expected_items=expected_items)
        if f.bite_map:
            bite.attach(coverage, f.bite_map, f.bite_results or "")
    # worker mode: a root cause is named by a test; when the baseline expects that test's
    # failure, the tests it blocked are not judged, and fail nothing (as "preflight::<item>")
    expected_tests = {n.split("::")[-1].split("[")[0] for n, r in f.results.items() if r.outcome == "xfail"}
    blocked = sum(1 for r in f.results.values() if r.outcome == "blocked"
                  and not environment_blocked(r.message)
                  and not any(r.message.startswith(f"blocked: {i}:") for i in expected_items)
                  and not _named_by(r.message, expected_tests))
    base = bl.report(f.baseline, f.results, set(f.inventory) if f.inventory_complete else None, f.preflight)
    counts = count(f.results)
    selection = (f.meta.get("selection") or {}).values()
    judged = judged_musts(coverage, whole=f.inventory_complete and not any(selection) and not f.nothing_selected)
    v = verdict(counts, collection_errors=len(f.collection_errors), fatal=f.fatal, stale=base["stale"],
                gate_failures=coverage.gate_failures if coverage else [],
                min_tests=f.min_tests, nothing_selected=f.nothing_selected,
                findings=f.findings, interrupted=f.interrupted,
                broken=[rc for rc in causes if rc["binding"]], blocked=blocked,
                strict=f.strict, ungated=ungated, judged=judged, min_judged=f.min_judged)
    # whether failures of our interpretations decide the exit status, and why
    meta = {**f.meta, "gate": {"interpretations": gate_i, "why": f.gate_why}}
    levels = {c.id: c.level for c in f.registry} if f.registry else {}
    return RunSummary(meta, f.results, counts, coverage, v, levels, base, f.collection_errors, f.fatal,
                      f.worker, findings=f.findings, preflight=f.preflight, root_causes=causes,
                      judged=judged, min_judged=f.min_judged)


_NAMED_BY = re.compile(r"\(root cause, named by \S+ in (\w+)\)")


def _named_by(message: str, tests: set) -> bool:
    """Whether a worker-mode `blocked:` message names its root cause's test
    among `tests` (WorkerRun.blocked_by writes "... (root cause, named by
    <clause> in <test>)")."""
    m = _NAMED_BY.search(message or "")
    return m is not None and m.group(1) in tests
