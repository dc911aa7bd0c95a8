#!/usr/bin/env python3
"""Turns a mutant written as a patch (`# breaks: <clauses>` first line, then a
unified diff of src/) into its description (describe.py): each hunk becomes
a [[change]] inside the function that encloses it in the current src/, its
changed lines the text to find, widened by unchanged lines until that text
occurs once in the function. Used once to convert the mutants (issue 33,
item 5); kept because a `git diff` of src/ is still the easiest way to write
a new one.

    conformance/mutants/convert_patches.py [--prove] [--keep-going] [PATCH ...]

Without PATCH, converts every *.patch of this folder. Each description is
written beside its patch as NAME.toml. --prove then applies the patch
(`patch -p1`) to one scratch copy of src/ and the description to another
and compares the two trees byte for byte; exit 1 when one differs or a
patch cannot be converted.
"""
import argparse
import filecmp
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE))
import describe  # noqa: E402


class ConvertError(Exception):
    pass


def parse(path: Path) -> tuple[list[str], list[tuple[str, list]]]:
    """(breaks, [(file under the root, [(old start, [hunk lines])])])."""
    lines = path.read_text().splitlines(keepends=True)
    if not lines[0].startswith("# breaks:"):
        raise ConvertError(f"{path.name}: first line must be '# breaks: SB-...'")
    breaks = lines[0].split(":", 1)[1].replace(",", " ").split()
    files, i = [], 1
    while i < len(lines):
        ln = lines[i]
        if ln.startswith("+++ "):
            files.append((ln[4:].split("\t")[0].strip().split("/", 1)[1], []))
        elif ln.startswith("@@"):
            m = re.match(r"@@ -(\d+)(?:,(\d+))? \+\d+(?:,(\d+))? @@", ln)
            old_n = int(m.group(2) or 1)
            new_n = int(m.group(3) or 1)
            body = []
            while old_n or new_n:
                i += 1
                h = lines[i]
                if h.startswith("\\"):
                    continue
                body.append(h)
                old_n -= h[0] in " -"
                new_n -= h[0] in " +"
            files[-1][1].append((int(m.group(1)), body))
        i += 1
    return breaks, files


def _locate(text_lines: list[str], old: list[str], near: int) -> int:
    """Where patch would put a hunk: the match of its old lines nearest the
    line it names (0-based)."""
    n = len(old)
    hits = [k for k in range(len(text_lines) - n + 1) if text_lines[k:k + n] == old]
    if not hits:
        raise ConvertError(f"hunk near line {near + 1} does not match the current file")
    return min(hits, key=lambda k: abs(k - near))


def _symbol(changed: list[str]) -> str | None:
    """What a change outside every function is about: the macro it defines,
    the header it includes, or the variable or type it declares."""
    for ln in changed:
        s = ln[1:].strip()
        m = (re.match(r"#\s*define\s+(\w+)", s) or re.match(r"#\s*include\s*[<\"]([^>\"]+)", s)
             or re.match(r"[\w\s*]*?\b(\w+)\s*\(.*\)\s*\{$", s)
             or re.match(r"[^=(;]*?\b(\w+)\s*(?:\[[^\]]*\]\s*)*(?:=|;|\{)", s))
        if m:
            return m.group(1)
    return None


def convert(path: Path, src_root: Path = ROOT) -> str:
    """The description of one patch, as TOML text."""
    breaks, files = parse(path)
    name = path.stem
    current = describe.sources(src_root / "src")
    changes = []
    for rel, hunks in files:
        fpath = src_root / rel
        text_lines = current[fpath].splitlines(keepends=True)
        shift = 0  # lines the earlier hunks of this file added
        for old_start, body in hunks:
            old = [h[1:] for h in body if h[0] in " -"]
            at = _locate(text_lines, old, old_start - 1 + shift)
            shift = at - (old_start - 1)
            for first, last in _pieces(body, "".join(text_lines), at):
                # the body's lines before this piece are in the text as the patch leaves them
                s = at + sum(h[0] in " +" for h in body[:first])
                e = s + sum(h[0] in " -" for h in body[first:last + 1])
                new_core = [h[1:] for h in body[first:last + 1] if h[0] in " +"]
                where = _where("".join(text_lines), s, e)
                changes.append((fpath, _widen(name, current, fpath, text_lines, s, e, new_core, where,
                                              body[first:last + 1])))
                text_lines[s:e] = new_core
                current = {**current, fpath: "".join(text_lines)}
    for fpath, c in changes:  # an #include goes with the function the mutant changes in that file
        if c.file_of:
            c.file_of = next((d.function for p, d in changes if d.function and p == fpath), c.file_of)
    return render(breaks, [c for _, c in changes])


def _pieces(body: list[str], text: str, at: int) -> list[tuple[int, int]]:
    """The stretches of a hunk to describe as one change each: the whole hunk
    from its first changed line to its last, or, when that crosses the edge
    of a function (a helper added before the function it serves), each run
    of changed lines on its own."""
    changed = [k for k, h in enumerate(body) if h[0] != " "]
    s = at + changed[0]
    e = s + sum(h[0] in " -" for h in body[changed[0]:changed[-1] + 1])
    try:
        _where(text, s, e)
        return [(changed[0], changed[-1])]
    except ConvertError:
        runs = []
        for k in changed:
            if runs and runs[-1][1] == k - 1:
                runs[-1][1] = k
            else:
                runs.append([k, k])
        return [tuple(r) for r in runs]


def _where(text: str, s: int, e: int) -> str | None:
    """The function whose definition holds lines s..e (0-based, e exclusive;
    e == s: an insertion before line s), None when outside every function."""
    lo = sum(len(x) for x in text.splitlines(keepends=True)[:s])
    hi = lo + sum(len(x) for x in text.splitlines(keepends=True)[s:e])
    for f in describe.functions(text):
        if (f.start <= lo and hi <= f.end) if e > s else (f.start < lo < f.end):
            return f.name
        if f.start < hi and lo < f.end and not (f.start <= lo and hi <= f.end):
            raise ConvertError(f"a hunk crosses the edge of {f.name}")
    return None


def _widen(name, current, fpath, text_lines, s, e, new_core, function, core_body):
    """The change for lines s..e of fpath, with unchanged lines either side
    added until its text occurs once where describe.py will look."""
    symbol = None if function else _symbol([h for h in core_body if h[0] != " "])
    if not function and not symbol:
        raise ConvertError(f"a hunk at line {s + 1} of {fpath.name} is outside every function and names nothing")
    include = bool(symbol) and any(re.match(r"[-+]\s*#\s*include", h) for h in core_body)
    before, after = 0, 0
    for step in range(200):
        find = "".join(text_lines[s - before:e + after])
        replace = "".join(text_lines[s - before:s] + new_core + text_lines[e:e + after])
        change = describe.Change(find=find, replace=replace, function=function, symbol=symbol,
                                 file_of=describe.functions(current[fpath])[0].name if include else None)
        if find.strip():
            try:
                describe.applied(describe.Mutant(name, [], [change]), current)
                return change
            except describe.MutantError:
                pass
        # alternate: a line before, then a line after (an insertion's anchor first above it)
        if s - before <= 0 and e + after >= len(text_lines):
            break
        if (step % 2 == 0 and s - before > 0) or e + after >= len(text_lines):
            before += 1
        else:
            after += 1
    raise ConvertError(f"no unique text for the hunk at line {s + 1} of {fpath.name}")


def _toml_text(s: str) -> str:
    """A multi-line literal string (backslashes stay as they are), its first
    newline the one TOML drops."""
    if "'''" in s:
        return '"""\n' + s.replace("\\", "\\\\").replace('"""', '""\\"') + '"""'
    return "'''\n" + s + "'''"


def render(breaks: list[str], changes: list) -> str:
    out = ["breaks = [" + ", ".join(f'"{b}"' for b in breaks) + "]"]
    for c in changes:
        out += ["", "[[change]]"]
        if c.function:
            out.append(f'function = "{c.function}"')
        else:
            out += ['scope = "file-level"', f'symbol = "{c.symbol}"']
            if c.file_of:
                out.append(f'file_of = "{c.file_of}"')
        out += ["find = " + _toml_text(c.find), "replace = " + _toml_text(c.replace)]
    return "\n".join(out) + "\n"


def prove(patch: Path, description: Path) -> list[str]:
    """The files that differ between src/ patched and src/ described (empty: the same)."""
    with tempfile.TemporaryDirectory(prefix="sb-convert-") as tmp:
        by_patch, by_text = Path(tmp) / "patch", Path(tmp) / "text"
        for tree in (by_patch, by_text):
            shutil.copytree(ROOT / "src", tree / "src")
        r = subprocess.run(["patch", "-s", "--no-backup-if-mismatch", "-p1", "-d", str(by_patch), "-i", str(patch)],
                           capture_output=True, text=True)
        if r.returncode:
            return [f"patch failed: {r.stdout}{r.stderr}"]
        try:
            describe.apply(describe.load(description), by_text / "src")
        except describe.MutantError as exc:
            return [str(exc)]
        return _differ(filecmp.dircmp(by_patch, by_text))


def _differ(cmp: filecmp.dircmp) -> list[str]:
    out = cmp.left_only + cmp.right_only + cmp.funny_files
    out += [f for f in cmp.common_files
            if Path(cmp.left, f).read_bytes() != Path(cmp.right, f).read_bytes()]
    for sub in cmp.subdirs.values():
        out += _differ(sub)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("patches", nargs="*")
    ap.add_argument("--prove", action="store_true", help="compare the patched and the described trees")
    args = ap.parse_args()
    patches = [Path(p) for p in args.patches] or sorted(HERE.glob("*.patch"))
    if not patches:
        print(f"no patch given and none in {HERE}")
        return 2
    failed, same = [], 0
    for p in patches:
        target = p.with_suffix(".toml")
        try:
            target.write_text(convert(p))
        except (ConvertError, describe.MutantError, KeyError) as exc:
            failed.append(f"{p.stem}: cannot convert: {exc}")
            continue
        if args.prove:
            diff = prove(p, target)
            if diff:
                failed.append(f"{p.stem}: trees differ: {' '.join(diff)}")
            else:
                same += 1
    print("\n".join(failed))
    print(f"{len(patches) - sum('cannot convert' in f for f in failed)} of {len(patches)} converted"
          + (f"; {same} identical trees" if args.prove else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
