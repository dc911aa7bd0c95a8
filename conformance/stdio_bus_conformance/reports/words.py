"""Words the reports share: how a clause is named with its tier and level,
the kit line heading every report, plurals."""

from __future__ import annotations

import os

from ..spec.judge import tier


TIER_WORDS = {"spec": "spec", "interpretation": "our interpretation", "extension": "our extension"}
MANDATORY = ("MUST", "MUST NOT")


def judged_as(cid: str | None, level: str) -> str:
    """'SB-4.3-1 (spec, MUST)', 'SB-I-20 (our interpretation, SHOULD)'."""
    if not cid:
        return ""
    return f"{cid} ({TIER_WORDS[tier(cid)]}, {level or '?'})"


def kit_line(meta: dict) -> str:
    """'stdio-bus-conformance 0.2.0, stdio Bus spec v0.1.0': which kit and
    which spec revision produced a report (its header in every format)."""
    sv = meta.get("spec_version")
    return (f"{meta.get('kit') or 'stdio-bus-conformance'} {meta.get('kit_version') or 'unknown'}, "
            f"stdio Bus spec {'v' + sv if sv else '(revision unknown)'}")


def plural(n: int, one: str, many: str | None = None) -> str:
    return f"{n} {one if n == 1 else (many or one + 's')}"


def rel(path: str | None, base: str | None) -> str:
    """A path relative to the report folder (artifacts travel with it)."""
    if not path:
        return ""
    if base:
        try:
            return os.path.relpath(path, base)
        except ValueError:
            pass
    return path
