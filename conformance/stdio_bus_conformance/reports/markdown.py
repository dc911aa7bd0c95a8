"""report.md: the report a person reads first."""

from __future__ import annotations

from .coverage import JUDGED as JUDGED_CLAUSE
from . import bite
from .outcomes import summary_line
from .console import verdict_lines
from .summary import RunSummary
from .words import MANDATORY, TIER_WORDS, judged_as, kit_line, rel


def _rate(passed: int, total: int) -> str:
    return f"{passed}/{total} ({100 * passed // total}%)" if total else "n/a"


def _md(text: str) -> str:
    return (text or "").replace("|", "\\|").replace("\n", " ")


def report_md(s: RunSummary) -> str:
    """Read in a minute: the verdict, the root causes, one row per clause not
    met (failures first), then findings, failing tests, coverage and the
    section tables. Each section is its own function; an empty one is left out."""
    out = []
    for section in (_head, _root_causes, _harness_errors, _clauses_not_met, _findings, _baseline, _repeats,
                    _failing_tests, _coverage, _bite_map, _sections):
        out += section(s)
    return "\n".join(out) + "\n"


def _head(s: RunSummary) -> list[str]:
    """Title, the verdict per tier, the result line, and what was judged."""
    m = s.meta
    title = "# stdio Bus conformance report" if s.worker is None else "# stdio Bus worker conformance report"
    out = [title, "", f"Produced by {kit_line(m)}.", ""]
    vlines = verdict_lines(s)
    if vlines:  # the spec's line first: the verdict on the spec itself
        out += [f"**{_md(vlines[-1])}**", ""] + [f"- {_md(line)}" for line in vlines[:-1]]
    out.append(f"- result: **{summary_line(s.counts)}** (exit {s.verdict.exit_code}"
               + (": " + "; ".join(s.verdict.reasons) if s.verdict.reasons else "") + ")")
    out += [f"- note: {_md(n)}" for n in s.verdict.notes]
    out.append(f"- coverage of this run: {_md(s.judged.line(s.min_judged))}"
               + ("" if s.judged.whole else " (a selection: not gated)"))
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
    return out


def _root_causes(s: RunSummary) -> list[str]:
    if not s.root_causes:
        return []
    out = ["## Root causes", "", "Found by the preflight; each is judged once, on its own clause, and the "
           "tests standing on it are `blocked`.", "",
           "| Broken | Clause | What happens | Tests blocked |", "|---|---|---|---|"]
    for rc in s.root_causes:
        out.append(f"| {rc['item']} ({rc['mode']} mode) | {judged_as(rc['clause'], rc['level'])} "
                   f"| {_md(rc['message'])} | {rc['blocked']} |")
    return out + [""]


def _harness_errors(s: RunSummary) -> list[str]:
    if not (s.fatal or s.collection_errors):
        return []
    out = ["## Harness errors", ""]
    out += [f"- {_md(e)}" for e in s.fatal]
    out += [f"- `{e['where']}`: {_md(e['message'].splitlines()[0] if e['message'] else '')}"
            for e in s.collection_errors]
    return out + [""]


def _clauses_not_met(s: RunSummary) -> list[str]:
    cov = s.coverage
    rows = [c for c in cov.clauses if c.failing_tests] if cov is not None else []
    if not rows:
        return []
    rank = {"fail": 0, "xfail": 1, "warn": 2}
    rows.sort(key=lambda c: (rank.get(c.outcome, 3), ("spec", "interpretation", "extension").index(c.tier),
                             c.level not in MANDATORY, c.id))
    out = ["## Clauses not met", "",
           "Each failure is judged by the clause it checks. An interpretation (SB-I) is our reading "
           "where the spec is silent, an extension (SB-X) our daemon's addition: neither is a spec "
           "violation.", "",
           "| Clause | Tier | Level | Outcome | Statement | Tests | Reason |", "|---|---|---|---|---|---|---|"]
    base = s.meta.get("report_dir")
    for c in rows:
        first = c.failing_tests[0]
        r = s.results.get(first)
        where = f"`{first}`" + (f" ([artifacts]({rel(r.artifact_dir, base)}))" if r and r.artifact_dir else "")
        more = f" and {len(c.failing_tests) - 1} more" if len(c.failing_tests) > 1 else ""
        out.append(f"| {c.id} | {TIER_WORDS[c.tier]} | {c.level} | {c.outcome} | {_md(c.statement)[:220]} "
                   f"| {where}{more} | {_md(c.message.splitlines()[0] if c.message else '')[:200]} |")
    return out + [""]


def _findings(s: RunSummary) -> list[str]:
    if not s.findings:
        return []
    out = ["## Findings", "", "| Kind | Test | Detail | Root cause |", "|---|---|---|---|"]
    for f in s.findings[:200]:
        out.append(f"| {f['kind']} | `{f['test']}` | {_md(f['detail'])[:240]} | {f.get('root_cause') or ''} |")
    if len(s.findings) > 200:
        out.append(f"| ... | {len(s.findings) - 200} more in results.json | | |")
    return out + [""]


def _baseline(s: RunSummary) -> list[str]:
    b = s.baseline
    if not (b.get("stale") or b.get("new_failures") or b.get("intermittent") or b.get("update")):
        return []
    out = ["## Baseline", ""]
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
    return out + [""]


def _repeats(s: RunSummary) -> list[str]:
    if not s.repeat:
        return []
    out = ["## Repeats", "", f"Each failed test rerun {s.repeat['n']} time(s): flaky (passed at least once) "
           "or steady (failed every time).", "", "| Test | Verdict | Outcomes |", "|---|---|---|"]
    out += [f"| `{t['test']}` | {t['verdict']} | {', '.join(t['outcomes'])} |" for t in s.repeat["tests"]]
    return out + [""]


def _failing_tests(s: RunSummary) -> list[str]:
    bad = [r for r in s.results.values() if r.outcome in ("fail", "warn", "harness-error", "unfinished")]
    if not bad:
        return []
    base = s.meta.get("report_dir")
    out = ["## Failing tests", "", "| Test | Outcome | Judged by | Message | Artifacts |", "|---|---|---|---|---|"]
    for r in bad:
        out.append(f"| `{r.nodeid}` | {r.outcome} | {judged_as(r.clause, s.levels.get(r.clause, ''))} "
                   f"| {_md(r.message)[:300]} | {rel(r.artifact_dir, base)} |")
    return out + [""]


def _coverage(s: RunSummary) -> list[str]:
    """Coverage by section and the gate; the sections that follow need it."""
    cov = s.coverage
    if cov is None:
        return ["## Coverage", "", "not available (no inventory of the suite's tests)", ""]
    out = ["## Coverage by section", "", "| Section | Tested | Untested | Excluded |", "|---|---|---|---|"]
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
            out += ["", f"**Bite gate failed**: {len(unbitten)} MUST clause(s) not proven to bite:"]
            out += [f"- {g['id']} ({g['level']}): {g['why']}" for g in unbitten]
    return out + [""]


def _bite_map(s: RunSummary) -> list[str]:
    cov = s.coverage
    if cov is None or cov.bite is None:
        return []
    b = cov.bite["summary"]
    out = ["## Bite map", "",
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
    return out


def _sections(s: RunSummary) -> list[str]:
    """One table per top-level section: each clause, its tests and outcome."""
    cov = s.coverage
    if cov is None:
        return []
    out = []
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
    return out


def write_md(path: str, s: RunSummary) -> None:
    with open(path, "w", encoding="utf-8") as f:
        f.write(report_md(s))
