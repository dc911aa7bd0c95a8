"""What the HTML pages share (report.html, matrix.html): escaping, the
colour of each outcome, the style sheet and the page's frame. One
self-contained file: no network, no CDN, style and script inline, so a page
opens from a CI artifact or file://."""

from __future__ import annotations

import html
import json
import re

# Outcomes of a test or a clause, worst first: the colour key and the order of the filters.
OUTCOME_ORDER = ("fail", "harness-error", "warn", "xfail", "unfinished", "blocked", "pass", "unsupported",
                 "skipped", "not judged", "not run", "untested", "excluded")
# what a cell that opens its tests shows: a failure, or what kept the test from a verdict
OPENS = ("fail", "harness-error", "warn", "xfail", "unfinished")
SIGN = {"pass": "✓", "fail": "✗", "warn": "!", "xfail": "x", "blocked": "■", "unsupported": "–",
        "skipped": "·", "harness-error": "H", "unfinished": "…", "not judged": "?", "not run": "",
        "untested": "∅", "excluded": "ex"}


def esc(text) -> str:
    return html.escape("" if text is None else str(text), quote=True)


def css_class(outcome: str) -> str:
    """'not judged' -> 'o-not-judged'."""
    return "o-" + re.sub(r"[^a-z]+", "-", (outcome or "none").lower()).strip("-")


def anchor(cid: str) -> str:
    """The id of a clause's row: report.html#c-SB-6.1-1 (matrix.html links to it)."""
    return "c-" + re.sub(r"[^A-Za-z0-9.-]", "_", cid)


def script_json(value) -> str:
    """JSON safe inside a <script> element."""
    return json.dumps(value, ensure_ascii=False).replace("</", "<\\/").replace("<!--", "<\\!--")


STYLE = """
:root{--fg:#1d232a;--mute:#5b6570;--line:#d7dce1;--bg:#fff;--soft:#f4f6f8}
*{box-sizing:border-box}
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:var(--fg);background:var(--bg);
 margin:0;padding:0 1.5rem 4rem}
header.top{padding:1rem 0 .5rem;border-bottom:1px solid var(--line);margin-bottom:1rem}
h1{font-size:1.4rem;margin:.2rem 0}
h2{font-size:1.15rem;margin:1.8rem 0 .6rem;border-bottom:1px solid var(--line);padding-bottom:.2rem}
h3{font-size:1rem;margin:1rem 0 .4rem}
code,pre,.mono{font-family:ui-monospace,"DejaVu Sans Mono",Menlo,Consolas,monospace;font-size:12.5px}
pre{background:var(--soft);padding:.5rem .7rem;border-radius:4px;overflow:auto;white-space:pre-wrap;
 word-break:break-all;margin:.3rem 0}
.mute{color:var(--mute)}
.verdict{border-radius:6px;padding:.8rem 1rem;margin:.6rem 0;border:1px solid}
.verdict.exit-0{background:#e8f6ec;border-color:#7cc08f}
.verdict.exit-1{background:#fdecec;border-color:#e08a8a}
.verdict.exit-2{background:#fff5db;border-color:#e0b84d}
.verdict .big{font-size:1.15rem;font-weight:600}
.banner{border-radius:6px;padding:.6rem 1rem;margin:.6rem 0;background:#fff5db;border:1px solid #e0b84d;
 font-weight:600}
ul.tight{margin:.3rem 0;padding-left:1.3rem}
table{border-collapse:collapse;margin:.4rem 0}
th,td{border:1px solid var(--line);padding:.2rem .45rem;text-align:left;vertical-align:top}
th{background:var(--soft);font-weight:600}
.chips span{display:inline-block;border-radius:10px;padding:0 .55rem;margin:0 .25rem .25rem 0;font-size:12.5px}
.o-pass{background:#cdebd5}.o-fail{background:#f3a6a6}.o-warn{background:#fbd38d}.o-xfail{background:#e3d3f5}
.o-blocked{background:#a9a39a;color:#fff}.o-unsupported{background:#e4e7ea}.o-skipped{background:#eef0f2}
.o-harness-error{background:#e67ed0}.o-unfinished{background:#fff0a8}.o-not-judged{background:#e4e7ea}
.o-not-run{background:#fff}.o-untested{background:repeating-linear-gradient(45deg,#fff,#fff 3px,#f1c2c2 3px,#f1c2c2 5px)}
.o-excluded{background:#f7f7f7;color:#888}
table.matrix td.cell{text-align:center;min-width:3.2rem;font-weight:600}
table.matrix td.cell.opens{cursor:pointer;text-decoration:underline dotted}
table.matrix td.cell.opens:hover{outline:2px solid #333}
table.matrix tr.sec th{background:#e9edf1;text-align:left}
table.matrix td.id{white-space:nowrap}
table.matrix td.stmt{max-width:40rem;color:var(--mute);font-size:12.5px;white-space:nowrap;overflow:hidden;
 text-overflow:ellipsis}
.filters{position:sticky;top:0;background:var(--bg);padding:.4rem 0;border-bottom:1px solid var(--line);z-index:2}
.filters fieldset{display:inline-block;border:1px solid var(--line);border-radius:4px;margin:0 .4rem .3rem 0;
 padding:.1rem .5rem}
.filters label{margin-right:.5rem;white-space:nowrap}
#detail{position:fixed;top:0;right:0;width:min(64rem,70vw);height:100vh;overflow:auto;background:var(--bg);
 border-left:2px solid #889;box-shadow:-4px 0 12px rgba(0,0,0,.15);padding:.6rem 1rem 3rem;z-index:5}
#detail[hidden]{display:none}
#detail .close{float:right;font-size:1rem}
table.transcript{width:100%;table-layout:fixed;font-family:ui-monospace,"DejaVu Sans Mono",monospace;font-size:12px}
table.transcript td{padding:.05rem .3rem;word-break:break-all;white-space:pre-wrap}
table.transcript col.t{width:5.5rem}
table.transcript td.t{text-align:right;color:var(--mute)}
table.transcript td.src{color:var(--mute);font-size:11px}
tr.l-client td.client{background:#eaf2fd}tr.l-worker td.worker{background:#eefaf0}
tr.l-daemon td.daemon{background:#fdf6e7}tr.l-harness td.daemon{background:#f1f1f1;font-style:italic}
details.test{border:1px solid var(--line);border-radius:4px;margin:.4rem 0;padding:.2rem .6rem}
details.test summary{cursor:pointer}
"""


def page(title: str, body: str, script: str = "") -> str:
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            f"<title>{esc(title)}</title><style>{STYLE}</style></head>\n<body>\n{body}\n"
            + (f"<script>{script}</script>\n" if script else "") + "</body></html>\n")


def chips(counts: dict) -> str:
    return "<div class=\"chips\">" + "".join(
        f"<span class=\"{css_class(o)}\">{esc(o)} {counts[o]}</span>"
        for o in OUTCOME_ORDER if counts.get(o)) + "</div>"


def section_key(s: str):
    """Numbers in numeric order, then the lettered sections (A, B, C, I, X)."""
    return [(0, int(p), "") if p.isdigit() else (1, 0, p) for p in re.findall(r"[0-9]+|[A-Za-z]+", s or "")]
