"""Daemon profiles: how to launch a given stdio Bus implementation.

A profile is a TOML file (see profiles/stdio_bus.toml and README.md):

    name = "stdio_bus"
    command = ["{daemon}", "--config", "{config}", "{mode_flag}"]
    extra_args = []
    modes = ["stdio", "unix", "tcp"]
    readiness = "connect"            # or a table per mode; connect|stderr-regex|none
    ready_regex = "listening"        # for stderr-regex
    startup_timeout = 5.0
    shutdown_timeout = 5.0
    features = ["worker_id_env"]     # optional behaviours tests may require
    gate_interpretations = false     # true: SB-I failures fail the run (ours)
    [env]
    [mode_flags]
    stdio = ["--stdio"]
    unix = ["--unix", "{socket}"]
    tcp = ["--tcp", "{host}:{port}"]

An argument that is exactly "{mode_flag}" expands to the mode's flag list;
other placeholders are substituted inside any argument.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from ..common.errors import HarnessError

MODES = ("stdio", "unix", "tcp")
READINESS = ("connect", "stderr-regex", "none")
PLACEHOLDERS = ("daemon", "config", "mode_flag", "socket", "host", "port")


@dataclass
class Profile:
    """Defaults: the neutral, spec-only profile (the spec's command line,
    every mode, no extension)."""
    name: str = "spec-only"
    command: list = field(default_factory=lambda: ["{daemon}", "--config", "{config}", "{mode_flag}"])
    extra_args: list = field(default_factory=list)
    env: dict = field(default_factory=dict)
    modes: list = field(default_factory=lambda: list(MODES))
    mode_flags: dict = field(default_factory=lambda: {
        "stdio": ["--stdio"], "unix": ["--unix", "{socket}"], "tcp": ["--tcp", "{host}:{port}"]})
    readiness: dict = field(default_factory=lambda: {"stdio": "none", "unix": "connect", "tcp": "connect"})
    ready_regex: str | None = None
    startup_timeout: float = 5.0
    shutdown_timeout: float = 5.0
    host: str = "127.0.0.1"
    features: list = field(default_factory=list)
    # Our interpretations (SB-I) are our readings where the seed is silent: a
    # daemon that reads it otherwise is reported there but still exits 0,
    # unless its profile holds it to them (ours does) or the run is --strict.
    gate_interpretations: bool = False
    path: str | None = None

    def supports(self, mode: str) -> bool:
        return mode in self.modes

    def to_toml(self) -> str:
        """The profile as a file load_profile() reads back (reproducers carry it)."""
        def q(v):
            return '"' + str(v).replace("\\", "\\\\").replace('"', '\\"') + '"'

        def arr(xs):
            return "[" + ", ".join(q(x) for x in xs) + "]"
        lines = [f"# profile {self.name}" + (f", copied from {self.path}" if self.path else " (built in)"),
                 f"name = {q(self.name)}", f"command = {arr(self.command)}", f"extra_args = {arr(self.extra_args)}",
                 f"modes = {arr(self.modes)}",
                 "readiness = { " + ", ".join(f"{m} = {q(v)}" for m, v in self.readiness.items()) + " }",
                 f"startup_timeout = {float(self.startup_timeout)}", f"shutdown_timeout = {float(self.shutdown_timeout)}",
                 f"host = {q(self.host)}", f"features = {arr(self.features)}",
                 f"gate_interpretations = {'true' if self.gate_interpretations else 'false'}"]
        if self.ready_regex:
            lines.append(f"ready_regex = {q(self.ready_regex)}")
        lines += ["", "[mode_flags]"] + [f"{m} = {arr(v)}" for m, v in self.mode_flags.items()]
        lines += ["", "[env]"] + [f"{q(k)} = {q(v)}" for k, v in self.env.items()]
        return "\n".join(lines) + "\n"

    def argv(self, mode: str, **values) -> list[str]:
        """The daemon command line for a mode; values fill the placeholders."""
        if mode not in self.mode_flags:
            raise HarnessError(f"profile {self.name}: no mode_flags entry for mode {mode}")
        values = {k: str(v) for k, v in values.items()}
        flags = [_fill(a, values, self.name) for a in self.mode_flags[mode]]
        out = []
        for arg in list(self.command) + list(self.extra_args):
            if arg == "{mode_flag}":
                out.extend(flags)
            else:
                out.append(_fill(arg, dict(values, mode_flag=" ".join(flags)), self.name))
        return out


def _fill(template: str, values: dict, profile: str) -> str:
    def sub(m):
        key = m.group(1)
        if key not in PLACEHOLDERS:
            raise HarnessError(f"profile {profile}: unknown placeholder {{{key}}} in {template!r}")
        return values.get(key, "")
    return re.sub(r"\{([a-z_]+)\}", sub, template)


def load_profile(path: str | Path | None) -> Profile:
    """Reads a profile file; None gives the built-in neutral profile: the
    spec's command line (--config, --stdio/--unix/--tcp), no features."""
    if path is None:
        return Profile()
    path = Path(path)
    try:
        with open(path, "rb") as f:
            data = tomllib.load(f)
    except FileNotFoundError:
        raise HarnessError(f"profile not found: {path}") from None
    except tomllib.TOMLDecodeError as exc:
        raise HarnessError(f"profile {path}: {exc}") from None
    p = Profile(path=str(path.resolve()))
    known = {"name", "command", "extra_args", "env", "modes", "mode_flags", "readiness",
             "ready_regex", "startup_timeout", "shutdown_timeout", "host", "features",
             "gate_interpretations"}
    unknown = set(data) - known
    if unknown:
        raise HarnessError(f"profile {path}: unknown keys {sorted(unknown)}")
    for key in ("name", "ready_regex", "host"):
        if key in data:
            setattr(p, key, str(data[key]))
    for key in ("command", "extra_args", "modes", "features"):
        if key in data:
            if not isinstance(data[key], list) or not all(isinstance(x, str) for x in data[key]):
                raise HarnessError(f"profile {path}: {key} must be a list of strings")
            setattr(p, key, list(data[key]))
    for key in ("startup_timeout", "shutdown_timeout"):
        if key in data:
            setattr(p, key, float(data[key]))
    if "gate_interpretations" in data:
        if not isinstance(data["gate_interpretations"], bool):
            raise HarnessError(f"profile {path}: gate_interpretations must be true or false")
        p.gate_interpretations = data["gate_interpretations"]
    if "env" in data:
        p.env = {str(k): str(v) for k, v in data["env"].items()}
    if "mode_flags" in data:
        p.mode_flags = dict(p.mode_flags)
        p.mode_flags.update({k: list(v) for k, v in data["mode_flags"].items()})
    if "readiness" in data:
        r = data["readiness"]
        if isinstance(r, str):
            p.readiness = {m: r for m in MODES}
        else:
            p.readiness = dict(p.readiness)
            p.readiness.update({str(k): str(v) for k, v in r.items()})
    bad = [m for m in p.modes if m not in MODES]
    if bad:
        raise HarnessError(f"profile {path}: unknown modes {bad} (known: {', '.join(MODES)})")
    for mode, how in p.readiness.items():
        if how not in READINESS:
            raise HarnessError(f"profile {path}: readiness {how!r} for {mode} is not one of {READINESS}")
        if how == "stderr-regex" and not p.ready_regex:
            raise HarnessError(f"profile {path}: readiness stderr-regex needs ready_regex")
    if p.ready_regex:
        try:
            re.compile(p.ready_regex)
        except re.error as exc:
            raise HarnessError(f"profile {path}: ready_regex: {exc}") from None
    return p
