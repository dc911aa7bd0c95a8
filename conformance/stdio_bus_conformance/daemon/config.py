"""Daemon configuration files (spec 9) for tests.

The base config has one pool "p" of two mock workers, each logging to
<workdir>/p.log, and small limits so the suite stays fast. Tests override
parts of it: dicts merge recursively, any other value replaces, and None
deletes the key (to test omitted fields).
"""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path

from ..common.errors import HarnessError

# Small values keep teardown and limit tests fast; tests override them.
BASE_LIMITS = {"drain_timeout_sec": 2}
DEFAULT_DRAIN = 30.0   # drain_timeout_sec's default (8.1)


def drain_timeout(data) -> float:
    """The drain_timeout_sec a daemon started with this config may take to
    shut down (10.2): the configured number, else the default; a config that
    is not a dict with a usable number (a test of rejection) gets the
    default, the longest a daemon that accepted it may take."""
    limits = data.get("limits") if isinstance(data, dict) else None
    value = limits.get("drain_timeout_sec") if isinstance(limits, dict) else None
    if isinstance(value, (int, float)) and not isinstance(value, bool) and 0 <= value < 3600:
        return float(value)
    return DEFAULT_DRAIN


def merge(base, over):
    """Recursive merge of over into a copy of base (None deletes)."""
    if not isinstance(base, dict) or not isinstance(over, dict):
        return copy.deepcopy(over)
    out = copy.deepcopy(base)
    for key, value in over.items():
        if value is None:
            out.pop(key, None)
        elif isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def check_mock(path: str | None) -> str:
    if not path:
        raise HarnessError("no mock worker configured (--mock-worker PATH)")
    if not (os.path.isfile(path) and os.access(path, os.X_OK)):
        raise HarnessError(f"mock worker not found or not executable: {path} "
                           "(build it, or pass --mock-worker PATH)")
    return os.path.abspath(path)


def mock_pool(mock: str, workdir: Path, id: str = "p", instances: int = 2, args=(),
              log: bool = True, pidfile: bool = True) -> dict:
    """A pool of mock workers; the log and pid files are named after the pool."""
    argv = []
    if log:
        argv += ["--log", str(Path(workdir) / f"{id}.log")]
    if pidfile:
        argv += ["--pidfile", str(Path(workdir) / f"{id}.pids")]
    argv += [str(a) for a in args]
    return {"id": id, "command": check_mock(mock), "args": argv, "instances": instances}


def write_config(path: Path, config) -> Path:
    """Writes config (a dict, or str/bytes written verbatim) to path."""
    path = Path(path)
    if isinstance(config, bytes):
        path.write_bytes(config)
    elif isinstance(config, str):
        path.write_text(config)
    else:
        path.write_text(json.dumps(config, indent=2) + "\n")
    return path
