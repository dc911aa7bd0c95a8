"""The clause registry: every requirement of SPEC.md (or, in worker mode,
of WORKER_SPEC.md, whose rows also carry a worker profile), by ID.

SPEC.md is parsed by ``clauses_check.parse_spec`` (conformance/clauses_check.py,
next to this package: the one parser of the clause tables, also the command
that checks them), which returns one dict per clause:
``{id, level, statement, check, notes, section}``. The registry adds the
queries the plugin needs: level of a set of IDs, section matching, coverage.
"""

from __future__ import annotations

import fnmatch
import importlib.util
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from ..common.errors import HarnessError
from ..common.location import SUITE_DIR

CONFORMANCE_DIR = SUITE_DIR  # run.py, tests/, profiles/, clauses_check.py: see location.py


def _load_clauses_check():
    """conformance/clauses_check.py, by its path: it is a script beside the
    package, not a module of it (the same module object when a caller
    already imported it by name)."""
    if "clauses_check" in sys.modules:
        return sys.modules["clauses_check"]
    where = importlib.util.spec_from_file_location("clauses_check", CONFORMANCE_DIR / "clauses_check.py")
    module = importlib.util.module_from_spec(where)
    where.loader.exec_module(module)
    sys.modules["clauses_check"] = module
    return module


clauses_check = _load_clauses_check()
MANDATORY = ("MUST", "MUST NOT")
# SB-<section>-<n>; letters for appendices (A, B, C), interpretations (I), extensions (X),
# and for the parts of WORKER_SPEC.md (W, T, J, F, R)
ID_RE = re.compile(r"^SB-(?:[0-9]+(?:\.[0-9]+)*|[A-Z])-[1-9][0-9]*$")

# WORKER_SPEC.md rows start their Notes with the worker profiles whose sources require
# them: "profiles: plain, jsonrpc, mcp 2025-03-26." (a name may be followed by MCP revisions)
_PROFILES_NOTE = re.compile(r"^profiles:\s*([^.]*)\.")
_PROFILE_ITEM = re.compile(r"^([a-z]+)((?:\s+\d{4}-\d{2}-\d{2})*)$")


@dataclass(frozen=True)
class Clause:
    id: str
    level: str
    statement: str
    check: str
    notes: str
    section: str

    @property
    def mandatory(self) -> bool:
        return self.level in MANDATORY

    @property
    def retired(self) -> bool:
        return self.level == "RETIRED"

    @property
    def top_section(self) -> str:
        return self.section.split(".", 1)[0]

    @property
    def profiles(self) -> dict | None:
        """The worker profiles of a WORKER_SPEC.md clause, from the start of
        its Notes: {"jsonrpc": (), "mcp": ("2025-03-26",)}, an empty tuple
        meaning every MCP revision; None for SPEC.md clauses and for Notes
        that do not parse."""
        m = _PROFILES_NOTE.match(self.notes)
        if not m:
            return None
        out = {}
        for item in m.group(1).split(","):
            im = _PROFILE_ITEM.match(item.strip())
            if not im:
                return None
            out[im.group(1)] = tuple(im.group(2).split())
        return out or None


def find_spec(explicit: str | os.PathLike | None = None, name: str = "SPEC.md") -> Path:
    """SPEC.md (or WORKER_SPEC.md, name): the explicit path, else next to
    run.py (installed suite), else at the top of the source tree (one level
    above conformance/)."""
    if explicit:
        path = Path(explicit)
        if not path.is_file():
            raise HarnessError(f"spec file not found: {path}")
        return path.resolve()
    for candidate in (CONFORMANCE_DIR / name, CONFORMANCE_DIR.parent / name):
        if candidate.is_file():
            return candidate
    raise HarnessError(
        f"{name} not found next to {CONFORMANCE_DIR} or in {CONFORMANCE_DIR.parent}; "
        "pass --spec PATH")


def _title(path: Path | None) -> tuple[str, str | None]:
    """The first heading of the spec file and the version it names
    ("# stdio Bus v0.1.0: ..." -> "0.1.0"), if any."""
    if path is None:
        return "", None
    try:
        with open(path, encoding="utf-8") as f:
            for line in f:
                if line.startswith("# "):
                    title = line[2:].strip()
                    m = re.search(r"\bv(\d+(?:\.\d+)+)\b", title)
                    return title, (m.group(1) if m else None)
    except OSError:
        pass
    return "", None


class Registry:
    """All clauses of one SPEC.md, by ID."""

    def __init__(self, clauses: list[Clause], path: Path | None = None):
        self.path = path
        self.title, self.version = _title(path)
        self.clauses: dict[str, Clause] = {}
        for c in clauses:
            if c.id in self.clauses:
                raise HarnessError(f"{path}: clause {c.id} is defined twice")
            self.clauses[c.id] = c

    @classmethod
    def load(cls, path: str | os.PathLike | None = None, name: str = "SPEC.md") -> "Registry":
        spec = find_spec(path, name)
        try:
            raw = clauses_check.parse_spec(str(spec))
        except HarnessError:
            raise
        except Exception as exc:  # the parser's own error message is what helps
            raise HarnessError(f"cannot parse {spec}: {exc}") from exc
        clauses = []
        for r in raw:
            level = " ".join(str(r.get("level", "")).upper().split())
            check = str(r.get("check", "")).strip().lower()
            cid = str(r["id"]).strip()
            section = str(r.get("section") or "").strip()
            if not section:
                middle = cid[3:].rsplit("-", 1)[0]
                section = middle
            clauses.append(Clause(cid, level, str(r.get("statement", "")).strip(), check,
                                  str(r.get("notes", "") or "").strip(), section))
        if not clauses:
            raise HarnessError(f"{spec}: no clauses found")
        return cls(clauses, spec)

    def __contains__(self, cid: str) -> bool:
        return cid in self.clauses

    def __getitem__(self, cid: str) -> Clause:
        return self.clauses[cid]

    def __iter__(self):
        return iter(self.clauses.values())

    def levels(self, ids) -> list[str]:
        return [self.clauses[i].level for i in ids if i in self.clauses]

    def any_mandatory(self, ids) -> bool:
        return any(self.clauses[i].mandatory for i in ids if i in self.clauses)

    def level(self, cid: str | None) -> str:
        """The level of a clause; MUST for an unknown one (never let a
        failure pass as a warning by mistake)."""
        return self.clauses[cid].level if cid in self.clauses else "MUST"

    @staticmethod
    def in_section(clause: Clause, section: str) -> bool:
        """True when the clause is in the section or one of its subsections
        ("6.1" matches 6.1 and 6.1.2, not 6.10)."""
        section = section.strip().rstrip(".")
        return clause.section == section or clause.section.startswith(section + ".")

    def select(self, ids, clause_globs=(), exclude_globs=(), sections=()) -> bool:
        """Selection rule of run.py: a test runs when it cites a clause
        matching any --clause glob and any --section (when given), and cites no
        clause matching an --exclude-clause glob."""
        ids = list(ids)
        if exclude_globs and any(fnmatch.fnmatchcase(i, g) for i in ids for g in exclude_globs):
            return False
        if clause_globs and not any(fnmatch.fnmatchcase(i, g) for i in ids for g in clause_globs):
            return False
        if sections and not any(i in self.clauses and self.in_section(self.clauses[i], s)
                                for i in ids for s in sections):
            return False
        return True
