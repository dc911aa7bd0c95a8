"""Baselines: the failures a daemon is known to have, each with a reason.

    {"daemon": "...", "expected_failures": [
        {"test": "<nodeid>", "clauses": ["SB-..."], "reason": "...",
         "intermittent": false}]}

A listed test that fails is reported `xfail`; a listed test that passes, or
that no longer exists, is a stale entry (exit 1, named); a failure that is not
listed is a new failure (exit 1). "preflight::<item>" lists a broken preflight
item: then it and the tests it blocks do not fail the run.

Every entry needs a real reason: an empty one or a placeholder ("TODO: ...",
"FIXME", "tbd", "explain") makes the baseline invalid (exit 2, the entry
named). An entry with "intermittent": true accepts a pass as well as a
failure (never stale for passing); the report says which it was.

--write-baseline FILE writes this run's failures (reasons kept from
--baseline, placeholders for new ones). --update-baseline FILE merges into
FILE: entries outside this run's selection are kept untouched, new failures
are added (with a placeholder reason, to be written before the file is used),
entries inside the selection whose test now passes (or no longer exists) are
dropped, intermittent ones kept; every reason and extra member is kept.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field

from ..common.errors import HarnessError


@dataclass
class Baseline:
    path: str | None
    daemon: str
    entries: dict  # nodeid -> entry dict
    data: dict = field(default_factory=dict)  # the whole file, to keep its other members on update

    def intermittent(self, nodeid: str) -> bool:
        return bool(self.entries.get(nodeid, {}).get("intermittent"))

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
            if r is not None and r.outcome == "pass" and not entry.get("intermittent"):
                out.append({"test": nodeid, "why": "passed"})
            elif r is None and inventory is not None and nodeid not in inventory:
                out.append({"test": nodeid, "why": "no such test"})
        return out


PREFLIGHT = "preflight::"  # a baseline entry "preflight::<item>" expects that item broken
PLACEHOLDER_REASON = "TODO: explain"  # what a written entry gets until someone writes its reason
# an empty reason, or one that only promises one: "TODO: ...", "FIXME", "tbd", "explain", "?"
_PLACEHOLDER = re.compile(r"^\W*(todo|fixme|tbd|xxx)\b|^\W*(explain|reason|why|none|n/?a)?\W*$", re.I)


def is_placeholder(reason) -> bool:
    return not isinstance(reason, str) or bool(_PLACEHOLDER.match(reason.strip()))


def empty() -> Baseline:
    return Baseline(None, "", {})


def load(path: str, require_reasons: bool = True) -> Baseline:
    """Reads and checks a baseline. require_reasons=False (--update-baseline
    reading the file it is about to merge into) accepts placeholder reasons."""
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
        where = f"baseline {path}: expected_failures[{i}] ({e['test']})"
        if not str(e.get("reason") or "").strip():
            raise HarnessError(f"{where} needs a reason: say why this test is expected to fail")
        if require_reasons and is_placeholder(e.get("reason")):
            raise HarnessError(f"{where} has a placeholder reason {e.get('reason')!r}: "
                               "say why this test is expected to fail")
        if not isinstance(e.get("intermittent", False), bool):
            raise HarnessError(f"{where}: \"intermittent\" must be true or false")
        if e["test"] in entries:
            raise HarnessError(f"baseline {path}: {e['test']} is listed twice")
        entries[e["test"]] = e
    return Baseline(path, str(data.get("daemon", "")), entries, data)


def report(baseline: Baseline, results: dict, inventory: set | None, preflight=None) -> dict:
    """The baseline part of the reports: stale entries, new failures, the
    expected failures seen, and how each intermittent entry went this time."""
    return {"file": baseline.path,
            "stale": baseline.stale(results, inventory, preflight),
            "new_failures": [n for n, r in results.items() if r.outcome == "fail"] if baseline.path else [],
            "expected_failures": sorted(n for n, r in results.items() if r.outcome == "xfail"),
            "intermittent": [{"test": n, "outcome": results[n].outcome}
                             for n in baseline.entries if baseline.intermittent(n) and n in results]}


def failing(results: dict, strict: bool = False) -> list[str]:
    """Tests a baseline must list for the run to pass: failures, expected
    failures, and with --strict warnings too."""
    gate = ("fail", "xfail", "warn") if strict else ("fail", "xfail")
    return [n for n in sorted(results) if results[n].outcome in gate]


def lines(b: dict) -> list[str]:
    """Console lines about the baseline: stale entries, new failures,
    intermittent entries, what --update-baseline changed."""
    out = [f"stale baseline entry: {e['test']} ({e['why']})" for e in b.get("stale", [])]
    if b.get("file"):
        out += [f"new failure (not in the baseline): {t}" for t in b.get("new_failures", [])]
    for e in b.get("intermittent", []):
        word = {"pass": "passed", "xfail": "failed"}.get(e["outcome"], e["outcome"])
        out.append(f"intermittent (baseline accepts a pass or a failure): {e['test']} {word} this time")
    u = b.get("update")
    if u:
        out.append(f"baseline updated: {u['file']}: {len(u['added'])} added, {len(u['dropped'])} dropped, "
                   f"{u['kept']} kept ({u['outside']} outside this run's selection)")
        out += [f"  + {t} (new failure: write its reason)" for t in u["added"]]
        out += [f"  - {d['test']} ({d['why']})" for d in u["dropped"]]
        if u["placeholders"]:
            out.append(f"  {u['placeholders']} entr{'y' if u['placeholders'] == 1 else 'ies'} still without a "
                       f"reason: --baseline {u['file']} refuses the file until each has one")
    return out


def write(path: str, daemon: str, results: dict, previous: Baseline | None = None,
          root_causes: list = (), strict: bool = False) -> int:
    """Writes a baseline listing every test that failed in this run (warnings do
    not fail the gate, so they are not listed), and every broken preflight
    item of a MUST clause (its blocked tests then do not fail the run);
    expected failures keep their reason. Returns the number of entries."""
    entries = []
    for rc in root_causes:
        if rc["level"] not in ("MUST", "MUST NOT"):
            continue
        nodeid = PREFLIGHT + rc["item"]
        reason = PLACEHOLDER_REASON
        if previous is not None and nodeid in previous.entries:
            reason = previous.entries[nodeid].get("reason", reason)
        entries.append({"test": nodeid, "clauses": [rc["clause"]], "reason": reason})
    for nodeid in failing(results, strict):
        r = results[nodeid]
        reason = PLACEHOLDER_REASON
        if previous is not None and nodeid in previous.entries:
            reason = previous.entries[nodeid].get("reason", reason)
        entries.append({"test": nodeid, "clauses": list(r.clauses), "reason": reason})
    with open(path, "w", encoding="utf-8") as f:
        json.dump({"daemon": daemon, "expected_failures": entries}, f, indent=2)
        f.write("\n")
    return len(entries)


def update(path: str, daemon: str, results: dict, inventory: set | None, preflight=None,
           root_causes: list = (), strict: bool = False) -> dict:
    """Merges this run into the baseline at path (created when missing) and
    returns what changed: {"file", "added", "dropped", "kept", "outside",
    "placeholders"}.

    Inside this run's selection (the tests it reported; the preflight items
    when a preflight ran): a failure not listed is added with a placeholder
    reason; a listed test that passed is dropped, unless intermittent; a
    listed test that no longer exists (full collection only) is dropped.
    Everything else, and every entry outside the selection, is kept as it
    is, reason and extra members included, in its place."""
    previous = load(path, require_reasons=False) if os.path.exists(path) else \
        Baseline(path, daemon, {}, {"daemon": daemon, "expected_failures": []})
    kept, dropped, added, outside = [], [], [], 0
    for nodeid, entry in previous.entries.items():
        if nodeid.startswith(PREFLIGHT):
            if preflight is None:
                outside += 1
                kept.append(entry)
                continue
            item = preflight.items.get(nodeid[len(PREFLIGHT):])
            if item is None or item.status != "broken":
                dropped.append({"test": nodeid, "why": "passed" if item is not None else "no such test"})
            else:
                kept.append(entry)
            continue
        r = results.get(nodeid)
        if r is None:
            if inventory is not None and nodeid not in inventory:
                dropped.append({"test": nodeid, "why": "no such test"})
            else:
                outside += 1
                kept.append(entry)
        elif r.outcome == "pass" and not entry.get("intermittent"):
            dropped.append({"test": nodeid, "why": "passed"})
        else:
            kept.append(entry)
    listed = set(previous.entries)
    for rc in root_causes:
        nodeid = PREFLIGHT + rc["item"]
        if rc["level"] in ("MUST", "MUST NOT") and nodeid not in listed:
            kept.append({"test": nodeid, "clauses": [rc["clause"]], "reason": PLACEHOLDER_REASON})
            added.append(nodeid)
    for nodeid in failing(results, strict):
        if nodeid not in listed:
            kept.append({"test": nodeid, "clauses": list(results[nodeid].clauses), "reason": PLACEHOLDER_REASON})
            added.append(nodeid)
    data = dict(previous.data)
    data.setdefault("daemon", daemon)
    data["expected_failures"] = kept
    tmp = f"{path}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=2)
        f.write("\n")
    os.replace(tmp, path)
    return {"file": path, "added": added, "dropped": dropped, "kept": len(kept) - len(added),
            "outside": outside, "placeholders": sum(1 for e in kept if is_placeholder(e.get("reason")))}
