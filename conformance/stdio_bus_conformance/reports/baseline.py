"""Baselines: the failures a daemon is known to have, each with a reason.

    {"daemon": "...", "expected_failures": [
        {"test": "<nodeid>", "clauses": ["SB-..."], "reason": "..."}]}

A listed test that fails is reported `xfail`; a listed test that passes, or
that no longer exists, is a stale entry (exit 1, named); a failure that is not
listed is a new failure (exit 1). "preflight::<item>" lists a broken preflight
item: then it and the tests it blocks do not fail the run.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from ..common.errors import HarnessError


@dataclass
class Baseline:
    path: str | None
    daemon: str
    entries: dict  # nodeid -> entry dict

    def __contains__(self, nodeid: str) -> bool:
        return nodeid in self.entries

    def stale(self, results: dict, inventory: set | None, preflight=None) -> list[dict]:
        """Entries whose test passed, or (with a full inventory) does not
        exist; a "preflight::<item>" entry whose item is not broken."""
        out = []
        for nodeid, entry in self.entries.items():
            if nodeid.startswith(PREFLIGHT):
                item = preflight.items.get(nodeid[len(PREFLIGHT):]) if preflight is not None else None
                if preflight is not None and (item is None or item.status != "broken"):
                    out.append({"test": nodeid, "why": "passed" if item is not None else "no such test"})
                continue
            r = results.get(nodeid)
            if r is not None and r.outcome == "pass":
                out.append({"test": nodeid, "why": "passed"})
            elif r is None and inventory is not None and nodeid not in inventory:
                out.append({"test": nodeid, "why": "no such test"})
        return out


PREFLIGHT = "preflight::"  # a baseline entry "preflight::<item>" expects that item broken


def empty() -> Baseline:
    return Baseline(None, "", {})


def load(path: str) -> Baseline:
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except FileNotFoundError:
        raise HarnessError(f"baseline not found: {path}") from None
    except ValueError as exc:
        raise HarnessError(f"baseline {path}: not JSON: {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("expected_failures", []), list):
        raise HarnessError(f"baseline {path}: expected an object with an expected_failures list")
    entries = {}
    for i, e in enumerate(data.get("expected_failures", [])):
        if not isinstance(e, dict) or not isinstance(e.get("test"), str):
            raise HarnessError(f"baseline {path}: expected_failures[{i}] needs a \"test\" string")
        if not str(e.get("reason", "")).strip():
            raise HarnessError(f"baseline {path}: expected_failures[{i}] ({e['test']}) needs a reason")
        if e["test"] in entries:
            raise HarnessError(f"baseline {path}: {e['test']} is listed twice")
        entries[e["test"]] = e
    return Baseline(path, str(data.get("daemon", "")), entries)


def write(path: str, daemon: str, results: dict, previous: Baseline | None = None,
          root_causes: list = ()) -> int:
    """Writes a baseline listing every test that failed in this run (warnings do
    not fail the gate, so they are not listed), and every broken preflight
    item of a MUST clause (its blocked tests then do not fail the run);
    expected failures keep their reason. Returns the number of entries."""
    entries = []
    for rc in root_causes:
        if rc["level"] not in ("MUST", "MUST NOT"):
            continue
        nodeid = PREFLIGHT + rc["item"]
        reason = "TODO: explain"
        if previous is not None and nodeid in previous.entries:
            reason = previous.entries[nodeid].get("reason", reason)
        entries.append({"test": nodeid, "clauses": [rc["clause"]], "reason": reason})
    for nodeid in sorted(results):
        r = results[nodeid]
        if r.outcome not in ("fail", "xfail"):
            continue
        reason = "TODO: explain"
        if previous is not None and nodeid in previous.entries:
            reason = previous.entries[nodeid].get("reason", reason)
        entries.append({"test": nodeid, "clauses": list(r.clauses), "reason": reason})
    with open(path, "w", encoding="utf-8") as f:
        json.dump({"daemon": daemon, "expected_failures": entries}, f, indent=2)
        f.write("\n")
    return len(entries)
