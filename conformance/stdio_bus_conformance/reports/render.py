"""The run's reports: results.json, junit.xml, report.md and the console
summary. All are written from one RunSummary by the controlling process."""

from __future__ import annotations

import json
import os
import re
import socket
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field

from .coverage import JUDGED as JUDGED_CLAUSE
from . import bite
from .coverage import Coverage, reason_category
from ..spec.judge import tier
from .outcomes import OUTCOMES, Verdict, summary_line

SCHEMA_VERSION = 1
_XML_BAD = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


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


TIER_WORDS = {"spec": "spec", "interpretation": "our interpretation", "extension": "our extension"}
MANDATORY = ("MUST", "MUST NOT")


def judged_as(cid: str | None, level: str) -> str:
    """'SB-4.3-1 (spec, MUST)', 'SB-I-20 (our interpretation, SHOULD)'."""
    if not cid:
        return ""
    return f"{cid} ({TIER_WORDS[tier(cid)]}, {level or '?'})"


def kit_line(meta: dict) -> str:
    """'stdio-bus-conformance 0.2.0, stdio Bus spec v0.1.0': which kit and
    which spec revision produced a report (its header in every format)."""
    sv = meta.get("spec_version")
    return (f"{meta.get('kit') or 'stdio-bus-conformance'} {meta.get('kit_version') or 'unknown'}, "
            f"stdio Bus spec {'v' + sv if sv else '(revision unknown)'}")


def _plural(n: int, one: str, many: str | None = None) -> str:
    return f"{n} {one if n == 1 else (many or one + 's')}"


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


def root_cause_lines(s: "RunSummary") -> list[str]:
    """The console's root causes: what the preflight found broken, and what it cost."""
    out = []
    for rc in s.root_causes:
        if not out:
            out.append("root causes (found by the preflight; the tests standing on them are blocked):")
        cost = [f"{_plural(rc['blocked'], 'test')} blocked"]
        if rc["findings"]:
            cost.append(f"{_plural(rc['findings'], 'finding')} explained")
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
                   f"{_plural(len(c.failing_tests), 'test')}, e.g. {first}: "
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
        out.append(f"  {kind}: {_plural(len(items), 'test')}" + (f" (root cause: {rc})" if rc else "")
                   + f"; e.g. {items[0]['test']}: {items[0]['detail'][:200]}")
    return out


def count(results: dict) -> dict:
    counts = {o: 0 for o in OUTCOMES}
    for r in results.values():
        counts[r.outcome] += 1
    counts["total"] = len(results)
    return counts


# -- results.json ------------------------------------------------------------
def results_json(s: RunSummary) -> dict:
    cov = None
    if s.coverage is not None:
        cov = {
            "complete": s.coverage.complete,
            "gated": s.coverage.gated,
            "gate": {"ok": not s.coverage.gate_failures, "failures": s.coverage.gate_failures},
            "sections": s.coverage.sections,
            "clauses": [{"id": c.id, "level": c.level, "tier": c.tier, "section": c.section, "check": c.check,
                         "status": c.status, "tests": c.tests, "outcome": c.outcome,
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
            "artifact": _rel(r.artifact_dir, s.meta.get("report_dir")) or None,
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


# -- junit.xml ---------------------------------------------------------------
def _clean(text: str, limit: int = 20000) -> str:
    text = _XML_BAD.sub("\ufffd", text or "")
    return text if len(text) <= limit else text[:limit] + f"\n...(truncated, {len(text) - limit} more characters)"


def _t(seconds: float) -> str:
    return f"{max(0.0, seconds):.3f}"


def _split(nodeid: str) -> tuple[str, str, str]:
    """(file, classname, name): 'tests/test_a.py::test_x[stdio]' ->
    ('tests/test_a.py', 'tests.test_a', 'test_x[stdio]')."""
    path, _, rest = nodeid.partition("::")
    parts = rest.split("::") if rest else [path]
    module = re.sub(r"\.py$", "", path).replace("/", ".").lstrip(".")
    classname = ".".join([module] + parts[:-1])
    return path, classname, parts[-1]


def junit_tree(s: RunSummary) -> ET.ElementTree:
    """JUnit XML valid against the Jenkins xunit junit-10.xsd: testcase
    carries no properties there, so each suite lists its cases' clause ids in
    its own <properties> as clauses:<case name>."""
    root = ET.Element("testsuites", name="stdio Bus conformance")
    suites: dict[str, list] = {}
    for r in s.results.values():
        suites.setdefault(_split(r.nodeid)[0], []).append(r)
    for err in s.collection_errors:
        suites.setdefault(err["where"], [])
    for err in s.fatal:
        suites.setdefault("harness", [])
    tot = {"tests": 0, "failures": 0, "errors": 0, "time": 0.0}
    hostname = socket.gethostname()
    for path, results in suites.items():
        suite = ET.SubElement(root, "testsuite", name=path)
        props = ET.SubElement(suite, "properties")
        for key in ("kit", "kit_version", "spec_version", "daemon", "profile", "seed", "spec"):
            if s.meta.get(key) is not None:
                ET.SubElement(props, "property", name=key, value=str(s.meta[key]))
        n = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0, "time": 0.0}
        for r in results:
            _, classname, name = _split(r.nodeid)
            ET.SubElement(props, "property", name=f"clauses:{name}", value=" ".join(r.clauses))
            judged = judged_as(r.clause, s.levels.get(r.clause, "")) if r.clause else ""
            if judged:
                # tier and level of the clause the failure is judged by
                ET.SubElement(props, "property", name=f"judged:{name}",
                              value=f"{r.outcome} {r.clause} {tier(r.clause)} {s.levels.get(r.clause, '')}")
            case = ET.SubElement(suite, "testcase", classname=classname, name=name, time=_t(r.duration))
            n["tests"] += 1
            n["time"] += r.duration
            msg = _clean((f"{judged}: " if judged else "") + r.message, 1000)
            if r.outcome == "fail" and r.gated:
                n["failures"] += 1
                ET.SubElement(case, "failure", type="fail", message=msg).text = _clean(r.details)
            elif r.outcome in ("harness-error", "unfinished"):
                n["errors"] += 1
                ET.SubElement(case, "error", type=r.outcome, message=msg).text = _clean(r.details)
            elif r.outcome in ("xfail", "unsupported", "skipped", "blocked"):
                n["skipped"] += 1
                ET.SubElement(case, "skipped", type=r.outcome, message=msg)
            out = [f"clauses: {' '.join(r.clauses)}", f"mode: {r.mode or '-'}", f"outcome: {r.outcome}"]
            if judged:
                out.append(f"judged by: {judged}")
            err = []
            if r.outcome == "fail" and not r.gated:
                # a failure of our interpretation on a daemon not held to it: reported like
                # a warning (in <system-err> and a property), so a CI reading the JUnit file
                # agrees with the exit status
                out.append("gated: no (our interpretation; --strict or the profile gates it)")
                err = [f"FAILURE, NOT GATED: {judged} not met: {r.message}", r.details]
                ET.SubElement(props, "property", name=f"not-gated:{name}",
                              value=_clean(f"{judged}: {r.message}", 1000))
            if r.outcome == "warn":
                # a SHOULD not met: not a failure (CI stays green), not a skip either. Viewers
                # show a case's <system-err> (Jenkins "Standard Error", GitLab "System output",
                # the GitHub report actions' details); the suite's properties name it too.
                err = [f"WARNING: {judged} not met: {r.message}", r.details]
                ET.SubElement(props, "property", name=f"warning:{name}", value=_clean(f"{judged}: {r.message}", 1000))
            if r.nodeid in s.baseline.get("expected_failures", []) or \
                    any(e["test"] == r.nodeid for e in s.baseline.get("intermittent", [])):
                inter = any(e["test"] == r.nodeid for e in s.baseline.get("intermittent", []))
                out.append(f"baseline: {'intermittent entry (a pass or a failure accepted)' if inter else 'expected failure'}")
            rep = s.repeated(r.nodeid)
            if rep is not None:
                out.append(f"repeat: {rep['verdict']} ({', '.join(rep['outcomes'])})")
                ET.SubElement(props, "property", name=f"repeat:{name}",
                              value=f"{rep['verdict']} {' '.join(rep['outcomes'])}")
            if r.artifact_dir:
                out.append(f"artifacts: {_rel(r.artifact_dir, s.meta.get('report_dir'))} (in the report folder)")
            ET.SubElement(case, "system-out").text = _clean("\n".join(out))
            if err:
                ET.SubElement(case, "system-err").text = _clean("\n".join(e for e in err if e))
        for err in s.collection_errors:
            if err["where"] == path:
                case = ET.SubElement(suite, "testcase", classname=re.sub(r"\.py$", "", path).replace("/", "."),
                                     name="collection", time="0.000")
                ET.SubElement(case, "error", type="collection-error",
                              message=_clean(err["message"].splitlines()[0] if err["message"] else "", 1000)
                              ).text = _clean(err["message"])
                n["tests"] += 1
                n["errors"] += 1
        if path == "harness":
            for i, msg in enumerate(s.fatal):
                case = ET.SubElement(suite, "testcase", classname="harness", name=f"setup-{i + 1}", time="0.000")
                ET.SubElement(case, "error", type="harness-error", message=_clean(msg, 1000)).text = _clean(msg)
                n["tests"] += 1
                n["errors"] += 1
        suite.set("tests", str(n["tests"]))
        suite.set("failures", str(n["failures"]))
        suite.set("errors", str(n["errors"]))
        suite.set("skipped", str(n["skipped"]))
        suite.set("time", _t(n["time"]))
        suite.set("hostname", hostname)
        if s.meta.get("started_at"):
            suite.set("timestamp", s.meta["started_at"])
        for k in ("tests", "failures", "errors", "time"):
            tot[k] += n[k]
    root.set("tests", str(tot["tests"]))
    root.set("failures", str(tot["failures"]))
    root.set("errors", str(tot["errors"]))
    root.set("time", _t(tot["time"]))
    ET.indent(root)
    return ET.ElementTree(root)


def write_junit(path: str, s: RunSummary) -> None:
    junit_tree(s).write(path, encoding="UTF-8", xml_declaration=True)


# -- report.md ----------------------------------------------------------------
def _rate(passed: int, total: int) -> str:
    return f"{passed}/{total} ({100 * passed // total}%)" if total else "n/a"


def _md(text: str) -> str:
    return (text or "").replace("|", "\\|").replace("\n", " ")


def _rel(path: str | None, base: str | None) -> str:
    """A path relative to the report folder (artifacts travel with it)."""
    if not path:
        return ""
    if base:
        try:
            return os.path.relpath(path, base)
        except ValueError:
            pass
    return path


def report_md(s: RunSummary) -> str:
    """Read in a minute: the verdict, the root causes, one row per clause not
    met (failures first), then findings, failing tests, coverage and the
    section tables."""
    m = s.meta
    base = m.get("report_dir")
    title = "# stdio Bus conformance report" if s.worker is None else "# stdio Bus worker conformance report"
    out = [title, "", f"Produced by {kit_line(m)}.", ""]
    vlines = verdict_lines(s)
    if vlines:  # the spec's line first: the verdict on the spec itself
        out += [f"**{_md(vlines[-1])}**", ""] + [f"- {_md(line)}" for line in vlines[:-1]]
    out.append(f"- result: **{summary_line(s.counts)}** (exit {s.verdict.exit_code}"
               + (": " + "; ".join(s.verdict.reasons) if s.verdict.reasons else "") + ")")
    out += [f"- note: {_md(n)}" for n in s.verdict.notes]
    if s.worker is None:
        out += [f"- daemon: `{m.get('daemon')}`, profile: `{m.get('profile')}`"]
    else:
        w = s.worker
        out += [f"- worker: `{w.get('command')}`" + (f" ({w['name']})" if w.get("name") else ""),
                f"- description: `{w.get('description') or '(command line)'}`",
                f"- judged on the profiles: {', '.join(w.get('claims') or []) or 'none'}",
                f"- environment: {', '.join(f'`{k}={v}`' for k, v in (w.get('env') or {}).items()) or '(inherited)'}",
                f"- answer deadline {w.get('answer_timeout')} s, drain timeout {w.get('drain_timeout')} s"]
        out += [f"- MCP revision: {w['mcp_version']}"] if w.get("mcp_version") else []
        out += [f"- tool call: {w['tool_call']}"] if w.get("tool_call") else []
        out += [f"- root cause (preflight): {f['summary']}: named by {f['clause']} in `{f['test']}`; "
                "the tests that stand on it are blocked" for f in w.get("root_causes") or []]
    out += [f"- spec: `{m.get('spec')}` ({m.get('clauses', 0)} clauses); seed {m.get('seed')}, "
            f"started {m.get('started_at')}, {m.get('duration', 0):.1f} s", ""]
    if s.root_causes:
        out += ["## Root causes", "", "Found by the preflight; each is judged once, on its own clause, and the "
                "tests standing on it are `blocked`.", "",
                "| Broken | Clause | What happens | Tests blocked |", "|---|---|---|---|"]
        for rc in s.root_causes:
            out.append(f"| {rc['item']} ({rc['mode']} mode) | {judged_as(rc['clause'], rc['level'])} "
                       f"| {_md(rc['message'])} | {rc['blocked']} |")
        out.append("")
    if s.fatal or s.collection_errors:
        out += ["## Harness errors", ""]
        out += [f"- {_md(e)}" for e in s.fatal]
        out += [f"- `{e['where']}`: {_md(e['message'].splitlines()[0] if e['message'] else '')}"
                for e in s.collection_errors]
        out.append("")
    cov = s.coverage
    rows = [c for c in cov.clauses if c.failing_tests] if cov is not None else []
    if rows:
        rank = {"fail": 0, "xfail": 1, "warn": 2}
        rows.sort(key=lambda c: (rank.get(c.outcome, 3), ("spec", "interpretation", "extension").index(c.tier),
                                 c.level not in MANDATORY, c.id))
        out += ["## Clauses not met", "",
                "Each failure is judged by the clause it checks. An interpretation (SB-I) is our reading "
                "where the spec is silent, an extension (SB-X) our daemon's addition: neither is a spec "
                "violation.", "",
                "| Clause | Tier | Level | Outcome | Statement | Tests | Reason |", "|---|---|---|---|---|---|---|"]
        for c in rows:
            first = c.failing_tests[0]
            r = s.results.get(first)
            where = f"`{first}`" + (f" ([artifacts]({_rel(r.artifact_dir, base)}))" if r and r.artifact_dir else "")
            more = f" and {len(c.failing_tests) - 1} more" if len(c.failing_tests) > 1 else ""
            out.append(f"| {c.id} | {TIER_WORDS[c.tier]} | {c.level} | {c.outcome} | {_md(c.statement)[:220]} "
                       f"| {where}{more} | {_md(c.message.splitlines()[0] if c.message else '')[:200]} |")
        out.append("")
    if s.findings:
        out += ["## Findings", "", "| Kind | Test | Detail | Root cause |", "|---|---|---|---|"]
        for f in s.findings[:200]:
            out.append(f"| {f['kind']} | `{f['test']}` | {_md(f['detail'])[:240]} | {f.get('root_cause') or ''} |")
        if len(s.findings) > 200:
            out.append(f"| ... | {len(s.findings) - 200} more in results.json | | |")
        out.append("")
    b = s.baseline
    if b.get("stale") or b.get("new_failures") or b.get("intermittent") or b.get("update"):
        out += ["## Baseline", ""]
        out += [f"- stale: `{e['test']}` ({e['why']})" for e in b.get("stale", [])]
        out += [f"- new failure: `{t}`" for t in b.get("new_failures", [])]
        out += [f"- intermittent (a pass or a failure accepted): `{e['test']}` "
                f"{ {'pass': 'passed', 'xfail': 'failed'}.get(e['outcome'], e['outcome'])} this time"
                for e in b.get("intermittent", [])]
        u = b.get("update")
        if u:
            out.append(f"- updated `{u['file']}`: {len(u['added'])} added, {len(u['dropped'])} dropped, "
                       f"{u['kept']} kept ({u['outside']} outside this run's selection)")
            out += [f"  - added `{t}` (write its reason)" for t in u["added"]]
            out += [f"  - dropped `{d['test']}` ({d['why']})" for d in u["dropped"]]
        out.append("")
    if s.repeat:
        out += ["## Repeats", "", f"Each failed test rerun {s.repeat['n']} time(s): flaky (passed at least once) "
                "or steady (failed every time).", "", "| Test | Verdict | Outcomes |", "|---|---|---|"]
        out += [f"| `{t['test']}` | {t['verdict']} | {', '.join(t['outcomes'])} |" for t in s.repeat["tests"]]
        out.append("")
    bad = [r for r in s.results.values() if r.outcome in ("fail", "warn", "harness-error", "unfinished")]
    if bad:
        out += ["## Failing tests", "", "| Test | Outcome | Judged by | Message | Artifacts |",
                "|---|---|---|---|---|"]
        for r in bad:
            out.append(f"| `{r.nodeid}` | {r.outcome} | {judged_as(r.clause, s.levels.get(r.clause, ''))} "
                       f"| {_md(r.message)[:300]} | {_rel(r.artifact_dir, base)} |")
        out.append("")
    cov = s.coverage
    if cov is None:
        out += ["## Coverage", "", "not available (no inventory of the suite's tests)", ""]
        return "\n".join(out) + "\n"
    out += ["## Coverage by section", "", "| Section | Tested | Untested | Excluded |", "|---|---|---|---|"]
    out += [f"| {r['section']} | {r['tested']} | {r['untested']} | {r['excluded']} |" for r in cov.sections]
    if not cov.gated:
        out += ["", "The coverage gate was disabled (--no-coverage-gate)."]
    elif not cov.complete:
        out += ["", "Partial collection (explicit test files or ids): the coverage gate was not applied."]
    elif cov.gate_failures:
        untested, unbitten = bite.split_gate(cov.gate_failures)
        if untested:
            out += ["", f"**Coverage gate failed**: {len(untested)} MUST clause(s) without a test:"]
            out += [f"- {g['id']} ({g['level']}): {g['why']}" for g in untested]
        if unbitten:
            out += ["", f"**Bite gate failed**: {len(unbitten)} MUST clause(s) not in the bite map:"]
            out += [f"- {g['id']} ({g['level']}): {g['why']}" for g in unbitten]
    out.append("")
    if cov.bite is not None:
        b = cov.bite["summary"]
        out += ["## Bite map", "",
                f"{b['proven']} of {b['total']} MUST clauses proven to fail on a recorded break "
                f"({b['partial']} partly, {b['unverified']} recorded but not verified, {b['no-bite']} no-bite, "
                f"{b['missing']} missing); map `{cov.bite['map']}`, verification "
                f"`{cov.bite['verification'] or 'none'}`" + (f" of {cov.bite['verified_at']}" if cov.bite.get("verified_at") else "") + ".", ""]
        rows = [(cid, v) for cid, v in cov.bite["clauses"].items() if v["status"] != "proven"]
        if rows:
            out += ["| Clause | Bite | Breaks recorded | Why not proven |", "|---|---|---|---|"]
            out += [f"| {cid} | {v['status']} | {', '.join(v['breaks']) or '-'} | "
                    f"{_md('; '.join(((n['half'] + ': ') if n['half'] else '') + n['reason'] for n in v['no_bite']))} |"
                    for cid, v in rows]
            out.append("")
    by_top: dict[str, list] = {}
    for c in cov.clauses:
        by_top.setdefault(c.section.split(".", 1)[0], []).append(c)
    for top, clauses in by_top.items():
        kinds = {c.tier for c in clauses}
        out += [f"## Section {top}" + (f" ({TIER_WORDS[kinds.pop()]}s)" if kinds <= {"interpretation", "extension"}
                                       and len(kinds) == 1 else ""), ""]
        for label, levels in (("MUST", ("MUST", "MUST NOT")), ("SHOULD", ("SHOULD", "SHOULD NOT"))):
            tested = [c for c in clauses if c.level in levels and c.status == "tested"]
            ran = [c for c in tested if c.outcome in JUDGED_CLAUSE]
            ok = [c for c in ran if c.outcome == "pass"]
            unjudged = len(tested) - len(ran)
            out.append(f"- {label} pass rate: {_rate(len(ok), len(ran))}"
                       + (f", {unjudged} not judged" if unjudged else ""))
        with_bite = cov.bite is not None
        out += ["", "| Clause | Level | Tests | Outcome |" + (" Bite |" if with_bite else ""),
                "|---|---|---|---|" + ("---|" if with_bite else "")]
        for c in clauses:
            tests = c.status if not c.tests else f"{len(c.tests)}"
            outcome = c.outcome if c.tests else (f"excluded: {_md(c.notes)}" if c.status == "excluded" else "untested")
            if c.tests and c.outcome not in JUDGED_CLAUSE:
                outcome = f"not judged: {_md(c.reason)}"
            elif c.partial:
                outcome += f" (not judged in some tests: {_md(c.reason)})"
            out.append(f"| {c.id} | {c.level} | {tests} | {outcome} |" + (f" {c.bite or '-'} |" if with_bite else ""))
        out.append("")
    return "\n".join(out) + "\n"


def write_md(path: str, s: RunSummary) -> None:
    with open(path, "w", encoding="utf-8") as f:
        f.write(report_md(s))


def write_all(report_dir: str, s: RunSummary) -> dict:
    os.makedirs(report_dir, exist_ok=True)
    paths = {name: os.path.join(report_dir, name) for name in ("results.json", "junit.xml", "report.md")}
    write_json(paths["results.json"], s)
    write_junit(paths["junit.xml"], s)
    write_md(paths["report.md"], s)
    return paths


# -- console -------------------------------------------------------------------
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
            lines.append(f"  BITE GATE FAILED: {len(unbitten)} MUST clause(s) not in the bite map:")
            lines += [f"    {g['id']} ({g['level']}): {g['why']}" for g in unbitten]
    else:
        lines.append("  coverage gate: ok")
    if cov.bite is not None:
        lines += bite.json_lines(cov.bite, gate=False)
    return lines
