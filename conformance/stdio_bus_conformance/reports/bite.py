"""The bite map: for each MUST clause, the breaks under which a test judged
on that clause fails (conformance/bite_map.toml), and whether the last
verification run (conformance/mutants/verify_bites.py, its verify.json)
saw each one fail.

    [[bite]]                        # one recorded break of one clause
    clause = "SB-6.3.1-4"
    kind = "mutant"                 # mutant | fbus | fake-daemon | mock-worker | fake-mcp-worker | acp-agent
    name = "16-unknown-id-forwarded"
    tests = ["tests/test_routing.py::test_response_with_unknown_id_is_discarded[stdio]"]
    fast = true                     # in the bite-fast subset (optional)
    half = "discards"               # which half of a two-part clause (optional)

    [[via]]                         # a clause wholly restated by others: it bites through them
    clause = "SB-3.1-6"
    via = ["SB-10.1-1", "SB-10.1-2"]
    reason = "restated as 10.1's two clauses, one per signal"

    [[no-bite]]                     # a clause, or one half of it, no test can fail today
    clause = "SB-6.3.3-1"
    half = "logs a warning"         # optional: the whole clause when absent
    reason = "its only test checks the discard, never the warning (issue 28)"

A clause's bite status:
  proven      a recorded break was seen failing a test judged on the clause
              by the last verification, and no half of it is listed no-bite;
  partial     proven, but a half of it is listed no-bite;
  unverified  breaks are recorded but none was seen failing it (no
              verification results, or the break did not bite);
  no-bite     no break, a reason given;
  (via)       a [[via]] clause takes the weakest status of the clauses it
              is restated as (proven only when every one of them is);
  missing     not in the map at all: the bite gate fails on it.
When the results are of the whole map (verify_bites.py without --fast or
--only), the gate also fails on every clause left unverified.

Standard library only; plain data in, plain data out.
"""

from __future__ import annotations

import json
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

KINDS = ("mutant", "fbus", "fake-daemon", "mock-worker", "fake-mcp-worker", "acp-agent")
MISSING_WHY = "not in the bite map (no break recorded, no no-bite reason)"
UNBITTEN_WHY = "in the bite map, but its breaks did not bite it when the whole map was verified"
STATUSES = ("proven", "partial", "unverified", "no-bite", "missing")
WEAKEST_FIRST = ("missing", "no-bite", "unverified", "partial", "proven")


class BiteMapError(ValueError):
    pass


@dataclass
class Break:
    clause: str
    kind: str
    name: str
    tests: list
    fast: bool = False
    half: str = ""
    note: str = ""

    @property
    def key(self) -> str:
        return f"{self.kind}:{self.name}"


@dataclass
class NoBite:
    clause: str
    reason: str
    half: str = ""


@dataclass
class Via:
    clause: str
    via: list           # the clauses it is restated as, each with its own breaks
    reason: str


@dataclass
class BiteMap:
    breaks: list = field(default_factory=list)
    no_bite: list = field(default_factory=list)
    path: str = ""
    via: list = field(default_factory=list)

    def clauses(self) -> set:
        return {b.clause for b in self.breaks} | {n.clause for n in self.no_bite} | {v.clause for v in self.via}

    def by_break(self) -> dict:
        """kind:name -> [Break], in map order."""
        out: dict = {}
        for b in self.breaks:
            out.setdefault(b.key, []).append(b)
        return out


def load(path) -> BiteMap:
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise BiteMapError(f"{path}: {exc}") from exc
    problems, breaks, nobites, vias = [], [], [], []
    for i, e in enumerate(data.get("bite", [])):
        where = f"{path.name}: bite #{i + 1} ({e.get('clause', '?')})"
        if e.get("kind") not in KINDS:
            problems.append(f"{where}: kind must be one of {', '.join(KINDS)}")
        if not e.get("clause") or not e.get("name") or not e.get("tests"):
            problems.append(f"{where}: clause, name and tests are required")
            continue
        breaks.append(Break(e["clause"], e.get("kind", ""), e["name"], list(e["tests"]), bool(e.get("fast")),
                            e.get("half", ""), e.get("note", "")))
    for i, e in enumerate(data.get("no-bite", [])):
        if not e.get("clause") or not e.get("reason"):
            problems.append(f"{path.name}: no-bite #{i + 1}: clause and reason are required")
            continue
        nobites.append(NoBite(e["clause"], e["reason"], e.get("half", "")))
    for i, e in enumerate(data.get("via", [])):
        if not e.get("clause") or not e.get("via") or not e.get("reason"):
            problems.append(f"{path.name}: via #{i + 1}: clause, via and reason are required")
            continue
        if e["clause"] in e["via"]:
            problems.append(f"{path.name}: via #{i + 1}: {e['clause']} cannot bite through itself")
            continue
        vias.append(Via(e["clause"], list(e["via"]), e["reason"]))
    via_ids = {v.clause for v in vias}
    for v in vias:
        if via_ids & set(v.via):
            problems.append(f"{path.name}: via {v.clause}: {', '.join(sorted(via_ids & set(v.via)))} "
                            "is itself a via clause (one level only)")
        if any(b.clause == v.clause for b in breaks) or any(n.clause == v.clause for n in nobites):
            problems.append(f"{path.name}: via {v.clause}: also has bite or no-bite entries (one or the other)")
    if problems:
        raise BiteMapError("\n".join(problems))
    return BiteMap(breaks, nobites, str(path), vias)


def load_verification(path) -> dict:
    """verify.json of verify_bites.py -> {kind:name: {"bit": [clauses], ...}};
    {} when there is none."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return {f"{r['kind']}:{r['name']}": r for r in data.get("breaks", [])}


@dataclass
class ClauseBite:
    id: str
    status: str
    breaks: list          # ["kind:name", ...] recorded for it
    verified: list        # those seen biting it
    no_bite: list         # [{"half", "reason"}]
    via: list = field(default_factory=list)   # the clauses it bites through ([[via]])


def compute(mandatory_ids, bmap: BiteMap | None, verification: dict) -> dict:
    """mandatory_ids: the MUST/MUST NOT black-box clauses to judge.
    Returns {clause id: ClauseBite}."""
    vias = {v.clause: v for v in (bmap.via if bmap else [])}

    def direct(cid: str) -> ClauseBite:
        recorded = [b for b in (bmap.breaks if bmap else []) if b.clause == cid]
        nb = [{"half": n.half, "reason": n.reason} for n in (bmap.no_bite if bmap else []) if n.clause == cid]
        keys = list(dict.fromkeys(b.key for b in recorded))
        verified = [k for k in keys if cid in verification.get(k, {}).get("bit", [])]
        whole_no_bite = any(not n["half"] for n in nb)
        if verified and not nb:
            status = "proven"
        elif verified and not whole_no_bite:
            status = "partial"
        elif keys and not whole_no_bite:
            status = "unverified"
        elif nb:
            status = "no-bite"
        else:
            status = "missing"
        return ClauseBite(cid, status, keys, verified, nb)

    def through(v: Via) -> ClauseBite:
        parts = [direct(c).status for c in v.via]   # one level: load() refuses a via of a via
        unproven = [f"{c} {p}" for c, p in zip(v.via, parts) if p != "proven"]
        nb = [{"half": "", "reason": f"through {', '.join(unproven)}"}] if unproven else []
        return ClauseBite(v.clause, min(parts, key=WEAKEST_FIRST.index), [], [], nb, list(v.via))

    return {cid: through(vias[cid]) if cid in vias else direct(cid) for cid in mandatory_ids}


def summary(bites: dict) -> dict:
    counts = {s: 0 for s in STATUSES}
    for b in bites.values():
        counts[b.status] += 1
    counts["total"] = len(bites)
    return counts


def to_json(bites: dict, map_path: str, verify_path: str, verified_at: str | None) -> dict:
    return {
        "map": map_path, "verification": verify_path, "verified_at": verified_at,
        "summary": summary(bites),
        "clauses": {cid: {"status": b.status, "breaks": b.breaks, "verified": b.verified, "no_bite": b.no_bite,
                          **({"via": b.via} if b.via else {})}
                    for cid, b in bites.items()},
    }


def lines(bites: dict, gate: bool) -> list[str]:
    """Console lines: the counts, then every MUST clause not proven."""
    s = summary(bites)
    out = [f"bite map: {s['proven']} of {s['total']} MUST clauses proven to bite "
           f"({s['partial']} partly, {s['unverified']} recorded but unverified, {s['no-bite']} no-bite, "
           f"{s['missing']} missing)"]
    for b in bites.values():
        if b.status == "proven":
            continue
        why = "; ".join((f"{n['half']}: " if n["half"] else "") + n["reason"] for n in b.no_bite)
        extra = f" [{', '.join(b.breaks)}]" if b.status == "unverified" else ""
        out.append(f"    {b.status:<10} {b.id}{extra}{(': ' + why) if why else ''}")
    if gate:
        out.append(f"  bite gate: {'FAILED, ' + str(s['missing']) + ' MUST clause(s) not in the map' if s['missing'] else 'ok'}")
    return out


def attach(coverage, map_path, results_path) -> None:
    """Judges a Coverage (coverage.py) by the bite map: every MUST/MUST NOT
    black-box clause gets its bite status, coverage.bite the summary, and
    the gate (when it applies) a failure for each clause not in the map."""
    mandatory = [c for c in coverage.clauses if c.level in ("MUST", "MUST NOT") and c.check == "black-box"]
    try:
        bmap, problem = load(map_path), ""
    except BiteMapError as exc:
        bmap, problem = None, str(exc)
    verification = load_verification(results_path)
    when, subset = None, None
    try:
        raw = json.loads(Path(results_path).read_text(encoding="utf-8"))
        when, subset = raw.get("when"), raw.get("subset")
    except (OSError, ValueError):
        pass
    bites = compute([c.id for c in mandatory], bmap, verification)
    for c in mandatory:
        c.bite = bites[c.id].status
    coverage.bite = to_json(bites, str(map_path), str(results_path) if verification else "", when)
    # SHOULD/MAY clauses this run judges (the profile claims them): reported; gated once recorded (issue 34)
    optional = [c for c in coverage.clauses if c.level not in ("MUST", "MUST NOT") and c.check == "black-box"
                and c.outcome != "not judged"]
    extra = compute([c.id for c in optional], bmap, verification)
    for c in optional:
        c.bite = extra[c.id].status
    coverage.bite["optional"] = {"summary": summary(extra),
                                 "not_proven": sorted(cid for cid, b in extra.items() if b.status != "proven")}
    if problem:
        coverage.bite["error"] = problem
    if coverage.complete and coverage.gated:
        if problem:
            coverage.gate_failures.append({"id": "bite map", "level": "MUST", "why": f"{MISSING_WHY}: {problem}"})
        coverage.gate_failures += [{"id": c.id, "level": c.level, "why": MISSING_WHY}
                                   for c in mandatory if c.bite == "missing"]
        if subset == "all":  # the whole map was verified: a recorded break must have bitten,
            # at any level: a SHOULD/MAY clause's proof, once recorded, is held as a MUST one's
            # (issue 34; one not yet in the map is reported as not proven, not gated)
            coverage.gate_failures += [{"id": c.id, "level": c.level, "why": UNBITTEN_WHY}
                                       for c in mandatory + optional if c.bite == "unverified"]


def json_lines(data: dict, gate: bool) -> list[str]:
    """lines() from coverage.bite (to_json's output)."""
    bites = {cid: ClauseBite(cid, v["status"], v["breaks"], v["verified"], v["no_bite"])
             for cid, v in data["clauses"].items()}
    out = lines(bites, gate)
    opt = data.get("optional")
    if opt:
        o = opt["summary"]
        out.append(f"bite map: {o['proven']} of {o['total']} SHOULD/MAY clauses judged here proven to bite "
                   f"(reported, not gated); not proven: {', '.join(opt['not_proven']) or 'none'}")
    src = data.get("verification") or "none found"
    out.insert(1, f"  verification: {src}" + (f" ({data['verified_at']})" if data.get("verified_at") else ""))
    if data.get("error"):
        out.insert(1, f"  BITE MAP UNREADABLE: {data['error']}")
    return out


def split_gate(failures: list) -> tuple[list, list]:
    """The coverage gate's failures: (without a test, not proven to bite)."""
    unbitten = [g for g in failures if is_bite_failure(g)]
    return [g for g in failures if g not in unbitten], unbitten


def is_bite_failure(gate_failure: dict) -> bool:
    return gate_failure.get("why", "").startswith((MISSING_WHY, UNBITTEN_WHY))
