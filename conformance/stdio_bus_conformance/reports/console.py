"""The console's closing lines: the verdict per tier, root causes, clauses
not met, findings, coverage."""

from __future__ import annotations

import os

from . import bite
from .coverage import Coverage, reason_category
from .summary import RunSummary
from .words import MANDATORY, TIER_WORDS, judged_as, plural


def tier_verdict(s: "RunSummary", which: str) -> dict:
    """Counts of one tier's clauses: MUST clauses failing or not judged (and
    why), SHOULD/MAY ones warning or not judged, clauses judged by fewer
    tests than cite them."""
    cov = s.coverage
    out = {"tier": which, "must": 0, "must_fail": 0, "expected": 0, "should": 0, "should_warn": 0,
           "not_judged": 0, "must_not_judged": 0, "reasons": {}, "partial": 0, "excluded": 0}
    if cov is None:
        return out
    for c in cov.clauses:
        if c.tier != which:
            continue
        if c.status == "excluded":
            out["excluded"] += 1
            continue
        must = c.level in MANDATORY
        out["must" if must else "should"] += 1
        if c.outcome in ("fail", "xfail") and must:
            out["must_fail"] += 1
            out["expected"] += c.outcome == "xfail"
        elif c.outcome in ("warn", "fail", "xfail"):
            out["should_warn"] += 1
        elif c.outcome != "pass":
            out["not_judged"] += 1
            if must:
                out["must_not_judged"] += 1
                why = reason_category(c.reason) if c.status == "tested" and c.reason else \
                    ("no test" if c.status != "tested" else c.outcome)
                out["reasons"][why] = out["reasons"].get(why, 0) + 1
        if c.partial:
            out["partial"] += 1
    return out


def verdict_lines(s: "RunSummary") -> list[str]:
    """One line per tier, the spec's last: 'spec v0.1.0: 7 MUST clauses
    fail (of 141), 3 not judged (mode tcp unsupported); 2 SHOULD/MAY clauses
    warn (of 40)'. Interpretations and extensions have their own lines: a
    failure there is our reading or our feature, never a spec violation."""
    if s.coverage is None:
        return []
    version = s.meta.get("spec_version")
    name = f"v{version}" if version else os.path.basename(s.meta.get("spec") or "") or "spec"
    lines = []
    for which, head in (("interpretation", "our interpretations (SB-I, where the spec is silent)"),
                        ("extension", "our extensions (SB-X, judged where the profile claims them)"),
                        ("spec", f"spec {name}")):
        v = tier_verdict(s, which)
        if v["must"] + v["should"] == 0:
            continue
        parts = []
        if v["must"]:
            n = v["must_fail"]
            text = f"{n} MUST {'clause fails' if n == 1 else 'clauses fail'} (of {v['must']})"
            if v["expected"]:
                text += f" ({v['expected']} expected by the baseline)"
            if v["must_not_judged"]:
                why = ", ".join(f"{n} {r}" if len(v["reasons"]) > 1 else r
                                for r, n in sorted(v["reasons"].items(), key=lambda kv: (-kv[1], kv[0])))
                text += f", {v['must_not_judged']} not judged ({why})"
            parts.append(text)
        if v["should"]:
            unjudged = v["not_judged"] - v["must_not_judged"]
            n = v["should_warn"]
            parts.append(f"{n} SHOULD/MAY {'clause warns' if n == 1 else 'clauses warn'} (of {v['should']})"
                         + (f", {unjudged} not judged" if unjudged else ""))
        if v["partial"]:
            parts.append(f"{v['partial']} judged by fewer tests than cite them")
        if which == "interpretation" and v["must_fail"] and not (s.meta.get("gate") or {}).get("interpretations", True):
            parts.append("reported, not gated (the exit status does not count them)")
        lines.append(f"{head}: " + "; ".join(parts))
    return lines


def root_cause_lines(s: "RunSummary") -> list[str]:
    """The console's root causes: what the preflight found broken, and what it cost."""
    out = []
    for rc in s.root_causes:
        if not out:
            out.append("root causes (found by the preflight; the tests standing on them are blocked):")
        cost = [f"{plural(rc['blocked'], 'test')} blocked"]
        if rc["findings"]:
            cost.append(f"{plural(rc['findings'], 'finding')} explained")
        out.append(f"  {rc['item']}: {rc['message']} [{judged_as(rc['clause'], rc['level'])}; "
                   f"{rc['mode']} mode] -> {', '.join(cost)}")
    return out


def clause_failure_lines(s: "RunSummary", limit: int = 60) -> list[str]:
    """The console's list of clauses not met: one line per clause, failures
    first, with its tier and level and one failing test."""
    if s.coverage is None:
        return []
    rows = [c for c in s.coverage.clauses if c.failing_tests]
    if not rows:
        return []
    rank = {"fail": 0, "xfail": 1, "warn": 2}
    rows.sort(key=lambda c: (rank.get(c.outcome, 3), c.tier != "spec", c.id))
    out = ["clauses not met (each failure is judged by the clause it checks):"]
    for c in rows[:limit]:
        word = {"fail": "FAIL", "warn": "WARN", "xfail": "XFAIL"}.get(c.outcome, c.outcome.upper())
        first = c.failing_tests[0]
        out.append(f"  {word:<5} {c.id:<12} {TIER_WORDS[c.tier] + ' ' + c.level:<28} "
                   f"{plural(len(c.failing_tests), 'test')}, e.g. {first}: "
                   f"{(c.message.splitlines() or [''])[0][:160]}")
    if len(rows) > limit:
        out.append(f"  ... and {len(rows) - limit} more (report.md)")
    return out


def finding_lines(s: "RunSummary") -> list[str]:
    """Findings, grouped by kind."""
    if not s.findings:
        return []
    by: dict[str, list] = {}
    for f in s.findings:
        by.setdefault(f["kind"], []).append(f)
    out = ["findings (what the harness saw beside the tests' checks):"]
    for kind, items in by.items():
        rc = items[0].get("root_cause")
        out.append(f"  {kind}: {plural(len(items), 'test')}" + (f" (root cause: {rc})" if rc else "")
                   + f"; e.g. {items[0]['test']}: {items[0]['detail'][:200]}")
    return out


def coverage_lines(cov: Coverage | None) -> list[str]:
    if cov is None:
        return ["coverage: not available"]
    lines = ["clause coverage (tested / untested / excluded):"]
    lines += [f"  section {r['section']:<4} {r['tested']:>4} {r['untested']:>4} {r['excluded']:>4}"
              for r in cov.sections]
    tot = [sum(r[k] for r in cov.sections) for k in ("tested", "untested", "excluded")]
    lines.append(f"  total        {tot[0]:>4} {tot[1]:>4} {tot[2]:>4}")
    if not cov.gated:
        lines.append("  coverage gate: disabled (--no-coverage-gate)")
        lines += [f"    untested: {c.id} ({c.level})" for c in cov.clauses
                  if c.status == "untested" and c.level in ("MUST", "MUST NOT")]
    elif not cov.complete:
        lines.append("  coverage gate: not applied (partial collection)")
    elif cov.gate_failures:
        untested, unbitten = bite.split_gate(cov.gate_failures)
        if untested:
            lines.append(f"  COVERAGE GATE FAILED: {len(untested)} MUST clause(s) without a test:")
            lines += [f"    {g['id']} ({g['level']}): {g['why']}" for g in untested]
        if unbitten:
            must = sum(g["level"] in ("MUST", "MUST NOT") for g in unbitten)
            lines.append(f"  BITE GATE FAILED: {must} MUST clause(s)"
                         + (f" and {len(unbitten) - must} SHOULD/MAY clause(s)" if must < len(unbitten) else "")
                         + " not proven to bite:")
            lines += [f"    {g['id']} ({g['level']}): {g['why']}" for g in unbitten]
    else:
        lines.append("  coverage gate: ok")
    if cov.bite is not None:
        lines += bite.json_lines(cov.bite, gate=False)
    return lines
