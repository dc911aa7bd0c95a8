"""The interop matrix (run.py --matrix RUN_DIR... --report-dir OUT): one row
per clause, one column per implementation judged, each cell that run's
outcome for the clause, linking to the clause's row in that run's
report.html. build() is a plain function of the runs' results.json data;
matrix_md() and matrix_html() draw it (OUT/matrix.md, OUT/matrix.html)."""

from __future__ import annotations

import os

from .compare import FAILING, clause_outcomes
from .page import OUTCOME_ORDER, SIGN, anchor, css_class, esc, page, section_key


def name_of(data: dict, folder: str, taken: set) -> str:
    """A column's name when none is given: the daemon's file name, and the
    run folder's when two runs judged the same file."""
    base = os.path.basename(str(data.get("daemon") or "").split()[0] if data.get("daemon") else "") or \
        os.path.basename(os.path.normpath(folder))
    name = base if base not in taken else f"{base} ({os.path.basename(os.path.normpath(folder))})"
    taken.add(name)
    return name


def build(runs: list[dict]) -> dict:
    """runs: [{"name", "dir", "link" (to its report.html, relative to OUT),
    "data" (results.json) or "missing" (why not read)}]. Returns
    {"columns": [{"name", "dir", "link", "exit_code", "summary", "missing"}],
     "rows": [{"id", "tier", "level", "section", "cells": [{"outcome", "test"} | None]}]}
    with the rows of every clause any run knows, in the spec's order."""
    per_run = [clause_outcomes(r["data"]) if r.get("data") is not None else {} for r in runs]
    known: dict[str, dict] = {}
    for outs in per_run:
        for cid, v in outs.items():
            known.setdefault(cid, v)
    rows = []
    for cid in sorted(known, key=lambda c: (section_key(known[c]["section"]), section_key(c[3:]))):
        cells = []
        for outs in per_run:
            v = outs.get(cid)
            cells.append(None if v is None else {"outcome": v["outcome"], "test": (v["tests"] or [""])[0],
                                                 "message": (v.get("message") or "").split("\n", 1)[0][:300]})
        rows.append({"id": cid, "tier": known[cid]["tier"], "level": known[cid]["level"],
                     "section": known[cid]["section"], "cells": cells})
    columns = [{"name": r["name"], "dir": r["dir"], "link": r.get("link"), "missing": r.get("missing"),
                "exit_code": (r.get("data") or {}).get("exit_code"),
                "summary": (r.get("data") or {}).get("summary") or {}} for r in runs]
    return {"columns": columns, "rows": rows}


def _fails(m: dict, k: int) -> int:
    return sum(1 for r in m["rows"] if r["cells"][k] and r["cells"][k]["outcome"] in FAILING)


def matrix_md(m: dict) -> str:
    cols = m["columns"]
    out = ["# stdio Bus interop matrix", "",
           f"{len(m['rows'])} clauses x {len(cols)} implementations; each cell the clause's outcome in that run "
           "(matrix.html links each to the run's report).", "",
           "| Implementation | Run | Exit | Tests | Clauses failing |", "|---|---|---|---|---|"]
    for k, c in enumerate(cols):
        if c["missing"]:
            out.append(f"| {c['name']} | `{c['dir']}` | - | - | not read: {c['missing']} |")
        else:
            out.append(f"| {c['name']} | `{c['dir']}` | {c['exit_code']} | {c['summary'].get('total', 0)} "
                       f"| {_fails(m, k)} |")
    out += ["", "| Clause | Tier | Level | " + " | ".join(c["name"] for c in cols) + " |",
            "|---|---|---|" + "---|" * len(cols)]
    for r in m["rows"]:
        out.append(f"| {r['id']} | {r['tier'] or ''} | {r['level'] or ''} | "
                   + " | ".join((x["outcome"] if x else "-") for x in r["cells"]) + " |")
    return "\n".join(out) + "\n"


def matrix_html(m: dict) -> str:
    cols = m["columns"]
    head = ["<header class=\"top\"><h1>stdio Bus interop matrix</h1>",
            f"<div class=\"mute\">{len(m['rows'])} clauses x {len(cols)} implementations. Each cell is the clause's "
            "outcome in that run and links to its row in the run's report.html.</div></header>",
            "<table id=\"runs\"><tr><th>Implementation</th><th>Run</th><th>Exit</th><th>Tests</th><th>Clauses failing</th></tr>"]
    for k, c in enumerate(cols):
        name = f"<a href=\"{esc(c['link'])}\">{esc(c['name'])}</a>" if c["link"] and not c["missing"] else esc(c["name"])
        if c["missing"]:
            head.append(f"<tr class=\"missing\"><td>{name}</td><td><code>{esc(c['dir'])}</code></td>"
                        f"<td colspan=\"3\">not read: {esc(c['missing'])}</td></tr>")
        else:
            head.append(f"<tr><td>{name}</td><td><code>{esc(c['dir'])}</code></td>"
                        f"<td class=\"{css_class({0: 'pass', 1: 'fail'}.get(c['exit_code'], 'unfinished'))}\">"
                        f"{esc(c['exit_code'])}</td><td>{c['summary'].get('total', 0)}</td><td>{_fails(m, k)}</td></tr>")
    head.append("</table>")
    present = [o for o in OUTCOME_ORDER if any(x and x["outcome"] == o for r in m["rows"] for x in r["cells"])]
    head.append("<form class=\"filters\" id=\"filters\" onsubmit=\"return false\"><fieldset><legend>tier</legend>"
                + "".join(f"<label><input type=\"checkbox\" name=\"tier\" value=\"{t}\" checked> {t}</label>"
                          for t in ("spec", "interpretation", "extension"))
                + "</fieldset><label><input type=\"checkbox\" id=\"differ\"> only clauses where the implementations "
                "differ</label> <span class=\"chips\">"
                + "".join(f"<span class=\"{css_class(o)}\">{esc(SIGN.get(o) or '')} {esc(o)}</span>" for o in present)
                + "</span> <span id=\"shown\" class=\"mute\"></span></form>")
    body = ["<table class=\"matrix\" id=\"matrix\"><thead><tr><th>Clause</th><th>Level</th>"
            + "".join(f"<th>{esc(c['name'])}</th>" for c in cols) + "</tr></thead><tbody>"]
    for r in m["rows"]:
        tds = []
        for c, x in zip(cols, r["cells"]):
            if x is None:
                tds.append("<td class=\"cell o-none\"></td>")
                continue
            sign = esc(SIGN.get(x["outcome"], x["outcome"]))
            tip = esc(f"{c['name']}: {x['outcome']}" + (f" ({x['test']}: {x['message']})" if x["test"] else ""))
            link = f"<a href=\"{esc(c['link'])}#{anchor(r['id'])}\">{sign}</a>" if c["link"] and sign else sign
            tds.append(f"<td class=\"cell {css_class(x['outcome'])}\" title=\"{tip}\">{link}</td>")
        differ = len({x["outcome"] for x in r["cells"] if x}) > 1
        body.append(f"<tr class=\"clause\" id=\"{anchor(r['id'])}\" data-tier=\"{esc(r['tier'] or 'spec')}\" "
                    f"data-differ=\"{int(differ)}\"><td class=\"id\">{esc(r['id'])}</td><td>{esc(r['level'] or '')}</td>"
                    + "".join(tds) + "</tr>")
    body.append("</tbody></table>")
    script = r"""
(function(){
const rows=[...document.querySelectorAll('#matrix tr.clause')],shown=document.getElementById('shown');
function apply(){
  const tiers=new Set([...document.querySelectorAll('#filters input[name=tier]')].filter(i=>i.checked).map(i=>i.value));
  const differ=document.getElementById('differ').checked;let n=0;
  for(const r of rows){const s=tiers.has(r.dataset.tier)&&(!differ||r.dataset.differ==='1');r.hidden=!s;if(s)n++;}
  shown.textContent=n+' of '+rows.length+' clauses shown';
}
document.getElementById('filters').addEventListener('change',apply);apply();
})();
"""
    return page("stdio Bus interop matrix", "\n".join(head + body), script)


def write(out_dir: str, runs: list[dict]) -> dict:
    """OUT/matrix.html and OUT/matrix.md; returns the matrix."""
    m = build(runs)
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "matrix.md"), "w", encoding="utf-8") as f:
        f.write(matrix_md(m))
    with open(os.path.join(out_dir, "matrix.html"), "w", encoding="utf-8") as f:
        f.write(matrix_html(m))
    return m
