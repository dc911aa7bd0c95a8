"""The kit's version and the spec revision it judges, for `--version` and
for every report.

One source of truth for each: the VERSION file at the top of the source
tree (installed next to the suite by `cmake --install`, and into the Python
package by its build) and the version in SPEC.md's title ("# stdio Bus
v0.1.0: ..."). Nothing here hard-codes either.
"""

from __future__ import annotations

import re
from pathlib import Path

from .registry import CONFORMANCE_DIR

KIT = "stdio-bus-conformance"
_SEMVER = re.compile(r"^\d+\.\d+\.\d+(?:[-+][0-9A-Za-z.+-]+)?$")


def kit_version() -> str:
    """The kit's semantic version: VERSION next to the suite (installed),
    else at the top of the source tree, else the installed distribution's
    metadata; "unknown" when none is there."""
    for path in (CONFORMANCE_DIR / "VERSION", CONFORMANCE_DIR.parent / "VERSION"):
        try:
            text = path.read_text(encoding="utf-8").strip()
        except OSError:
            continue
        if _SEMVER.match(text):
            return text
    try:
        from importlib.metadata import PackageNotFoundError, version
        try:
            return version(KIT)
        except PackageNotFoundError:
            pass
    except ImportError:  # pragma: no cover - Python < 3.8
        pass
    return "unknown"


def spec_version(spec: str | Path | None = None) -> str | None:
    """The stdio Bus spec revision the kit judges: the version in the title
    of SPEC.md (the given one, else the one the suite finds)."""
    from ..common.errors import HarnessError
    from .registry import _title, find_spec
    try:
        path = find_spec(spec, "SPEC.md")
    except HarnessError:
        return None
    return _title(path)[1]


def version_line(spec: str | Path | None = None) -> str:
    """'stdio-bus-conformance 0.2.0 (stdio Bus spec v0.1.0)'."""
    sv = spec_version(spec)
    return f"{KIT} {kit_version()} (stdio Bus spec {'v' + sv if sv else 'revision unknown'})"


def about(registry=None) -> dict:
    """The members every report carries: the kit and its version, and the
    spec revision judged: the version in the title of the registry's SPEC.md
    (None when that file names none), or, without a registry (a worker run,
    whose WORKER_SPEC.md belongs to the kit's version), the bus spec the kit
    is written against."""
    sv = registry.version if registry is not None else spec_version()
    return {"kit": KIT, "kit_version": kit_version(), "spec_version": sv}
