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

from ..spec.judge import tier
from ..spec.registry import Registry

# A clause's outcome is the first of these that one of its tests gives it. A
# test that failed gives fail/warn/xfail to the clause its failure is judged
# by only; its other cited clauses it leaves "not judged" (it stopped before
# judging them).
OUTCOME_RANK = ("fail", "warn", "xfail", "pass", "harness-error", "blocked", "unsupported", "skipped",
                "unfinished", "not judged")
JUDGED = ("fail", "warn", "xfail", "pass")


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
    tier: str = "spec"
    reason: str = ""      # not judged, or judged in fewer tests than cite it: why
    partial: bool = False  # judged, but some of its tests were not (a mode or feature dropped...)
    failing_tests: list = field(default_factory=list)   # tests whose failure it judges
    message: str = ""     # the first of their messages
    bite: str = ""        # with a bite map: proven, partial, unverified, no-bite or missing (bite.py)


@dataclass
class Coverage:
    clauses: list
    sections: list     # [{"section", "tested", "untested", "excluded"}]
    gate_failures: list  # [{"id", "level", "why"}]
    complete: bool     # False when the inventory is partial (gate not applied)
    gated: bool = True  # False with --no-coverage-gate
    bite: dict | None = None  # with a bite map: bite.to_json() (which MUST clauses are proven to bite)


def _section_key(s: str):
    """Numbers in numeric order, then the lettered sections (A, B, C, I, X)."""
    return [(0, int(p), "") if p.isdigit() else (1, 0, p) for p in re.findall(r"[0-9]+|[A-Za-z]+", s)]


def short_reason(r) -> str:
    """Why a test gave no verdict, in a few words: "mode tcp unsupported",
    "feature orphan_policy not claimed", "blocked: sigterm", "slow"..."""
    msg = getattr(r, "message", "") or ""
    if r.outcome == "unsupported":
        m = re.search(r"does not support (\w+) mode", msg)
        if m:
            return f"mode {m.group(1)} unsupported"
        m = re.search(r"lacks feature\(s\) ([\w, ]+)", msg)
        if m:
            return f"feature {m.group(1).strip()} not claimed"
        m = re.search(r"needs the (\w+) profile", msg)
        if m:
            return f"worker profile {m.group(1)} not claimed"
        return "unsupported"
    if r.outcome == "blocked":
        m = re.match(r"blocked: ([\w-]+)", msg)
        return f"blocked by preflight {m.group(1)}" if m else "blocked"
    if r.outcome == "skipped":
        return "slow (SB_CONFORMANCE_SLOW=1)" if "slow" in msg else "skipped"
    if r.outcome == "harness-error":
        return "harness error"
    if r.outcome == "unfinished":
        return "interrupted"
    if r.outcome in ("fail", "warn", "xfail"):
        return "its tests stopped on another clause"
    return r.outcome


def reason_category(reason: str) -> str:
    """The one cause a verdict line counts a not-judged clause under: a
    block by the preflight first, then a mode, a feature, slowness..."""
    parts = reason.split("; ")
    modes = [p.split()[1] for p in parts if p.startswith("mode ") and p.endswith(" unsupported")]
    if len(modes) > 1 and not any(p.startswith("blocked") for p in parts):
        return f"modes {', '.join(modes)} unsupported"
    for prefix, word in (("blocked", "blocked by the preflight"), ("mode", None), ("feature", None),
                         ("worker profile", None), ("slow", None), ("harness error", None),
                         ("interrupted", None), ("its tests stopped", None), ("not selected", None)):
        for p in parts:
            if p.startswith(prefix):
                return word or p
    return parts[0] if parts else reason


def _reason(outcome: str, unjudged: list) -> str:
    if outcome == "not run":
        return "not selected"
    reasons = []
    for r in unjudged:
        why = short_reason(r)
        if why not in reasons:
            reasons.append(why)
    return "; ".join(reasons)


def _message(failing: list, results: dict, broken: list) -> str:
    if not failing:
        return ""
    if failing[0] in results:
        return results[failing[0]].message
    return next((f"preflight {r.name}: {r.message}" for r in broken), "")


def compute(registry: Registry, inventory: dict, results: dict | None = None,
            complete: bool = True, gate: bool = True, preflight=None, expected_items=()) -> Coverage:
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
        contrib = {}
        for t in tests:
            r = results.get(t)
            if r is None:
                continue
            o = r.outcome
            if o in ("fail", "warn", "xfail") and getattr(r, "clause", None) not in (None, c.id):
                o = "not judged"
            contrib[t] = o
        # a broken preflight item is a failure of its clause, reported once, as a root cause
        broken = [r for r in (preflight.items.values() if preflight is not None else [])
                  if r.status == "broken" and r.clause == c.id]
        contrib = {**{f"preflight::{r.name}[{r.mode}]": "xfail" if r.name in expected_items else
                      "fail" if c.mandatory else "warn" for r in broken}, **contrib}
        outcome = next((o for o in OUTCOME_RANK if o in contrib.values()), "not run")
        failing = [t for t, o in contrib.items() if o in ("fail", "warn", "xfail")]
        reason = _reason(outcome, [results[t] for t, o in contrib.items() if o not in JUDGED and t in results])
        partial = outcome in JUDGED and any(o in ("blocked", "unsupported") for o in contrib.values())
        if status == "untested" and c.mandatory:
            why = "no test cites it" if c.check == "black-box" else \
                f"check is {c.check or '(empty)'} but Notes give no reason"
            gate_failures.append({"id": c.id, "level": c.level, "why": why})
        clauses.append(ClauseCoverage(c.id, c.level, c.section, c.check, c.statement, c.notes,
                                      status, tests, outcome, tier(c.id),
                                      reason if tests and (outcome not in JUDGED or partial) else "", partial,
                                      failing, _message(failing, results, broken)))
    sections: dict[str, dict] = {}
    for cc in clauses:
        top = cc.section.split(".", 1)[0]
        row = sections.setdefault(top, {"section": top, "tested": 0, "untested": 0, "excluded": 0})
        row[cc.status] += 1
    rows = [sections[k] for k in sorted(sections, key=_section_key)]
    return Coverage(clauses, rows, gate_failures if complete and gate else [], complete, gate)
