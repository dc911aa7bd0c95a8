#!/usr/bin/env python3
"""Mutants described by what they change, not by where (issue 33, item 5).

A mutant is `NN-name.toml` in this folder:

    breaks = ["SB-7.2-3"]              # the clauses it breaks (globs allowed)
    why = "..."                        # optional

    [[change]]
    function = "sb_clients_close"      # the C function the change is inside
    find = '''
            if (c->in_fd > STDERR_FILENO)
                close(c->in_fd);
    '''
    replace = '''
            (void)0; /* closed with the slot, later */
    '''

A change outside any function (a #define, a static table, an #include)
says `scope = "file-level"` and names the `symbol` it is about instead of a
function; its `find` must name that symbol, and it is looked for outside
every function body. An #include has no symbol of its own: `file_of = "fn"`
puts it among the top-level lines of the file that defines fn.

Applying searches every src/**/*.c and src/**/*.h for the function's
definition (wherever it lives, so a function moved to another file or lines
shifting leave the description valid) and replaces `find` (whole lines,
whitespace-exact; a block re-indented as a whole still matches, the
replacement re-indented alike) where it occurs exactly once. A function not
found, a text found nowhere or more than once raises MutantError naming the
mutant, the function and the text: never a silent skip.

    conformance/mutants/describe.py [--src DIR] [--check] [--apply NAME]

--check applies every mutant to the text of src/ in memory and lists those
that no longer apply (exit 1); with --compile it also compiles the files
each one changes (cc -fsyntax-only, in a scratch copy of src/) and lists
those that no longer build: a refactor that renames a field a replacement
names breaks the mutant, not the text it finds. --apply NAME rewrites the
files of --src.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import tomllib
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

HERE = Path(__file__).resolve().parent
SRC = HERE.parents[1] / "src"


class MutantError(Exception):
    """A description that does not apply to the tree it is given."""


@dataclass
class Change:
    find: str
    replace: str
    function: str | None = None
    symbol: str | None = None    # scope = "file-level"
    file_of: str | None = None   # file-level, in the file defining this function

    @property
    def where(self) -> str:
        if self.function:
            return f"function {self.function}"
        return f"file-level {self.symbol}" + (f" (the file of {self.file_of})" if self.file_of else "")


@dataclass
class Mutant:
    name: str
    breaks: list
    changes: list
    why: str = ""


@dataclass(frozen=True)
class Function:
    name: str
    start: int   # the start of the line naming it
    end: int     # past its closing brace and that line's newline


def mutant_paths(folder: Path = HERE) -> list[Path]:
    return sorted(folder.glob("*.toml"))


MUTANT_KEYS, CHANGE_KEYS = {"breaks", "why", "change"}, {"function", "scope", "symbol", "file_of", "find", "replace"}


def load(path: Path) -> Mutant:
    name = path.stem
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise MutantError(f"mutant {name}: {exc}") from exc
    breaks = data.get("breaks")
    if not breaks or not all(isinstance(b, str) and b.startswith("SB-") for b in breaks):
        raise MutantError(f"mutant {name}: breaks must list the clauses it breaks (SB-...)")
    if set(data) - MUTANT_KEYS:  # a misspelt key would otherwise be ignored
        raise MutantError(f"mutant {name}: unknown keys {sorted(set(data) - MUTANT_KEYS)}")
    changes = [_change(name, i, c) for i, c in enumerate(data.get("change", []), 1)]
    if not changes:
        raise MutantError(f"mutant {name}: no [[change]]")
    return Mutant(name, breaks, changes, data.get("why", ""))


def _change(name: str, i: int, c: dict) -> Change:
    ch = Change(find=c.get("find", ""), replace=c.get("replace", ""), function=c.get("function"),
                symbol=c.get("symbol"), file_of=c.get("file_of"))
    file_level = c.get("scope") == "file-level"
    problem = ""
    if set(c) - CHANGE_KEYS:
        problem = f"unknown keys {sorted(set(c) - CHANGE_KEYS)}"
    elif c.get("scope", "file-level") != "file-level":
        problem = 'the only scope is "file-level"'
    elif not ch.find:
        problem = "the text to find is empty"
    elif not ch.find.endswith("\n") or (ch.replace and not ch.replace.endswith("\n")):
        problem = "find and replace must be whole lines (end with a newline)"
    elif bool(ch.function) == file_level or (file_level and not ch.symbol):
        problem = 'a change names either a function or scope = "file-level" with a symbol'
    elif file_level and not re.search(rf"\b{re.escape(ch.symbol)}\b", ch.find + ch.replace):
        problem = f"a file-level change's text must name its symbol {ch.symbol}"
    if problem:
        raise MutantError(f"mutant {name}, change {i}: {problem}")
    return ch


# -- where functions are --------------------------------------------------------------------------
_SKIP = re.compile(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', re.S)


def _function_name(header: str) -> str | None:
    """The name a top-level `header {` defines, when it is a function (its
    header ends with a parameter list; a struct, enum or initializer does not)."""
    h = _SKIP.sub(" ", header).strip()
    if not h.endswith(")") or "=" in h:
        return None
    depth, names = 0, []
    for i, ch in enumerate(h):  # the identifier before each parameter list at depth 0
        if ch == "(":
            if depth == 0:
                m = re.search(r"([A-Za-z_]\w*)\s*$", h[:i])
                if m and m.group(1) != "__attribute__":
                    names.append(m.group(1))
            depth += 1
        elif ch == ")":
            depth -= 1
    return names[-1] if names else None


@lru_cache(maxsize=1024)  # every mutant looks through the same unchanged files
def functions(text: str) -> tuple[Function, ...]:
    """Every function definition of a C file, found by braces at top level
    (comments, strings and preprocessor lines skipped)."""
    out, depth, header_from, opened = [], 0, 0, None
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c in "/\"'":
            m = _SKIP.match(text, i)
            if m:
                i = m.end()
                continue
        elif c == "#" and text[text.rfind("\n", 0, i) + 1:i].strip() == "":
            while True:  # a directive, with its continuation lines
                j = text.find("\n", i)
                if j < 0 or not text[:j].endswith("\\"):
                    break
                i = j + 1
            i = n if j < 0 else j + 1
            if depth == 0:
                header_from = i
            continue
        elif c == "{":
            if depth == 0:
                name = _function_name(text[header_from:i])
                opened = None
                if name:
                    at = header_from + re.search(rf"\b{re.escape(name)}\s*\(", _blank(text[header_from:i])).start()
                    opened = (name, text.rfind("\n", 0, at) + 1)
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                end = i + 1
                if opened:
                    nl = text.find("\n", end)
                    end = n if nl < 0 else nl + 1
                    out.append(Function(opened[0], opened[1], end))
                    opened = None
                header_from = end
        elif c == ";" and depth == 0:
            header_from = i + 1
        i += 1
    return tuple(out)


def _blank(s: str) -> str:
    """s with comments and literals blanked to spaces (same length)."""
    return _SKIP.sub(lambda m: " " * len(m.group()), s)


def sources(src: Path) -> dict[Path, str]:
    return {p: p.read_text() for p in sorted(src.rglob("*")) if p.suffix in (".c", ".h") and p.is_file()}


# -- matching -------------------------------------------------------------------------------------
def _indent(line: str) -> str:
    return line[:len(line) - len(line.lstrip(" \t"))]


def _matches(text: str, lo: int, hi: int, find: str) -> list[tuple[int, int, str, str]]:
    """Where find occurs as whole lines in text[lo:hi]: (start, end, indent in
    find, indent in text). Exact first; else the same lines uniformly
    re-indented."""
    out, at = [], lo
    while (k := text.find(find, at, hi)) >= 0:
        if k == 0 or text[k - 1] == "\n":
            out.append((k, k + len(find), "", ""))
        at = k + 1
    if out:
        return out
    want = find.splitlines(keepends=True)
    have_from = text.rfind("\n", 0, lo) + 1 if lo else 0
    lines = text[have_from:hi].splitlines(keepends=True)
    if hi < len(text) and lines and not lines[-1].endswith("\n"):
        lines.pop()  # a line cut by the region's end is not whole
    offsets, pos = [], have_from
    for ln in lines:
        offsets.append(pos)
        pos += len(ln)
    first = next((w for w in want if w.strip()), None)
    if first is None:
        return []
    f_ind = _indent(first)
    for s in range(len(lines) - len(want) + 1):
        cand = lines[s + [w.strip() != "" for w in want].index(True)]
        t_ind = _indent(cand)
        if t_ind == f_ind:
            continue
        if all(w == h if not w.strip() else (w.startswith(f_ind) and h == t_ind + w[len(f_ind):])
               for w, h in zip(want, lines[s:s + len(want)])):
            out.append((offsets[s], offsets[s] + sum(map(len, lines[s:s + len(want)])), f_ind, t_ind))
    return out


def _reindent(text: str, f_ind: str, t_ind: str) -> str:
    if f_ind == t_ind:
        return text
    return "".join(t_ind + ln[len(f_ind):] if ln.strip() and ln.startswith(f_ind) else ln
                   for ln in text.splitlines(keepends=True))


def _top_level(text: str) -> list[tuple[int, int]]:
    """The stretches of a file outside every function definition."""
    out, at = [], 0
    for f in functions(text):
        out.append((at, f.start))
        at = f.end
    return out + [(at, len(text))]


def applied(mutant: Mutant, files: dict[Path, str]) -> dict[Path, str]:
    """The new text of each file the mutant changes (files is not modified)."""
    files = dict(files)
    changed = {}
    for i, ch in enumerate(mutant.changes, 1):
        what = f"mutant {mutant.name}, change {i} ({ch.where})"
        if ch.function:
            regions = [(p, f.start, f.end) for p, t in files.items() for f in functions(t) if f.name == ch.function]
            if not regions:
                raise MutantError(f"{what}: no definition of {ch.function} in any src/**/*.c or *.h")
        else:
            scope = files
            if ch.file_of:
                scope = {p: t for p, t in files.items() if any(f.name == ch.file_of for f in functions(t))}
                if not scope:
                    raise MutantError(f"{what}: no definition of {ch.file_of} in any src/**/*.c or *.h")
            regions = [(p, lo, hi) for p, t in scope.items() for lo, hi in _top_level(t)]
        hits = [(p, m) for p, lo, hi in regions for m in _matches(files[p], lo, hi, ch.find)]
        if len(hits) != 1:
            where = ", ".join(f"{p.name}:{n}" for p, n in sorted({(p, files[p].count("\n", 0, m[0]) + 1)
                                                                for p, m in hits}))
            raise MutantError(f"{what}: the text to find occurs {len(hits)} times in it"
                              f"{' (' + where + ')' if where else ''}, not once:\n{_quote(ch.find)}")
        p, (start, end, f_ind, t_ind) = hits[0]
        files[p] = changed[p] = files[p][:start] + _reindent(ch.replace, f_ind, t_ind) + files[p][end:]
    return changed


def _quote(text: str) -> str:
    lines = text.splitlines()
    return "\n".join("    | " + ln for ln in lines[:8]) + ("\n    | ..." if len(lines) > 8 else "")


def apply(mutant: Mutant, src: Path) -> dict[Path, str]:
    """Writes the mutant into the files under src; returns their original text
    (restore() puts it back). Nothing is written unless every change applies."""
    files = sources(src)
    changed = applied(mutant, files)
    for p, text in changed.items():
        p.write_text(text)
    return {p: files[p] for p in changed}


def restore(originals: dict[Path, str]) -> None:
    for p, text in originals.items():
        p.write_text(text)


def problems(folder: Path = HERE, src: Path = SRC) -> list[str]:
    """One message per mutant that does not load or apply to src."""
    files, out = sources(src), []
    for path in mutant_paths(folder):
        try:
            applied(load(path), files)
        except MutantError as exc:
            out.append(str(exc))
    return out


def _build_problem(name: str, root: Path, changed: list[Path], cc: str) -> str | None:
    """Compiles the .c files a mutant changed, and those including a header
    it changed, under root (a copy of src/ with the mutant written in)."""
    sources_c = sorted(root.rglob("*.c"))
    targets = {p for p in changed if p.suffix == ".c"}
    for h in (p for p in changed if p.suffix == ".h"):
        targets |= {c for c in sources_c if f'#include "{h.name}"' in c.read_text()}
    if not targets:
        return None
    includes = [f"-I{d}" for d in sorted({p.parent for p in root.rglob("*.h")})]
    cmd = [cc, "-std=gnu11", "-fsyntax-only", "-D_GNU_SOURCE", '-DSB_VERSION="mutant"',
           '-DSB_SPEC_VERSION="mutant"', "-Werror=implicit-function-declaration", "-Werror=incompatible-pointer-types",
           "-Werror=int-conversion", *includes, *map(str, sorted(targets))]
    run = subprocess.run(cmd, capture_output=True, text=True)
    if run.returncode == 0:
        return None
    errors = [ln for ln in run.stderr.splitlines() if "error" in ln][:4]
    return f"mutant {name}: its replacement does not build:\n" + "\n".join("    | " + e for e in errors)


def build_problems(folder: Path = HERE, src: Path = SRC, cc: str | None = None) -> list[str]:
    """One message per mutant that applies but whose changed files do not
    compile (those that do not apply are problems()'s)."""
    cc = cc or os.environ.get("CC") or shutil.which("cc") or "gcc"
    files, out = sources(src), []
    with tempfile.TemporaryDirectory(prefix="sb-mutants-") as tmp:
        root = Path(tmp)
        for p, text in files.items():
            (root / p.relative_to(src)).parent.mkdir(parents=True, exist_ok=True)
            (root / p.relative_to(src)).write_text(text)
        for path in mutant_paths(folder):
            try:
                mutant = load(path)
                changed = applied(mutant, files)
            except MutantError:
                continue
            copies = [root / p.relative_to(src) for p in changed]
            for p, text in changed.items():
                (root / p.relative_to(src)).write_text(text)
            try:
                problem = _build_problem(mutant.name, root, copies, cc)
            finally:
                for p in changed:
                    (root / p.relative_to(src)).write_text(files[p])
            if problem:
                out.append(problem)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--src", default=str(SRC))
    ap.add_argument("--check", action="store_true", help="list the mutants that do not apply to --src")
    ap.add_argument("--compile", action="store_true",
                    help="with --check: also compile what each mutant changes (cc -fsyntax-only)")
    ap.add_argument("--apply", metavar="NAME", help="write mutant NAME into the files of --src")
    args = ap.parse_args()
    src = Path(args.src).resolve()
    if args.apply:
        try:
            for p in apply(load(HERE / f"{args.apply}.toml"), src):
                print(p)
        except MutantError as exc:
            print(exc, file=sys.stderr)
            return 1
        return 0
    bad = problems(HERE, src) + (build_problems(HERE, src) if args.compile else [])
    done = "apply to" + (" and build in" if args.compile else "")
    print("\n".join(bad) if bad else f"all {len(mutant_paths())} mutants {done} {src}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
