"""The settings file (spec 9). fbus words its own complaints and keeps them
short; it does not promise to name the offending member (that is the
reference daemon's SHOULD, SB-I-20, not the spec's). Unknown members are
ignored without a word. Durations may be fractional; drain_timeout_sec may
be 0 (kill at once)."""

import json
import os
import shutil

DEFAULTS = {
    "max_input_buffer": 1_048_576,
    "max_output_queue": 4_194_304,
    "max_restarts": 5,
    "restart_window_sec": 60,
    "drain_timeout_sec": 30,
    "backpressure_timeout_sec": 60,
}


class Rejected(Exception):
    pass


class Group:
    """One pool: `count` workers running `program` with `argv`."""

    def __init__(self, name, program, argv, count, index):
        self.name, self.program, self.argv, self.count, self.index = name, program, argv, count, index


class Settings:
    def __init__(self, groups, tuning):
        self.groups = groups
        self.tuning = tuning


def _refuse_constant(name):
    raise ValueError(f"{name} is not allowed")


def _whole(v):
    """v as an int when it is a JSON number with an integral value (2.0 is 2)."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    if isinstance(v, float) and not v.is_integer():
        return None
    return int(v)


def _executable(program):
    if "/" not in program:
        return shutil.which(program) is not None
    return os.path.isfile(program) and os.access(program, os.X_OK)


def load(path) -> Settings:
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError as exc:
        raise Rejected(f"cannot read the settings file: {exc.strerror}") from None
    try:
        doc = json.loads(raw.decode("utf-8"), parse_constant=_refuse_constant)
    except UnicodeDecodeError:
        raise Rejected("the settings file is not UTF-8 text") from None
    except json.JSONDecodeError as exc:
        raise Rejected(f"the settings file is not valid JSON (line {exc.lineno}, column {exc.colno})") from None
    except ValueError as exc:
        raise Rejected(f"the settings file is not valid JSON ({exc})") from None
    if not isinstance(doc, dict):
        raise Rejected("the settings file must hold one JSON object")

    entries = doc.get("pools")
    if not isinstance(entries, list):
        raise Rejected("no list of worker groups in the settings")
    if not entries:
        raise Rejected("at least one worker group must be configured")
    groups, seen = [], set()
    for n, e in enumerate(entries, 1):
        if not isinstance(e, dict):
            raise Rejected(f"worker group #{n} is not an object")
        name = e.get("id")
        if not isinstance(name, str):
            raise Rejected(f"worker group #{n} has no name (a string is needed)")
        if name in seen:
            raise Rejected(f"two worker groups are called {name!r}")
        seen.add(name)
        program = e.get("command")
        if not isinstance(program, str) or not program:
            raise Rejected(f"worker group #{n} does not say which program to run")
        if not _executable(program):
            raise Rejected(f"worker group #{n}: {program!r} is not a program that can be run")
        argv = e.get("args", [])
        if not isinstance(argv, list) or not all(isinstance(a, str) for a in argv):
            raise Rejected(f"worker group #{n}: the argument vector must be a list of strings")
        count = _whole(e.get("instances"))
        if count is None or count < 1:
            raise Rejected(f"worker group #{n}: the number of workers must be a whole number, 1 or more")
        groups.append(Group(name, program, list(argv), count, n - 1))

    tuning = dict(DEFAULTS)
    given = doc.get("limits", {})
    if not isinstance(given, dict):
        raise Rejected("the tuning section must be an object")
    for key, value in given.items():
        if key not in DEFAULTS:
            continue  # not ours: ignored, silently
        if key in ("max_input_buffer", "max_output_queue"):
            v = _whole(value)
            if v is None or v < 1:
                raise Rejected(f"tuning {key}: a byte count of 1 or more is needed")
        elif key == "max_restarts":
            v = _whole(value)
            if v is None or v < 0:
                raise Rejected(f"tuning {key}: a whole number is needed")
        else:
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0 or \
                    (value == 0 and key != "drain_timeout_sec"):
                raise Rejected(f"tuning {key}: a positive number of seconds is needed")
            v = float(value)
        tuning[key] = v
    return Settings(groups, tuning)
