"""results.json: the machine-readable report (results.schema.json)."""

from __future__ import annotations

import json

from ..spec.judge import tier
from .console import tier_verdict, verdict_lines
from .summary import RunSummary
from .words import rel


SCHEMA_VERSION = 1


def results_json(s: RunSummary) -> dict:
    cov = None
    if s.coverage is not None:
        cov = {
            "complete": s.coverage.complete,
            "gated": s.coverage.gated,
            "gate": {"ok": not s.coverage.gate_failures, "failures": s.coverage.gate_failures},
            "sections": s.coverage.sections,
            "clauses": [{"id": c.id, "level": c.level, "tier": c.tier, "section": c.section, "check": c.check,
                         "statement": c.statement, "status": c.status, "tests": c.tests, "outcome": c.outcome,
                         "reason": c.reason, "partial": c.partial, "failing_tests": c.failing_tests,
                         "notes": c.notes, **({"bite": c.bite} if c.bite else {})}
                        for c in s.coverage.clauses],
        }
        if s.coverage.bite is not None:
            cov["bite"] = s.coverage.bite
    return {
        "schema_version": SCHEMA_VERSION,
        **s.meta,
        "exit_code": s.verdict.exit_code,
        "exit_reasons": s.verdict.reasons,
        "exit_notes": s.verdict.notes,
        "judged_must": {**s.judged.to_json(), "min_judged": s.min_judged},
        "verdict": {"lines": verdict_lines(s),
                    **{t: tier_verdict(s, t) for t in ("spec", "interpretation", "extension")}},
        "summary": s.counts,
        "tests": [{
            "nodeid": r.nodeid,
            "clauses": list(r.clauses),
            "levels": [s.levels.get(c, "") for c in r.clauses],
            "mode": r.mode,
            "outcome": r.outcome,
            "gated": r.gated,
            "clause": r.clause,
            "tier": tier(r.clause) if r.clause else None,
            "level": s.levels.get(r.clause, "") if r.clause else None,
            "duration": round(r.duration, 6),
            "message": r.message,
            "artifact_dir": r.artifact_dir,
            "artifact": rel(r.artifact_dir, s.meta.get("report_dir")) or None,
        } for r in s.results.values()],
        "collection_errors": s.collection_errors,
        "fatal_errors": s.fatal,
        "preflight": s.preflight.to_json() if s.preflight is not None else None,
        "root_causes": s.root_causes,
        "findings": s.findings,
        "baseline": s.baseline,
        "coverage": cov,
        "repeat": s.repeat,
    }


def write_json(path: str, s: RunSummary) -> None:
    with open(path, "w", encoding="utf-8") as f:
        json.dump(results_json(s), f, indent=2, ensure_ascii=False)
        f.write("\n")
