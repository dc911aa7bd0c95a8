#!/usr/bin/python3
"""Parse and check the clause tables of SPEC.md.

    /usr/bin/python3 conformance/clauses_check.py SPEC.md [--json]

Exit 0 and print `N clauses: x MUST, y MUST NOT, ...` when every clause table
is well formed; exit 1 with one line per problem otherwise; exit 2 on a usage
error or an unreadable file. `--json` prints the clauses as a JSON array
instead of the summary.

The harness imports it:

    from clauses_check import parse_spec
    clauses = parse_spec("SPEC.md")   # [{id, level, statement, check, notes, section}]
    audit = parse_audit("SPEC.md")    # {id: {seed, forced, tests}} from "## Seed audit"

The seed audit (a table under `## Seed audit` with the header
`| ID | Seed | Forced | Tests check |`) must have one row per spec-tier
clause (every ID but SB-I-n and SB-X-n, retired ones included), name only
known spec-tier IDs, quote a seed sentence, and say Forced `yes`, `shared`,
`moved` or `n/a`. A file without that section is not audited (WORKER_SPEC.md).

Standard library only.
"""

import json
import re
import sys

__all__ = ["LEVELS", "CHECKS", "HEADER", "AUDIT_HEADER", "FORCED", "SpecError", "parse_spec", "parse_audit",
           "check_spec", "main"]

LEVELS = ("MUST", "MUST NOT", "SHOULD", "SHOULD NOT", "MAY", "RETIRED")
CHECKS = ("black-box", "inspection", "worker-side", "client-side")
HEADER = ("ID", "Level", "Statement", "Check", "Notes")
AUDIT_HEADER = ("ID", "Seed", "Forced", "Tests check")
AUDIT_HEADING = "seed audit"
FORCED = ("yes", "shared", "moved", "n/a")

# Pseudo-sections that are not spec sections: their IDs use a letter.
SPECIAL_SECTIONS = {"interpretations": "I", "extensions": "X"}

_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_NUMBERED = re.compile(r"^(\d+(?:\.\d+)*)\.?(?:\s|$)")
_APPENDIX = re.compile(r"^Appendix\s+([A-Z])\b")
_INTERP_PARA = re.compile(r"^SB-I-(\d+)\s+\S")
_ID = re.compile(r"^SB-((?:\d+(?:\.\d+)*)|[A-Z])-([1-9]\d*)$")
_REF = re.compile(r"\bSB-(?:\d+(?:\.\d+)*|[A-Z])-\d+\b")
_DELIM_CELL = re.compile(r"^:?-{3,}:?$")


class SpecError(ValueError):
    """SPEC.md is malformed; .problems holds one message per problem."""

    def __init__(self, path, problems):
        self.problems = list(problems)
        super().__init__("%s: %d problem(s):\n%s" % (path, len(self.problems), "\n".join(self.problems)))


def _split_row(line):
    """Splits a Markdown table row into cells; `\\|` is a literal pipe.
    Returns None when the line is not a table row."""
    text = line.strip()
    if not text.startswith("|"):
        return None
    cells, cur, i = [], [], 1
    while i < len(text):
        ch = text[i]
        if ch == "\\" and i + 1 < len(text) and text[i + 1] == "|":
            cur.append("|")
            i += 2
            continue
        if ch == "|":
            cells.append("".join(cur).strip())
            cur = []
        else:
            cur.append(ch)
        i += 1
    tail = "".join(cur).strip()
    if tail:  # no closing pipe: keep the last cell, but note it as malformed
        cells.append(tail)
        return cells, False
    return cells, True


def _heading_section(level, title):
    """Maps a heading to the section id it opens (None: not a clause section)."""
    m = _NUMBERED.match(title)
    if m:
        return m.group(1)
    m = _APPENDIX.match(title)
    if m and level == 2:
        return m.group(1)
    if level == 2 and title.strip().lower() in SPECIAL_SECTIONS:
        return SPECIAL_SECTIONS[title.strip().lower()]
    return None


def _scan(path):
    """Returns (clauses, problems, interpretation paragraph numbers); each clause
    dict also carries its line number under "_line"."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().splitlines()

    clauses, problems = [], []
    section = None          # section id of the nearest heading
    heading_depth = {}      # markdown level -> section id, for nesting checks
    in_fence = False
    table = None            # None, "clause" or "other"
    expect_delim = False
    interp_paras = {}
    top_section = None      # the "##" section we are in ("I" for Interpretations)

    for no, raw in enumerate(lines, 1):
        stripped = raw.strip()
        if stripped.startswith("```") or stripped.startswith("~~~"):
            in_fence = not in_fence
            table = None
            continue
        if in_fence:
            continue

        hm = _HEADING.match(raw)
        if hm:
            table = None
            depth, title = len(hm.group(1)), hm.group(2)
            if top_section == "I" and depth == 3:
                pm = _INTERP_PARA.match(title)
                if pm:
                    n = int(pm.group(1))
                    if n in interp_paras:
                        problems.append("line %d: duplicate paragraph for SB-I-%d" % (no, n))
                    interp_paras[n] = no
                    continue  # a paragraph heading does not open a clause section
            sec = _heading_section(depth, title)
            if depth == 2:
                top_section = sec
                heading_depth = {}
            elif depth > 2 and sec is not None and sec[0].isdigit():
                parent = heading_depth.get(depth - 1)
                if parent is not None and not sec.startswith(parent + "."):
                    problems.append("line %d: heading %s is not inside section %s" % (no, sec, parent))
                if sec.count(".") != depth - 2:
                    problems.append("line %d: section %s needs a heading of level %d, not %d"
                                    % (no, sec, sec.count(".") + 2, depth))
            if sec is not None:
                heading_depth[depth] = sec
            for d in [d for d in heading_depth if d > depth]:
                del heading_depth[d]
            section = sec
            continue

        split = _split_row(raw)
        if split is None:
            table = None
            continue
        cells, closed = split

        if table is None:
            # the first row of a table is its header
            if tuple(cells) == HEADER and closed:
                table = "clause"
                expect_delim = True
                if section is None:
                    problems.append("line %d: clause table outside a numbered section, "
                                    "Appendix, Interpretations or Extensions" % no)
            else:
                table = "other"
                if [c.lower() for c in cells] == [h.lower() for h in HEADER] or \
                        (cells and cells[0] == "ID" and "Level" in cells):
                    problems.append("line %d: clause table header must be exactly '| %s |'"
                                    % (no, " | ".join(HEADER)))
            continue
        if table != "clause":
            continue
        if expect_delim:
            expect_delim = False
            if len(cells) == len(HEADER) and all(_DELIM_CELL.match(c) for c in cells):
                continue
            problems.append("line %d: clause table header must be followed by a |---| row" % no)

        if not closed or len(cells) != len(HEADER):
            problems.append("line %d: malformed row: %d cells, expected %d%s"
                            % (no, len(cells), len(HEADER), "" if closed else " (no closing |)"))
            continue
        cid, level, statement, check, notes = cells
        clause = {"id": cid, "level": level, "statement": statement, "check": check,
                  "notes": notes, "section": section, "_line": no}
        clauses.append(clause)

        m = _ID.match(cid)
        if not m:
            problems.append("line %d: malformed ID %r (expected SB-<section>-<n>)" % (no, cid))
        elif section is not None and m.group(1) != section:
            problems.append("line %d: %s sits under section %s" % (no, cid, section))
        if level not in LEVELS:
            problems.append("line %d: %s: unknown Level %r (one of %s)" % (no, cid, level, ", ".join(LEVELS)))
        if check not in CHECKS:
            problems.append("line %d: %s: unknown Check %r (one of %s)" % (no, cid, check, ", ".join(CHECKS)))
        if not statement:
            problems.append("line %d: %s: empty Statement" % (no, cid))
        if (check != "black-box" or level == "RETIRED") and not notes:
            problems.append("line %d: %s: %s needs Notes giving the reason"
                            % (no, cid, "a RETIRED clause" if level == "RETIRED" else "a %s clause" % check))
    return clauses, problems, interp_paras


def _scan_audit(path):
    """Returns (rows, problems, present): the rows of the `## Seed audit`
    table as {id: {seed, forced, tests, _line}}, and whether the section
    exists at all."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().splitlines()
    rows, problems, present = {}, [], False
    in_section = in_fence = False
    state = None  # None, "header-seen", "rows"
    for no, raw in enumerate(lines, 1):
        stripped = raw.strip()
        if stripped.startswith("```") or stripped.startswith("~~~"):
            in_fence = not in_fence
            continue
        if in_fence:
            continue
        hm = _HEADING.match(raw)
        if hm:
            if len(hm.group(1)) <= 2:
                in_section = len(hm.group(1)) == 2 and hm.group(2).strip().lower() == AUDIT_HEADING
                present = present or in_section
            state = None
            continue
        if not in_section:
            continue
        split = _split_row(raw)
        if split is None:
            state = None
            continue
        cells, closed = split
        if state is None:
            if tuple(cells) == AUDIT_HEADER:
                state = "header-seen"
            else:
                problems.append("line %d: the seed audit table's header must be exactly '| %s |'"
                                % (no, " | ".join(AUDIT_HEADER)))
                state = "other"
            continue
        if state == "other":
            continue
        if state == "header-seen":
            state = "rows"
            if len(cells) == len(AUDIT_HEADER) and all(_DELIM_CELL.match(c) for c in cells):
                continue
            problems.append("line %d: the seed audit header must be followed by a |---| row" % no)
        if not closed or len(cells) != len(AUDIT_HEADER):
            problems.append("line %d: malformed seed audit row: %d cells, expected %d"
                            % (no, len(cells), len(AUDIT_HEADER)))
            continue
        cid, seed, forced, tests = cells
        if cid in rows:
            problems.append("line %d: seed audit: duplicate row for %s (first at line %d)"
                            % (no, cid, rows[cid]["_line"]))
            continue
        rows[cid] = {"seed": seed, "forced": forced, "tests": tests, "_line": no}
    return rows, problems, present


def _audit_problems(path, clauses):
    rows, problems, present = _scan_audit(path)
    if not present:
        return problems
    spec_tier = [c for c in clauses if c["section"] not in ("I", "X")]
    known = {c["id"] for c in spec_tier}
    for cid, row in rows.items():
        if cid not in known:
            problems.append("line %d: seed audit: %s is not a spec-tier clause of this file" % (row["_line"], cid))
        if row["forced"] not in FORCED:
            problems.append("line %d: seed audit: %s: Forced %r is not one of %s"
                            % (row["_line"], cid, row["forced"], ", ".join(FORCED)))
        if not row["seed"]:
            problems.append("line %d: seed audit: %s quotes no seed sentence" % (row["_line"], cid))
        if row["forced"] in ("shared", "moved") and not row["tests"]:
            problems.append("line %d: seed audit: %s is %s but does not say what the tests check"
                            % (row["_line"], cid, row["forced"]))
    for c in spec_tier:
        if c["id"] not in rows:
            problems.append("seed audit: spec-tier clause %s has no row" % c["id"])
    return problems


def parse_audit(path):
    """Returns the seed audit of SPEC.md: {id: {"seed", "forced", "tests"}}
    ({} when the file has no `## Seed audit` section)."""
    rows, _, _ = _scan_audit(path)
    return {k: {f: v[f] for f in ("seed", "forced", "tests")} for k, v in rows.items()}


_RESERVED = re.compile(r"\bSB-([A-Z])-(\d+)\.\.SB-\1-(\d+)\b")


def _reserved(path):
    """{section: numbers} set aside by lines starting `Reserved IDs:` (each
    range written `SB-I-49..SB-I-59`); such IDs may not be used by a row."""
    ranges = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.startswith("Reserved IDs:"):
                for sec, lo, hi in _RESERVED.findall(line):
                    ranges.setdefault(sec, set()).update(range(int(lo), int(hi) + 1))
    return ranges


def check_spec(path):
    """Parses SPEC.md. Returns (clauses, problems): clauses as parse_spec gives
    them, problems as a list of one-line messages (empty when the file is fine)."""
    clauses, problems, interp_paras = _scan(path)

    seen = {}
    numbers = {}
    for c in clauses:
        if c["id"] in seen:
            problems.append("line %d: duplicate ID %s (first at line %d)" % (c["_line"], c["id"], seen[c["id"]]))
            continue
        seen[c["id"]] = c["_line"]
        m = _ID.match(c["id"])
        if m:
            numbers.setdefault(m.group(1), []).append((int(m.group(2)), c["_line"]))

    # n counts from 1 within its section; retired IDs keep their place, so
    # there are never gaps, but for ranges that a "Reserved IDs:" line sets
    # aside for clauses being written on another branch.
    reserved = _reserved(path)
    for sec, ns in numbers.items():
        values = sorted(set(n for n, _ in ns) | reserved.get(sec, set()))
        expected = list(range(1, len(values) + 1))
        if values != expected:
            missing = sorted(set(expected) - set(values))
            problems.append("section %s: IDs are not numbered 1..%d without gaps%s"
                            % (sec, len(values), " (missing %s)" % ", ".join("SB-%s-%d" % (sec, n) for n in missing)
                               if missing else ""))

    interp = {int(_ID.match(c["id"]).group(2)) for c in clauses
              if c["section"] == "I" and _ID.match(c["id"])}
    for n in sorted(interp - set(interp_paras)):
        problems.append("SB-I-%d has no '### SB-I-%d <title>' paragraph" % (n, n))
    for n in sorted(set(interp_paras) - interp):
        problems.append("line %d: paragraph for SB-I-%d, which has no table row" % (interp_paras[n], n))

    # Every full clause ID mentioned anywhere outside code blocks must exist.
    known = set(seen) | {"SB-%s-%d" % (sec, n) for sec, ns in reserved.items() for n in ns}
    in_fence = False
    with open(path, encoding="utf-8") as f:
        for no, line in enumerate(f, 1):
            if line.lstrip().startswith(("```", "~~~")):
                in_fence = not in_fence
                continue
            if in_fence:
                continue
            for ref in _REF.findall(line):
                if ref not in known:
                    problems.append("line %d: reference to unknown clause %s" % (no, ref))

    problems += _audit_problems(path, clauses)

    public = [{k: c[k] for k in ("id", "level", "statement", "check", "notes", "section")} for c in clauses]
    return public, problems


def parse_spec(path, strict=True):
    """Returns the clauses of SPEC.md in file order, each a dict with keys
    id, level, statement, check, notes, section (section: "6.1.1", "B", "I"
    for interpretations, "X" for extensions). Cells are stripped and `\\|` is
    unescaped. With strict (the default) raises SpecError when the file has
    any problem that check_spec reports."""
    clauses, problems = check_spec(path)
    if strict and problems:
        raise SpecError(path, problems)
    return clauses


def summary(clauses):
    counts = {lvl: 0 for lvl in LEVELS}
    for c in clauses:
        if c["level"] in counts:
            counts[c["level"]] += 1
    parts = ["%d %s" % (counts[lvl], lvl) for lvl in LEVELS if counts[lvl]]
    return "%d clauses: %s" % (len(clauses), ", ".join(parts))


def main(argv=None):
    args = list(sys.argv[1:] if argv is None else argv)
    as_json = "--json" in args
    args = [a for a in args if a != "--json"]
    if len(args) != 1 or args[0].startswith("-"):
        print("usage: clauses_check.py SPEC.md [--json]", file=sys.stderr)
        return 2
    try:
        clauses, problems = check_spec(args[0])
    except OSError as e:
        print("%s: %s" % (args[0], e.strerror or e), file=sys.stderr)
        return 2
    except UnicodeDecodeError as e:
        print("%s: not UTF-8: %s" % (args[0], e), file=sys.stderr)
        return 2
    if problems:
        for p in problems:
            print("%s: %s" % (args[0], p))
        return 1
    if as_json:
        json.dump(clauses, sys.stdout, indent=1, ensure_ascii=False)
        sys.stdout.write("\n")
    else:
        print(summary(clauses))
    return 0


if __name__ == "__main__":
    sys.exit(main())
