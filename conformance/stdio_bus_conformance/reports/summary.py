"""What a run concludes, as one RunSummary every report is written from:
the results, counts, root causes, coverage and verdict."""

from __future__ import annotations

from dataclasses import dataclass, field
from .coverage import Coverage
from ..spec.judge import tier
from .outcomes import OUTCOMES, Verdict
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
