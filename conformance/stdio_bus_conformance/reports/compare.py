"""Two runs compared (run.py --compare OLD_DIR NEW_DIR): which clauses newly
fail, which newly pass, which changed otherwise, from each run's results.json
data. compare() is a plain function of the two; lines(), compare_md() and
compare_html() draw its result for the console, compare.md and report.html."""

from __future__ import annotations

from .page import anchor, css_class, esc, section_key

FAILING = ("fail", "warn", "xfail", "harness-error")


def clause_outcomes(data: dict) -> dict:
    """clause id -> {"outcome", "tier", "level", "tests" (failing), "message"}
    of one run: its coverage's clauses, else the clauses its failing tests are
    judged by."""
    out = {}
    cov = data.get("coverage") or {}
    for c in cov.get("clauses") or []:
        out[c["id"]] = {"outcome": c["outcome"] if c.get("status") == "tested" else c.get("status", "not run"),
                        "tier": c.get("tier"), "level": c.get("level"), "tests": list(c.get("failing_tests") or []),
                        "section": c.get("section", "")}
    if not out:
        for t in data.get("tests", []):
            for cid in t.get("clauses", []):
                judged = t.get("clause") in (None, cid) or t["outcome"] not in ("fail", "warn", "xfail")
                o = t["outcome"] if judged else "not judged"
                cur = out.setdefault(cid, {"outcome": "not run", "tier": None, "level": None, "tests": [],
                                           "section": cid[3:].rsplit("-", 1)[0]})
                if o in FAILING and cur["outcome"] not in FAILING or cur["outcome"] in ("not run", "not judged"):
                    cur["outcome"] = o
                if o in FAILING:
                    cur["tests"].append(t["nodeid"])
    messages = {t["nodeid"]: t.get("message") or "" for t in data.get("tests", [])}
    for v in out.values():
        v["message"] = messages.get(v["tests"][0], "") if v["tests"] else ""
    return out


def _who(data: dict, where: str) -> dict:
    return {"dir": where, "daemon": data.get("daemon"), "started_at": data.get("started_at"),
            "exit_code": data.get("exit_code"), "summary": data.get("summary") or {}}


def compare(old: dict, new: dict, old_dir: str = "", new_dir: str = "") -> dict:
    """The clauses whose outcome differs between two runs, in three lists:
    newly_failing (failing now, not before), newly_passing (passing now,
    failing before) and changed (any other difference: judged before and
    not now, a new clause...). Each entry: id, old, new, tier, level, tests,
    message. Also the tests that fail now and did not before (new_tests)."""
    a, b = clause_outcomes(old), clause_outcomes(new)
    diff = {"old": _who(old, old_dir), "new": _who(new, new_dir),
            "newly_failing": [], "newly_passing": [], "changed": []}
    for cid in sorted(set(a) | set(b), key=lambda c: (section_key((b.get(c) or a.get(c))["section"]),
                                                     section_key(c[3:]))):
        o = (a.get(cid) or {}).get("outcome", "absent")
        n = (b.get(cid) or {}).get("outcome", "absent")
        if o == n:
            continue
        src = b.get(cid) or a.get(cid)
        entry = {"id": cid, "old": o, "new": n, "tier": src.get("tier"), "level": src.get("level"),
                 "tests": (b.get(cid) or {}).get("tests") or (a.get(cid) or {}).get("tests") or [],
                 "message": (b.get(cid) or {}).get("message") or ""}
        if n in FAILING and o not in FAILING:
            diff["newly_failing"].append(entry)
        elif n == "pass" and o in FAILING:
            diff["newly_passing"].append(entry)
        else:
            diff["changed"].append(entry)
    was = {t["nodeid"]: t["outcome"] for t in old.get("tests", [])}
    diff["new_tests"] = [t["nodeid"] for t in new.get("tests", [])
                         if t["outcome"] in FAILING and was.get(t["nodeid"]) not in FAILING]
    return diff


def headline(diff: dict) -> str:
    return (f"{len(diff['newly_failing'])} clause(s) newly failing, {len(diff['newly_passing'])} newly passing, "
            f"{len(diff['changed'])} changed otherwise")


def lines(diff: dict, limit: int = 40) -> list[str]:
    """The console's lines."""
    out = [f"compare: {diff['old']['dir']} (exit {diff['old']['exit_code']}) -> {diff['new']['dir']} "
           f"(exit {diff['new']['exit_code']}): {headline(diff)}"]
    for key, word in (("newly_failing", "NEWLY FAILING"), ("newly_passing", "newly passing"), ("changed", "changed")):
        for e in diff[key][:limit]:
            first = f" ({e['tests'][0]})" if key == "newly_failing" and e["tests"] else ""
            out.append(f"  {word}: {e['id']} {e['old']} -> {e['new']}{first}")
        if len(diff[key]) > limit:
            out.append(f"  ... and {len(diff[key]) - limit} more {word} (compare.md)")
    return out


def compare_md(diff: dict) -> str:
    def md(text):
        return (text or "").replace("|", "\\|").replace("\n", " ")
    out = ["# stdio Bus conformance: two runs compared", "",
           f"- old: `{diff['old']['dir']}` ({diff['old']['started_at']}, exit {diff['old']['exit_code']}), "
           f"daemon `{diff['old']['daemon']}`",
           f"- new: `{diff['new']['dir']}` ({diff['new']['started_at']}, exit {diff['new']['exit_code']}), "
           f"daemon `{diff['new']['daemon']}`",
           f"- **{headline(diff)}**", ""]
    for key, title in (("newly_failing", "Newly failing"), ("newly_passing", "Newly passing"),
                       ("changed", "Changed otherwise")):
        out += [f"## {title} ({len(diff[key])})", ""]
        if not diff[key]:
            out += ["none", ""]
            continue
        out += ["| Clause | Tier | Level | Old | New | Test | Message |", "|---|---|---|---|---|---|---|"]
        out += [f"| {e['id']} | {e['tier'] or ''} | {e['level'] or ''} | {e['old']} | {e['new']} | "
                f"{('`' + e['tests'][0] + '`') if e['tests'] else ''} | {md(e['message'].splitlines()[0] if e['message'] else '')[:200]} |"
                for e in diff[key]]
        out.append("")
    if diff.get("new_tests"):
        out += [f"## Tests failing now and not before ({len(diff['new_tests'])})", ""]
        out += [f"- `{t}`" for t in diff["new_tests"]] + [""]
    return "\n".join(out)


def compare_html(diff: dict) -> str:
    """The section report.html shows when it is compared with an older run."""
    out = ["<section id=\"compare\"><h2>Changes since the run in "
           f"<code>{esc(diff['old']['dir'])}</code></h2>",
           f"<p><strong>{esc(headline(diff))}</strong> (old run {esc(diff['old']['started_at'])}, exit "
           f"{esc(diff['old']['exit_code'])}; daemon <code>{esc(diff['old']['daemon'])}</code>)</p>"]
    for key, title in (("newly_failing", "Newly failing"), ("newly_passing", "Newly passing"),
                       ("changed", "Changed otherwise")):
        if not diff[key]:
            continue
        out.append(f"<h3>{title} ({len(diff[key])})</h3><table class=\"compare\" id=\"compare-{key.replace('_', '-')}\">"
                   "<tr><th>Clause</th><th>Old</th><th>New</th><th>Message</th></tr>")
        out += [f"<tr><td><a href=\"#{anchor(e['id'])}\">{esc(e['id'])}</a></td>"
                f"<td class=\"{css_class(e['old'])}\">{esc(e['old'])}</td><td class=\"{css_class(e['new'])}\">"
                f"{esc(e['new'])}</td><td>{esc((e['message'].splitlines() or [''])[0][:300])}</td></tr>"
                for e in diff[key]]
        out.append("</table>")
    return "\n".join(out) + "</section>"
