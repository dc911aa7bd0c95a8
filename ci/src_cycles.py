#!/usr/bin/env python3
"""Cycles between the daemon's source files (issue 33): every call from one
src/ file into another, read from the objects' symbol tables (nm), and every
#include "..." between src/ files; and every such edge that goes up a floor
(src/'s folders, lowest first). A cycle (a strongly connected group of more
than one file) means two concerns lean on each other, so neither can be
read, tested or moved alone. Exits 1 naming each cycle and the edges in it, and each edge up a floor.

usage: src_cycles.py OBJECT...   (the objects of src/'s .c files, e.g.
       build/CMakeFiles/sb_floor_*.dir/src/*/*.o; ctest passes them from
       the build: $<TARGET_OBJECTS:sb_floor_...>)"""

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
# src/'s folders, lowest first (CMakeLists.txt's SB_FLOORS); main.c is above them all
FLOORS = ["base", "os", "cfg", "route", "bus", "daemon"]


def floor_of(name: str) -> int:
    first = name.split("/", 1)[0]
    return FLOORS.index(first) if "/" in name and first in FLOORS else len(FLOORS)


def source_name(obj: Path) -> str:
    """floor/x.c for .../sb_floor_floor.dir/src/floor/x.c.o"""
    parts = obj.parts
    if "src" not in parts:
        return obj.name[:-2]
    i = len(parts) - 1 - parts[::-1].index("src")
    return "/".join(parts[i + 1:])[:-2]


def nm(objects: list, *flags: str) -> dict:
    """{object: [its nm lines]}: one nm over every object (-A names each
    line's object), not one per object, so a loaded machine runs 2, not 200"""
    out = subprocess.run(["nm", "-A", *flags, *map(str, objects)], capture_output=True,
                         text=True, check=True).stdout
    lines = {str(obj): [] for obj in objects}
    for line in out.splitlines():
        obj, _, rest = line.partition(": ") if ": " in line else line.partition(":")
        if obj in lines and rest.strip():
            lines[obj].append(rest)
    return lines


def call_edges(objects: list) -> dict:
    """{file: {file it calls into: [symbols]}}, files named as in src/"""
    defined, undefined = {}, {}
    objects = sorted(objects)
    for obj, lines in nm(objects, "--defined-only", "-g").items():
        for line in lines:
            parts = line.split()
            if len(parts) == 3:
                defined[parts[2]] = source_name(Path(obj))
    for obj, lines in nm(objects, "--undefined-only").items():
        undefined[source_name(Path(obj))] = [line.split()[-1] for line in lines]
    edges = {}
    for name, syms in undefined.items():
        for s in syms:
            to = defined.get(s)
            if to and to != name:
                edges.setdefault(name, {}).setdefault(to, []).append(s)
    return edges


def include_edges(src: Path) -> dict:
    """{file: {file it includes: []}} between src/ files (headers included),
    named as in src/ (floor/x.h). A bare name is found as the compiler finds
    it: beside the includer first, then in any folder of src/."""
    files = sorted(f for f in src.rglob("*.[ch]"))
    by_name = {}
    for f in files:
        by_name.setdefault(f.name, f)
    edges = {}
    for f in files:
        for inc in INCLUDE.findall(f.read_text()):
            target = f.parent / inc
            if not target.exists():
                target = by_name.get(Path(inc).name, src / inc)
            if target.exists():
                edges.setdefault(str(f.relative_to(src)), {})[str(target.resolve().relative_to(src.resolve()))] = []
    return edges


def cycles(edges: dict) -> list:
    """Strongly connected groups of more than one node (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []
    nodes = set(edges) | {t for e in edges.values() for t in e}

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in edges.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                out.append(sorted(group))

    sys.setrecursionlimit(10000)
    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return out


def report(kind: str, edges: dict) -> int:
    found = cycles(edges)
    for group in found:
        print(f"src-cycles: {kind} cycle between {', '.join(group)}:")
        for a in group:
            for b, syms in sorted(edges.get(a, {}).items()):
                if b in group:
                    print(f"  {a} -> {b}" + (f" ({', '.join(sorted(set(syms))[:4])})" if syms else ""))
    return len(found)


def upward(kind: str, edges: dict) -> int:
    """Edges from a floor to a floor above it. The build refuses such an
    include; a call can still be made through a declaration written by hand."""
    n = 0
    for a, targets in sorted(edges.items()):
        for b, syms in sorted(targets.items()):
            if floor_of(b) > floor_of(a):
                n += 1
                print(f"src-cycles: {kind} up a floor: {a} -> {b}" + (f" ({', '.join(sorted(set(syms))[:4])})" if syms else ""))
    return n


def main() -> int:
    objects = [Path(a) for a in sys.argv[1:]]
    if not objects:
        print(__doc__, file=sys.stderr)
        return 2
    calls, includes = call_edges(objects), include_edges(ROOT / "src")
    n = report("call", calls) + report("include", includes)
    up = upward("call", calls) + upward("include", includes)
    print(f"src-cycles: {n} cycle(s), {up} edge(s) up a floor")
    return 1 if n or up else 0


if __name__ == "__main__":
    sys.exit(main())
