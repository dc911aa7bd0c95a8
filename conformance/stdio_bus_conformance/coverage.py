"""Clause coverage: which clauses of SPEC.md the suite's tests cite.

A clause is
  tested    when at least one test cites it;
  untested  when no test cites it and its Check is black-box;
  excluded  when no test cites it and SPEC.md gives a non-black-box Check
            (inspection, worker-side, client-side) with a reason in Notes.
The gate fails on every MUST/MUST NOT clause that is untested, or excluded
without a reason. Coverage is static: it counts citations by every collected
test, whatever the selection of this run.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from .spec import Registry

OUTCOME_RANK = ("harness-error", "fail", "warn", "xfail", "pass", "unsupported", "skipped")


@dataclass
class ClauseCoverage:
    id: str
    level: str
    section: str
    check: str
    statement: str
    notes: str
    status: str
    tests: list = field(default_factory=list)
    outcome: str = "not run"


@dataclass
class Coverage:
    clauses: list
    sections: list     # [{"section", "tested", "untested", "excluded"}]
    gate_failures: list  # [{"id", "level", "why"}]
    complete: bool     # False when the inventory is partial (gate not applied)
    gated: bool = True  # False with --no-coverage-gate


def _section_key(s: str):
    """Numbers in numeric order, then the lettered sections (A, B, C, I, X)."""
    return [(0, int(p), "") if p.isdigit() else (1, 0, p) for p in re.findall(r"[0-9]+|[A-Za-z]+", s)]


def compute(registry: Registry, inventory: dict, results: dict | None = None,
            complete: bool = True, gate: bool = True) -> Coverage:
    """inventory: nodeid -> cited clause ids (all collected tests);
    results: nodeid -> TestResult of the tests that ran."""
    results = results or {}
    citing: dict[str, list] = {}
    for nodeid, ids in inventory.items():
        for cid in ids:
            citing.setdefault(cid, []).append(nodeid)
    clauses, gate_failures = [], []
    for c in sorted(registry, key=lambda c: (_section_key(c.section), _section_key(c.id[3:]))):
        if c.retired:
            continue
        tests = sorted(citing.get(c.id, []))
        if tests:
            status = "tested"
        elif c.check != "black-box" and c.notes:
            status = "excluded"
        else:
            status = "untested"
        outcomes = [results[t].outcome for t in tests if t in results]
        outcome = next((o for o in OUTCOME_RANK if o in outcomes), "not run")
        if status == "untested" and c.mandatory:
            why = "no test cites it" if c.check == "black-box" else \
                f"check is {c.check or '(empty)'} but Notes give no reason"
            gate_failures.append({"id": c.id, "level": c.level, "why": why})
        clauses.append(ClauseCoverage(c.id, c.level, c.section, c.check, c.statement, c.notes,
                                      status, tests, outcome))
    sections: dict[str, dict] = {}
    for cc in clauses:
        top = cc.section.split(".", 1)[0]
        row = sections.setdefault(top, {"section": top, "tested": 0, "untested": 0, "excluded": 0})
        row[cc.status] += 1
    rows = [sections[k] for k in sorted(sections, key=_section_key)]
    return Coverage(clauses, rows, gate_failures if complete and gate else [], complete, gate)
