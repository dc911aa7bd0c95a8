"""report.html: the report a person looks at, one self-contained page.

Written from results.json's data (results.schema.json) and each failing
test's reproducer files (artifacts/<test>/transcript.txt, command.txt), read
beforehand by read_artifacts: report_html is a plain function of plain data.
The page, top to bottom: the verdict and the exit reasons; what changed since
another run (with --compare); the root causes and what each blocks; the
clause x mode matrix by section, filterable by tier and outcome, where a
failing cell opens its tests' messages, transcripts and reproducer commands;
findings, baseline, coverage and the bite status of each clause."""

from __future__ import annotations

import os
import re

from . import compare as cmp
from .page import OPENS, OUTCOME_ORDER, SIGN, anchor, chips, css_class, esc, page, section_key

# A clause's outcome in one mode is the first of these its tests there give it (as in coverage.py).
RANK = ("fail", "warn", "xfail", "pass", "harness-error", "blocked", "unsupported", "skipped", "unfinished",
        "not judged")
MODES = ("stdio", "unix", "tcp")
ANY = "any"                      # the column of tests that run in no particular mode
TRANSCRIPT_CHARS = 24_000        # of one transcript embedded: its first and last halves
TRANSCRIPT_ROWS = 400            # ...and at most this many of its lines
TOTAL_CHARS = 3_000_000          # of the page's transcripts, drawn: past it, a link to the file instead
TIERS = ("spec", "interpretation", "extension")
TIER_TITLE = {"spec": "spec", "interpretation": "interpretation (SB-I)", "extension": "extension (SB-X)"}


# -- reading the reproducer files (the only I/O here; report_html reads nothing) --------------------

def _clip(text: str, limit: int) -> tuple[str, int]:
    if len(text) <= limit:
        return text, 0
    half = limit // 2
    cut = len(text) - 2 * half
    return text[:half] + f"\n[report: {cut} characters of transcript not shown]\n" + text[-half:], cut


def read_artifacts(report_dir: str, data: dict, per_test: int = TRANSCRIPT_CHARS) -> dict:
    """nodeid -> {"transcript", "command", "clipped"} for every test whose
    cell opens (OPENS) and that has a reproducer folder: each transcript
    clipped to per_test characters (its first and last halves)."""
    out = {}
    for t in data.get("tests", []):
        if t.get("outcome") not in OPENS or not t.get("artifact_dir"):
            continue
        folder = t["artifact_dir"]
        if not os.path.isdir(folder) and t.get("artifact"):
            folder = os.path.join(report_dir, t["artifact"])  # the reports were moved with their artifacts
        entry = {"transcript": "", "command": "", "clipped": 0}
        for name, key in (("transcript.txt", "transcript"), ("command.txt", "command")):
            try:
                with open(os.path.join(folder, name), encoding="utf-8", errors="replace") as f:
                    entry[key] = f.read(4 * per_test if key == "transcript" else 8192)
            except OSError:
                pass
        entry["transcript"], entry["clipped"] = _clip(entry["transcript"], per_test)
        out[t["nodeid"]] = entry
    return out


# -- plain data the page is drawn from ----------------------------------------------------------

_LINE = re.compile(r"^\s*(-?[0-9]+\.[0-9]+)  (.{34}) ?(.*)$")


def lane(src: str) -> str:
    """Which column of the side-by-side transcript a source goes to."""
    s = src.strip()
    if "worker" in s:
        return "worker"
    if s.startswith("client") or s.startswith("daemon -> client") or "-> daemon" in s and "client" in s:
        return "client"
    if s == "harness":
        return "harness"
    return "client" if "client" in s else "daemon"


def transcript_rows(text: str, limit: int = TRANSCRIPT_ROWS) -> tuple[list, int]:
    """The transcript's lines as (ms, lane, source, text); a line not of the
    timeline's shape (the header, a cut) is a harness note. Returns the rows
    and how many past limit were left out."""
    rows = []
    for line in text.splitlines():
        m = _LINE.match(line)
        if m:
            rows.append((m.group(1), lane(m.group(2)), m.group(2).strip(), m.group(3)))
        elif line.strip():
            rows.append(("", "harness", "", line))
    if len(rows) > limit:
        half = limit // 2
        cut = len(rows) - 2 * half
        rows = rows[:half] + [("", "harness", "", f"[report: {cut} lines not shown]")] + rows[-half:]
        return rows, cut
    return rows, 0


def clause_rows(data: dict) -> list[dict]:
    """One row per clause: coverage's clauses when the run has them, else the
    clauses its tests cite."""
    cov = data.get("coverage")
    if cov and cov.get("clauses"):
        return [dict(c) for c in cov["clauses"]]
    seen: dict[str, dict] = {}
    for t in data.get("tests", []):
        for cid, level in zip(t.get("clauses", []), t.get("levels", []) or [""] * len(t.get("clauses", []))):
            if cid not in seen:
                m = re.match(r"SB-([0-9]+(?:\.[0-9]+)*|[A-Z])-", cid)
                tier = {"I": "interpretation", "X": "extension"}.get(m.group(1) if m else "", "spec")
                seen[cid] = {"id": cid, "level": level, "tier": tier, "section": m.group(1) if m else "?",
                             "status": "tested", "tests": [], "outcome": "not run", "failing_tests": [],
                             "reason": "", "statement": ""}
            seen[cid]["tests"].append(t["nodeid"])
    for c in seen.values():  # without coverage, a clause's outcome is the worst its tests give it
        said = [test_outcome_for(t, c["id"]) for t in data.get("tests", []) if c["id"] in t.get("clauses", [])]
        c["outcome"] = next((o for o in RANK if o in said), "not run")
        c["failing_tests"] = [t["nodeid"] for t in data.get("tests", []) if c["id"] in t.get("clauses", [])
                              and test_outcome_for(t, c["id"]) in ("fail", "warn", "xfail")]
    return sorted(seen.values(), key=lambda c: (section_key(c["section"]), section_key(c["id"][3:])))


def test_outcome_for(t: dict, cid: str) -> str:
    """What test t says of clause cid: a failure judged by another clause says nothing of this one."""
    o = t.get("outcome")
    if o in ("fail", "warn", "xfail") and t.get("clause") not in (None, cid):
        return "not judged"
    return o


def mode_cells(data: dict) -> tuple[list, dict]:
    """The mode columns this run has, and clause id -> mode -> {"outcome",
    "tests" (indexes into data["tests"]), "causes" (indexes into root_causes)}."""
    tests = data.get("tests", [])
    cells: dict[str, dict] = {}
    used = set()
    for i, t in enumerate(tests):
        mode = t.get("mode") or ANY
        used.add(mode)
        for cid in t.get("clauses", []):
            cell = cells.setdefault(cid, {}).setdefault(mode, {"outcomes": [], "tests": [], "causes": []})
            cell["outcomes"].append(test_outcome_for(t, cid))
            cell["tests"].append(i)
    for j, rc in enumerate(data.get("root_causes") or []):
        mode = rc.get("mode") or ANY
        used.add(mode)
        cell = cells.setdefault(rc["clause"], {}).setdefault(mode, {"outcomes": [], "tests": [], "causes": []})
        cell["outcomes"].append("fail" if rc.get("level") in ("MUST", "MUST NOT") else "warn")
        cell["causes"].append(j)
    for by_mode in cells.values():
        for cell in by_mode.values():
            cell["outcome"] = next((o for o in RANK if o in cell["outcomes"]), "not run")
    columns = [m for m in MODES if m in used] + ([ANY] if ANY in used or not used else [])
    return columns, cells


def row_outcome(c: dict) -> str:
    """The outcome a clause's row is filtered by: its outcome, or why it has none."""
    if c.get("status") in ("untested", "excluded"):
        return c["status"]
    return c.get("outcome") or "not run"


def interrupted(data: dict) -> bool:
    s = data.get("summary") or {}
    return bool(s.get("unfinished")) or any("interrupted" in r for r in data.get("exit_reasons", []))


# -- the page -------------------------------------------------------------------------------------

def report_html(data: dict, artifacts: dict | None = None, compare: dict | None = None) -> str:
    """The page, from results.json's data, the reproducer files of
    read_artifacts, and compare.compare's result (optional)."""
    artifacts = artifacts or {}
    worker = (data.get("mock_worker") or "").startswith("(none")
    title = "stdio Bus worker conformance report" if worker else "stdio Bus conformance report"
    parts = [_head(data, title, worker)]
    if compare is not None:
        parts.append(cmp.compare_html(compare))
    for section in (_root_causes, _harness_errors, _matrix, _findings, _baseline, _coverage):
        parts.append(section(data))
    parts.append(_tests(data, artifacts))
    parts.append("<aside id=\"detail\" hidden role=\"dialog\" aria-label=\"test details\">"
                 "<button class=\"close\" type=\"button\" title=\"close (Esc)\">close ✕</button>"
                 "<h2 class=\"title\"></h2><div class=\"body\"></div></aside>")
    return page(f"{title}: {os.path.basename(str(data.get('daemon') or ''))}", "\n".join(p for p in parts if p),
                SCRIPT)


def _kit_line(d: dict) -> str:
    sv = d.get("spec_version")
    return (f"{d.get('kit') or 'stdio-bus-conformance'} {d.get('kit_version') or 'unknown'}, "
            f"stdio Bus spec {'v' + sv if sv else '(revision unknown)'}")


def _head(d: dict, title: str, worker: bool) -> str:
    s = d.get("summary") or {}
    code = d.get("exit_code", 2)
    word = {0: "PASS", 1: "FAIL", 2: "NOT TRUSTED"}.get(code, str(code))
    lines = (d.get("verdict") or {}).get("lines") or []
    out = ["<header class=\"top\">", f"<h1>{esc(title)}</h1>",
           f"<div class=\"mute\">Produced by {esc(_kit_line(d))}; started {esc(d.get('started_at'))}, "
           f"{float(d.get('duration') or 0):.1f} s; seed {esc(d.get('seed'))}</div>", "</header>"]
    if not s.get("total"):
        why = "; ".join(d.get("exit_reasons") or []) or "nothing was selected"
        out.append(f"<div class=\"banner\" id=\"no-tests\">No test ran in this run ({esc(why)}): "
                   "there is no verdict on the implementation.</div>")
    if interrupted(d):
        out.append(f"<div class=\"banner\" id=\"interrupted\">This run was interrupted (Ctrl-C or a signal): "
                   f"{s.get('unfinished', 0)} test(s) unfinished. What finished is shown; the verdict is not "
                   "the whole suite's.</div>")
    out.append(f"<section class=\"verdict exit-{esc(code)}\" id=\"verdict\">"
               f"<div class=\"big\">{word}: exit {esc(code)}"
               + (f" — {esc(lines[-1])}" if lines else "") + "</div>")
    reasons = d.get("exit_reasons") or []
    if reasons:
        out.append("<div>Exit reasons:</div><ul class=\"tight\" id=\"exit-reasons\">"
                   + "".join(f"<li>{esc(r)}</li>" for r in reasons) + "</ul>")
    notes = d.get("exit_notes") or []
    out += ["<ul class=\"tight mute\">" + "".join(f"<li>note: {esc(n)}</li>" for n in notes) + "</ul>"] if notes else []
    if len(lines) > 1:
        out.append("<ul class=\"tight\">" + "".join(f"<li>{esc(x)}</li>" for x in lines[:-1]) + "</ul>")
    out.append(chips(s) + f"<div class=\"mute\">{s.get('total', 0)} test(s)</div></section>")
    who = "worker" if worker else "daemon"
    out.append("<table class=\"subject\">"
               f"<tr><th>{who}</th><td><code>{esc(d.get('daemon'))}</code></td></tr>"
               f"<tr><th>profile</th><td><code>{esc(d.get('profile'))}</code></td></tr>"
               + ("" if worker else f"<tr><th>mock worker</th><td><code>{esc(d.get('mock_worker'))}</code></td></tr>")
               + f"<tr><th>spec</th><td><code>{esc(d.get('spec'))}</code> ({esc(d.get('clauses', 0))} clauses)</td></tr>"
               + _selection(d) + "</table>")
    return "\n".join(out)


def _selection(d: dict) -> str:
    sel = d.get("selection") or {}
    parts = [f"{k} {', '.join(v) if isinstance(v, list) else v}" for k, v in sel.items() if v]
    return f"<tr><th>selection</th><td>{esc('; '.join(parts))}</td></tr>" if parts else ""


def _root_causes(d: dict) -> str:
    rcs = d.get("root_causes") or []
    if not rcs:
        return ""
    out = ["<h2 id=\"root-causes\">Root causes</h2>",
           "<p class=\"mute\">Found by the preflight; each is judged once, on its own clause, and the tests "
           "standing on it are <em>blocked</em>.</p>",
           "<table><tr><th>Broken</th><th>Clause</th><th>What happens</th><th>Blocks</th></tr>"]
    for j, rc in enumerate(rcs):
        blocked = rc.get("blocked_tests") or []
        more = rc.get("blocked", 0) - len(blocked)
        listing = ("<details><summary>" + f"{rc.get('blocked', 0)} test(s)" + "</summary><ul class=\"tight mono\">"
                   + "".join(f"<li>{esc(t)}</li>" for t in blocked)
                   + (f"<li>... and {more} more</li>" if more > 0 else "") + "</ul></details>") if blocked else \
            f"{rc.get('blocked', 0)} test(s)"
        out.append(f"<tr id=\"rc-{j}\"><td>{esc(rc.get('item'))} ({esc(rc.get('mode') or 'any')} mode)</td>"
                   f"<td><a href=\"#{anchor(rc['clause'])}\">{esc(rc['clause'])}</a> "
                   f"({esc(rc.get('tier'))}, {esc(rc.get('level'))})</td><td>{esc(rc.get('message'))}</td>"
                   f"<td>{listing}" + (f"<div>explains {rc['findings']} finding(s)</div>" if rc.get("findings") else "")
                   + "</td></tr>")
    return "\n".join(out) + "</table>"


def _harness_errors(d: dict) -> str:
    fatal, coll = d.get("fatal_errors") or [], d.get("collection_errors") or []
    if not (fatal or coll):
        return ""
    return ("<h2 id=\"harness-errors\">Harness errors</h2><ul class=\"tight\">"
            + "".join(f"<li>{esc(e)}</li>" for e in fatal)
            + "".join(f"<li><code>{esc(e['where'])}</code><pre>{esc(e['message'])}</pre></li>" for e in coll)
            + "</ul>")


def _cell(outcome: str, opens: list, title: str) -> str:
    cls = f"cell {css_class(outcome)}"
    sign = esc(SIGN.get(outcome, outcome))
    if outcome in OPENS and opens:
        return (f"<td class=\"{cls} opens\" data-open=\"{' '.join(opens)}\" data-title=\"{esc(title)}\" "
                f"title=\"{esc(outcome)}: open its test(s)\"><a href=\"#{opens[0]}\">{sign}</a></td>")
    return f"<td class=\"{cls}\" title=\"{esc(outcome)}\">{sign}</td>"


def _opens(d: dict, cell: dict, cid: str) -> list:
    tests = d.get("tests", [])
    ids = [f"t{i}" for i in cell["tests"] if tests[i].get("outcome") in OPENS
           and test_outcome_for(tests[i], cid) in OPENS]
    return [f"rc{j}" for j in cell["causes"]] + ids


def _matrix(d: dict) -> str:
    rows = clause_rows(d)
    columns, cells = mode_cells(d)
    bite = any(c.get("bite") for c in rows)
    present = [o for o in OUTCOME_ORDER if any(row_outcome(c) == o for c in rows)]
    out = ["<h2 id=\"clauses\">Clauses by mode</h2>",
           "<p class=\"mute\">Each row is a clause, each column a mode the suite ran it in ("
           + ("<em>any</em>: tests bound to no mode; " if ANY in columns else "")
           + "✓ pass, ✗ fail, ! warning, x expected failure, ■ blocked, – unsupported, ? not judged, "
           "… unfinished). Click a coloured failing cell for its tests' messages, transcripts and "
           "reproducer commands.</p>",
           "<form class=\"filters\" id=\"filters\" onsubmit=\"return false\"><fieldset><legend>tier</legend>"]
    out += [f"<label><input type=\"checkbox\" name=\"tier\" value=\"{t}\" checked> {esc(TIER_TITLE[t])}</label>"
            for t in TIERS]
    out.append("</fieldset><fieldset><legend>outcome</legend>")
    out += [f"<label class=\"{css_class(o)}\"><input type=\"checkbox\" name=\"outcome\" value=\"{esc(o)}\" checked> "
            f"{esc(o)} {sum(1 for c in rows if row_outcome(c) == o)}</label>" for o in present]
    out.append("</fieldset><button type=\"button\" id=\"only-failing\">failing only</button> "
               "<button type=\"button\" id=\"show-all\">all</button> "
               f"<span id=\"shown\" class=\"mute\">{len(rows)} of {len(rows)} clauses shown</span></form>")
    head = ("<tr><th>Clause</th><th>Level</th><th>Outcome</th>"
            + "".join(f"<th>{esc(m)}</th>" for m in columns)
            + ("<th>Bite</th>" if bite else "") + "<th>Tests</th><th>Statement / why not judged</th></tr>")
    out.append(f"<table class=\"matrix\" id=\"matrix\"><thead>{head}</thead>")
    by_sec: dict[str, list] = {}
    for c in rows:
        by_sec.setdefault(str(c.get("section", "?")).split(".", 1)[0], []).append(c)
    width = 5 + len(columns) + (1 if bite else 0)
    for sec, clauses in by_sec.items():
        judged = [c for c in clauses if c.get("level") in ("MUST", "MUST NOT") and c.get("outcome") in
                  ("pass", "fail", "warn", "xfail")]
        ok = sum(1 for c in judged if c["outcome"] == "pass")
        rate = f"MUST {ok}/{len(judged)} pass" if judged else "no MUST clause judged"
        out.append(f"<tbody data-sec=\"{esc(sec)}\"><tr class=\"sec\" data-sec=\"{esc(sec)}\"><th colspan=\"{width}\">"
                   f"Section {esc(sec)} <span class=\"mute\">({len(clauses)} clauses; {rate})</span></th></tr>")
        for c in clauses:
            cid, ro = c["id"], row_outcome(c)
            by_mode = cells.get(cid, {})
            all_opens = []
            mode_tds = []
            for m in columns:
                cell = by_mode.get(m)
                if cell is None:
                    mode_tds.append("<td class=\"cell o-none\"></td>")
                    continue
                opens = _opens(d, cell, cid)
                all_opens += [o for o in opens if o not in all_opens]
                mode_tds.append(_cell(cell["outcome"], opens, f"{cid} in {m} mode"))
            why = c.get("reason") or ""
            if ro in ("untested", "excluded"):
                why = ro + (f": {c.get('notes')}" if c.get("notes") else "")
            stmt = c.get("statement") or ""
            note = (f"<em>{esc(why)}</em> " if why else "") + esc(stmt[:300])
            tip = (why + " — " if why else "") + stmt
            out.append(f"<tr class=\"clause\" id=\"{anchor(cid)}\" data-sec=\"{esc(sec)}\" data-tier=\"{esc(c.get('tier'))}\" "
                       f"data-outcome=\"{esc(ro)}\"><td class=\"id\">{esc(cid)}</td><td>{esc(c.get('level'))}</td>"
                       + _cell(ro, all_opens, cid) + "".join(mode_tds)
                       + (f"<td class=\"{css_class(c.get('bite') or 'not run')}\">{esc(c.get('bite') or '')}</td>"
                          if bite else "")
                       + f"<td>{len(c.get('tests') or [])}</td><td class=\"stmt\" title=\"{esc(tip)}\">{note}</td></tr>")
        out.append("</tbody>")
    return "\n".join(out) + "</table>"


def _findings(d: dict) -> str:
    fs = d.get("findings") or []
    if not fs:
        return ""
    out = ["<h2 id=\"findings\">Findings</h2><table><tr><th>Kind</th><th>Test</th><th>Detail</th><th>Clause</th>"
           "<th>Root cause</th></tr>"]
    out += [f"<tr><td>{esc(f['kind'])}</td><td class=\"mono\">{esc(f['test'])}</td><td>{esc(f['detail'][:400])}</td>"
            f"<td>{esc(f.get('clause') or '')}</td><td>{esc(f.get('root_cause') or '')}</td></tr>" for f in fs[:200]]
    if len(fs) > 200:
        out.append(f"<tr><td colspan=\"5\">... {len(fs) - 200} more in results.json</td></tr>")
    return "\n".join(out) + "</table>"


def _baseline(d: dict) -> str:
    b = d.get("baseline") or {}
    items = [f"stale: <code>{esc(e['test'])}</code> ({esc(e['why'])})" for e in b.get("stale", [])]
    items += [f"new failure: <code>{esc(t)}</code>" for t in b.get("new_failures", [])]
    items += [f"intermittent: <code>{esc(e['test'])}</code> {esc(e['outcome'])} this time"
              for e in b.get("intermittent", [])]
    if b.get("expected_failures"):
        items.append(f"{len(b['expected_failures'])} expected failure(s) listed in <code>{esc(b.get('file'))}</code>")
    rep = d.get("repeat") or {}
    items += [f"repeat: <code>{esc(t['test'])}</code> {esc(t['verdict'])} ({esc(', '.join(t['outcomes']))})"
              for t in rep.get("tests", [])]
    if not items:
        return ""
    return "<h2 id=\"baseline\">Baseline and repeats</h2><ul class=\"tight\">" + \
        "".join(f"<li>{i}</li>" for i in items) + "</ul>"


def _coverage(d: dict) -> str:
    cov = d.get("coverage")
    if not cov:
        return "<h2 id=\"coverage\">Coverage</h2><p>Not available (no inventory of the suite's tests).</p>"
    out = ["<h2 id=\"coverage\">Coverage and bite</h2>",
           "<table><tr><th>Section</th><th>Tested</th><th>Untested</th><th>Excluded</th></tr>"]
    out += [f"<tr><td>{esc(r['section'])}</td><td>{r['tested']}</td><td>{r['untested']}</td><td>{r['excluded']}</td></tr>"
            for r in cov.get("sections", [])]
    out.append("</table>")
    gate = cov.get("gate") or {}
    if not cov.get("gated", True):
        out.append("<p>The coverage gate was disabled (--no-coverage-gate).</p>")
    elif not cov.get("complete", True):
        out.append("<p>Partial collection (explicit test files or ids): the coverage gate was not applied.</p>")
    elif gate.get("failures"):
        out.append(f"<p><strong>Gate failed</strong>: {len(gate['failures'])} MUST clause(s):</p><ul class=\"tight\">"
                   + "".join(f"<li>{esc(g['id'])} ({esc(g['level'])}): {esc(g['why'])}</li>" for g in gate["failures"])
                   + "</ul>")
    else:
        out.append("<p>Coverage gate: every MUST clause has a test or a reason.</p>")
    b = cov.get("bite")
    if b:
        sm = b.get("summary") or {}
        out.append(f"<p id=\"bite\">Bite map: {sm.get('proven', 0)} of {sm.get('total', 0)} MUST clauses proven to "
                   f"fail on a recorded break ({sm.get('partial', 0)} partly, {sm.get('unverified', 0)} not verified, "
                   f"{sm.get('no-bite', 0)} no-bite, {sm.get('missing', 0)} missing); map <code>{esc(b.get('map'))}"
                   f"</code>, verification <code>{esc(b.get('verification') or 'none')}</code>"
                   + (f" of {esc(b['verified_at'])}" if b.get("verified_at") else "")
                   + ". Each clause's status is in the matrix's Bite column.</p>")
    else:
        out.append("<p class=\"mute\">Bite status: not judged in this run (run.py --bite reads the bite map).</p>")
    return "\n".join(out)


def _transcript(rows: list) -> str:
    out = ["<table class=\"transcript\"><colgroup><col class=\"t\"><col><col><col></colgroup>"
           "<tr><th>ms</th><th>client ⇄ daemon</th><th>daemon log / harness</th><th>daemon ⇄ worker</th></tr>"]
    for ms, ln, src, text in rows:
        col = "daemon" if ln == "harness" else ln
        cells = {"client": "", "daemon": "", "worker": ""}
        label = f"<span class=\"src\">{esc(src)}</span> " if src and ln != "daemon" else ""
        cells[col] = label + esc(text)
        out.append(f"<tr class=\"l-{ln}\"><td class=\"t\">{esc(ms)}</td><td class=\"client\">{cells['client']}</td>"
                   f"<td class=\"daemon\">{cells['daemon']}</td><td class=\"worker\">{cells['worker']}</td></tr>")
    return "".join(out) + "</table>"


def _tests(d: dict, artifacts: dict, total: int = TOTAL_CHARS) -> str:
    """One block per failing test and per root cause: what a cell opens (and,
    without a script, what its link jumps to). The transcripts drawn stop at
    total characters: the later ones are links to their files."""
    tests = d.get("tests", [])
    blocks, used = [], 0
    for j, rc in enumerate(d.get("root_causes") or []):
        blocks.append(f"<details class=\"test o-block\" id=\"rc{j}\"><summary><strong>root cause</strong> "
                      f"{esc(rc.get('item'))} ({esc(rc.get('mode') or 'any')} mode): {esc(rc['clause'])}</summary>"
                      f"<pre class=\"message\">{esc(rc.get('message'))}</pre><p>It blocks {rc.get('blocked', 0)} "
                      "test(s): their verdicts wait on this being fixed.</p></details>")
    for i, t in enumerate(tests):
        if t.get("outcome") not in OPENS:
            continue
        art = artifacts.get(t["nodeid"]) or {}
        folder = t.get("artifact") or t.get("artifact_dir") or ""
        parts = [f"<details class=\"test\" id=\"t{i}\"><summary><span class=\"{css_class(t['outcome'])}\">"
                 f"&nbsp;{esc(t['outcome'])}&nbsp;</span> <code>{esc(t['nodeid'])}</code>"
                 + (f" — judged by {esc(t['clause'])} ({esc(t.get('tier'))}, {esc(t.get('level'))})" if t.get("clause") else "")
                 + "</summary>",
                 f"<h3>Message</h3><pre class=\"message\">{esc(t.get('message') or '(none)')}</pre>"]
        if art.get("command"):
            parts.append(f"<h3>Reproducer</h3><pre class=\"command\">{esc(art['command'].strip())}</pre>")
        if folder:
            parts.append(f"<p class=\"mute\">Reproducer folder: <a href=\"{esc(folder)}/\">{esc(folder)}</a> "
                         f"(<a href=\"{esc(folder)}/transcript.txt\">transcript.txt</a>)</p>")
        drawn = ""
        if art.get("transcript") and used < total:
            rows, cut = transcript_rows(art["transcript"])
            drawn = ("<h3>Transcript</h3>" + (f"<p class=\"mute\">clipped: {art['clipped']} characters and "
                                              f"{cut} lines not shown here</p>" if art.get("clipped") or cut else "")
                     + _transcript(rows))
            used += len(drawn)
        if drawn:
            parts.append(drawn)
        elif art.get("transcript"):
            parts.append("<p class=\"mute\">Transcript not embedded (the page keeps its size bounded): open "
                         f"<a href=\"{esc(folder)}/transcript.txt\">transcript.txt</a>.</p>")
        else:
            parts.append("<p class=\"mute\">No transcript was recorded for this test.</p>")
        blocks.append("".join(parts) + "</details>")
    if not blocks:
        return ""
    return "<h2 id=\"failing\">Failing tests</h2>\n" + "\n".join(blocks)


SCRIPT = r"""
(function(){
const rows=[...document.querySelectorAll('#matrix tr.clause')];
const shown=document.getElementById('shown');
function checked(name){return new Set([...document.querySelectorAll('#filters input[name='+name+']')]
  .filter(i=>i.checked).map(i=>i.value));}
function apply(){
  const tiers=checked('tier'),outs=checked('outcome');let n=0;
  for(const r of rows){const show=tiers.has(r.dataset.tier)&&outs.has(r.dataset.outcome);r.hidden=!show;if(show)n++;}
  for(const b of document.querySelectorAll('#matrix tbody')){
    b.hidden=![...b.querySelectorAll('tr.clause')].some(r=>!r.hidden);}
  if(shown)shown.textContent=n+' of '+rows.length+' clauses shown';
}
const form=document.getElementById('filters');
if(form){
  form.addEventListener('change',apply);
  const bad=new Set(['fail','warn','xfail','harness-error','unfinished','untested']);
  document.getElementById('only-failing').addEventListener('click',()=>{
    for(const i of form.querySelectorAll('input[name=outcome]'))i.checked=bad.has(i.value);apply();});
  document.getElementById('show-all').addEventListener('click',()=>{
    for(const i of form.querySelectorAll('input'))i.checked=true;apply();});
}
const panel=document.getElementById('detail');
function open(ids,title){
  const body=panel.querySelector('.body');
  body.replaceChildren(...ids.map(id=>{const src=document.getElementById(id);if(!src)return document.createTextNode('');
    const c=src.cloneNode(true);c.removeAttribute('id');c.open=true;return c;}));
  panel.querySelector('.title').textContent=title;panel.hidden=false;panel.scrollTop=0;
}
document.addEventListener('click',e=>{
  const td=e.target.closest('td.opens');
  if(td){e.preventDefault();open(td.dataset.open.split(' '),td.dataset.title);return;}
  if(e.target.closest('#detail .close'))panel.hidden=true;
});
document.addEventListener('keydown',e=>{if(e.key==='Escape')panel.hidden=true;});
apply();
})();
"""


def write_html(path: str, data: dict, report_dir: str, compare: dict | None = None) -> None:
    with open(path, "w", encoding="utf-8") as f:
        f.write(report_html(data, read_artifacts(report_dir, data), compare))
