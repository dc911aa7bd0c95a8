"""Worker descriptions: what the worker-side suite needs to know about a
worker under test (WORKER_SPEC.md, "Profiles").

A description comes from run.py's options, from a TOML file, or both (the
options win): the command that starts the worker, the profiles it claims,
its environment, and the few facts some clauses need.

    name = "ref_worker"
    command = ["./ref_worker"]        # relative to this file; --worker overrides
    profiles = ["plain", "mcp"]       # plain | jsonrpc | mcp: each judged on its own sources
    mcp_version = "2025-11-25"        # the MCP revision (default: the newest known); --mcp-version
    verbose_args = ["--verbose"]      # its most verbose option (SB-W-4)
    answer_timeout = 5.0              # "at once" (default: run.py --wait-timeout)
    drain_timeout = 30.0              # SIGTERM -> exit (SB-W-11; the daemon's default)

    [env]
    RUST_LOG = "debug"

    [request]                         # plain: a request it answers at once
    method = "ping"                   # (default: ping; mcp: always ping)
    params = {}                       # optional

    [jsonrpc]
    failing_request = { method = "tools/call", params = { name = "add", arguments = { a = 1e308, b = 1e308 } } }
    invalid_params_request = { method = "tools/call", params = { name = "echo", arguments = 5 } }

    [mcp]
    tool_call = { name = "echo", arguments = { text = "{text}" } }
    long_call = { name = "slow", arguments = { ms = "{ms}", steps = "{steps}" } }
    ask_call = { name = "sample", arguments = { prompt = "{text}" } }

    [acp]                             # an ACP agent (WORKER_SPEC.md, Appendix G): prompt texts
    prompt = "say hello"              # a turn that ends by itself
    permission_prompt = "edit a file" # a turn that asks session/request_permission

In `[mcp]` arguments, a string that is exactly "{ms}", "{seconds}", "{steps}"
or "{text}" becomes the value the test picks (a number for ms, seconds and
steps); "{text}" inside a longer string is replaced by the text. A long_call
without "{ms}" or "{seconds}" needs `long_call_ms`, how long it runs.

An MCP worker without a tool_call gets one from its own tools/list (see
discover_tool_call): the preflight asks for it once per run.
"""

from __future__ import annotations

import copy
import os
import re
import shlex
import shutil
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from ..common.errors import HarnessError

PROFILES = ("plain", "jsonrpc", "mcp", "acp")  # none implies another (WORKER_SPEC.md, Profiles)
MCP_VERSIONS = ("2025-03-26", "2025-06-18", "2025-11-25")  # the MCP revisions the suite knows
DEFAULT_MCP_VERSION = MCP_VERSIONS[-1]
FACTS = ("request", "failing_request", "invalid_params_request", "tool_call", "long_call", "ask_call",
         "verbose_args", "acp_prompt", "acp_permission_prompt")
# what the suite sends as an ACP client (ACP v1, Initialization): the request an agent answers at once
ACP_PROTOCOL_VERSION = 1
ACP_CLIENT_CAPABILITIES = {"fs": {"readTextFile": True, "writeTextFile": True}}
ACP_INITIALIZE = {"method": "initialize",
                  "params": {"protocolVersion": ACP_PROTOCOL_VERSION, "clientCapabilities": ACP_CLIENT_CAPABILITIES,
                             "clientInfo": {"name": "stdio-bus-conformance", "version": "1"}}}
# the default flow's prompt (no description, or one without [acp] prompt): short, asks for nothing
DEFAULT_ACP_PROMPT = "Reply with the single word: hello."
_PLACEHOLDER = re.compile(r"\{(ms|seconds|steps|text)\}")


def canonical(profiles) -> list[str]:
    """The claimed profiles, once each, in the order of PROFILES."""
    return [p for p in PROFILES if p in set(profiles)]


def clause_applies(clause_profiles: dict | None, claims, mcp_version: str) -> bool:
    """A clause applies to a worker that claims one of its profiles (for
    `mcp`, in one of the revisions listed, if any)."""
    for name, revisions in (clause_profiles or {}).items():
        if name in claims and (name != "mcp" or not revisions or mcp_version in revisions):
            return True
    return False


def speaks(claims, vehicle: str) -> bool:
    """Whether a test that talks `vehicle` can run: `mcp` needs an MCP
    server, `jsonrpc` a worker with JSON-RPC error codes (a JSON-RPC peer, an
    MCP server or an ACP agent: both protocols follow JSON-RPC 2.0), `plain`
    a stdio Bus worker."""
    if vehicle == "jsonrpc":
        return "jsonrpc" in claims or "mcp" in claims or "acp" in claims
    return vehicle in claims


@dataclass
class WorkerDescription:
    name: str = "worker"
    command: list = field(default_factory=list)
    profiles: list = field(default_factory=list)   # as claimed
    env: dict = field(default_factory=dict)
    verbose_args: list | None = None
    answer_timeout: float | None = None
    drain_timeout: float = 30.0
    request: dict | None = None
    failing_request: dict | None = None
    invalid_params_request: dict | None = None
    tool_call: dict | None = None
    long_call: dict | None = None
    long_call_ms: int | None = None
    ask_call: dict | None = None
    mcp_version: str | None = None
    acp_prompt: str | None = None
    acp_permission_prompt: str | None = None
    tool_call_note: str = ""                        # where tool_call comes from
    path: str | None = None

    @property
    def claims(self) -> list[str]:
        return canonical(self.profiles)

    @property
    def bus(self) -> bool:
        """A stdio Bus worker: it is sent sessionIds and raw-token ids."""
        return "plain" in self.claims

    @property
    def mcp_handshake(self) -> bool:
        """An MCP server that is not a bus worker: each process it runs is
        initialized first, as an MCP client does (behind the bus it must
        serve without, SB-R-4)."""
        return "mcp" in self.claims and "plain" not in self.claims

    @property
    def acp_handshake(self) -> bool:
        """An ACP agent (and not an MCP server or a bus worker): each process
        it runs gets `initialize` first, as an editor sends it (ACP
        Initialization: clients MUST initialize the connection before
        anything else; an agent may refuse other requests until then)."""
        return "acp" in self.claims and "mcp" not in self.claims and "plain" not in self.claims

    @property
    def handshake(self) -> bool:
        """Each process is initialized first, as the protocol's client does."""
        return self.mcp_handshake or self.acp_handshake

    def prompt(self) -> str:
        """The prompt of a turn that ends by itself: the description's, else the default flow's."""
        return self.acp_prompt or DEFAULT_ACP_PROMPT

    def claims_profile(self, profile: str) -> bool:
        return profile in self.claims

    def the_request(self) -> dict:
        """The request the worker answers at once: `ping` for an MCP worker,
        else the description's [request], else for an ACP agent `initialize`
        (ACP has no ping; initialize is the one request every agent serves
        before any session, and may be sent again), else `ping`."""
        if self.claims_profile("mcp"):
            return {"method": "ping"}
        if self.request is not None:
            return copy.deepcopy(self.request)
        if self.claims_profile("acp"):
            return copy.deepcopy(ACP_INITIALIZE)
        return {"method": "ping"}

    def has(self, fact: str) -> bool:
        if fact == "request" or (fact == "acp_prompt" and "acp" in self.claims):
            return True  # an ACP agent without a description gets the default flow's prompt
        return getattr(self, fact) is not None

    def argv(self, extra=()) -> list[str]:
        return list(self.command) + list(extra)

    def command_line(self) -> str:
        return shlex.join(self.command)


def fill(template, values: dict):
    """The template with "{ms}", "{steps}", "{text}" replaced (deep copy)."""
    if isinstance(template, dict):
        return {k: fill(v, values) for k, v in template.items()}
    if isinstance(template, list):
        return [fill(v, values) for v in template]
    if isinstance(template, str):
        m = _PLACEHOLDER.fullmatch(template)
        if m:
            if m.group(1) not in values:
                raise HarnessError(f"worker description: no value for {template} here")
            return values[m.group(1)]
        return _PLACEHOLDER.sub(lambda m: str(values.get(m.group(1), m.group(0))), template)
    return copy.deepcopy(template)


def mentions(template, name: str) -> bool:
    """True when the template uses the placeholder {name}."""
    if isinstance(template, dict):
        return any(mentions(v, name) for v in template.values())
    if isinstance(template, list):
        return any(mentions(v, name) for v in template)
    return isinstance(template, str) and f"{{{name}}}" in template


def _call(data, key, where) -> dict | None:
    if key not in data:
        return None
    c = data[key]
    if not isinstance(c, dict) or not isinstance(c.get("name"), str):
        raise HarnessError(f"{where}: {key} must be a table with a string name (and arguments)")
    if "arguments" in c and not isinstance(c["arguments"], dict):
        raise HarnessError(f"{where}: {key}.arguments must be a table")
    unknown = set(c) - {"name", "arguments"}
    if unknown:
        raise HarnessError(f"{where}: {key}: unknown keys {sorted(unknown)}")
    return {"name": c["name"], "arguments": dict(c.get("arguments", {}))}


def _request(data, key, where) -> dict | None:
    if key not in data:
        return None
    r = data[key]
    if not isinstance(r, dict) or not isinstance(r.get("method"), str):
        raise HarnessError(f"{where}: {key} must be a table with a string method (and params)")
    unknown = set(r) - {"method", "params"}
    if unknown:
        raise HarnessError(f"{where}: {key}: unknown keys {sorted(unknown)}")
    return dict(r)


def _check_profiles(profiles, where) -> list[str]:
    if not isinstance(profiles, list) or not all(isinstance(p, str) for p in profiles):
        raise HarnessError(f"{where}: profiles must be a list of strings")
    bad = [p for p in profiles if p not in PROFILES]
    if bad:
        raise HarnessError(f"{where}: unknown profile(s) {bad} (known: {', '.join(PROFILES)})")
    return list(profiles)


def load(path: str | os.PathLike) -> WorkerDescription:
    """Reads a description file."""
    path = Path(path)
    where = f"worker description {path}"
    try:
        with open(path, "rb") as f:
            data = tomllib.load(f)
    except FileNotFoundError:
        raise HarnessError(f"{where}: not found") from None
    except tomllib.TOMLDecodeError as exc:
        raise HarnessError(f"{where}: {exc}") from None
    known = {"name", "command", "profiles", "env", "verbose_args", "answer_timeout", "drain_timeout",
             "mcp_version", "request", "jsonrpc", "mcp", "acp"}
    unknown = set(data) - known
    if unknown:
        raise HarnessError(f"{where}: unknown keys {sorted(unknown)}")
    d = WorkerDescription(path=str(path.resolve()))
    if "name" in data:
        d.name = str(data["name"])
    for key in ("command", "verbose_args"):
        if key in data:
            if not isinstance(data[key], list) or not all(isinstance(x, str) for x in data[key]):
                raise HarnessError(f"{where}: {key} must be a list of strings")
            setattr(d, key, list(data[key]))
    if d.command and "/" in d.command[0] and not os.path.isabs(d.command[0]):
        d.command[0] = str((path.resolve().parent / d.command[0]).resolve())
    if "profiles" in data:
        d.profiles = _check_profiles(data["profiles"], where)
    if "mcp_version" in data:
        d.mcp_version = check_mcp_version(data["mcp_version"], where)
    if "env" in data:
        if not isinstance(data["env"], dict):
            raise HarnessError(f"{where}: env must be a table")
        d.env = {str(k): str(v) for k, v in data["env"].items()}
    for key in ("answer_timeout", "drain_timeout"):
        if key in data:
            try:
                value = float(data[key])
            except (TypeError, ValueError):
                raise HarnessError(f"{where}: {key} must be a number of seconds") from None
            if value <= 0:
                raise HarnessError(f"{where}: {key} must be positive")
            setattr(d, key, value)
    d.request = _request(data, "request", where)
    rpc = data.get("jsonrpc", {})
    mcp = data.get("mcp", {})
    if not isinstance(rpc, dict) or not isinstance(mcp, dict):
        raise HarnessError(f"{where}: [jsonrpc] and [mcp] must be tables")
    unknown = (set(rpc) - {"failing_request", "invalid_params_request"}) | \
        (set(mcp) - {"tool_call", "long_call", "long_call_ms", "ask_call"})
    if unknown:
        raise HarnessError(f"{where}: unknown keys {sorted(unknown)} in [jsonrpc]/[mcp]")
    d.failing_request = _request(rpc, "failing_request", f"{where} [jsonrpc]")
    d.invalid_params_request = _request(rpc, "invalid_params_request", f"{where} [jsonrpc]")
    for key in ("tool_call", "long_call", "ask_call"):
        setattr(d, key, _call(mcp, key, f"{where} [mcp]"))
    if "long_call_ms" in mcp:
        if not isinstance(mcp["long_call_ms"], int) or mcp["long_call_ms"] <= 0:
            raise HarnessError(f"{where} [mcp]: long_call_ms must be a positive integer")
        d.long_call_ms = mcp["long_call_ms"]
    if d.long_call is not None and not (mentions(d.long_call, "ms") or mentions(d.long_call, "seconds")) \
            and d.long_call_ms is None:
        raise HarnessError(f"{where} [mcp]: long_call has no \"{{ms}}\" or \"{{seconds}}\" argument: "
                           "give long_call_ms")
    if d.tool_call is not None:
        d.tool_call_note = "from the description"
    _load_acp(d, data.get("acp", {}), f"{where} [acp]")
    return d


def _load_acp(d: WorkerDescription, acp, where: str) -> None:
    """[acp]: the prompt texts the ACP agent tests send (WORKER_SPEC.md, Appendix G)."""
    if not isinstance(acp, dict) or set(acp) - {"prompt", "permission_prompt"}:
        raise HarnessError(f"{where}: a table of prompt and permission_prompt (strings)")
    for key in ("prompt", "permission_prompt"):
        if key in acp:
            if not isinstance(acp[key], str):
                raise HarnessError(f"{where}: {key} must be a string")
            setattr(d, f"acp_{key}", acp[key])


def check_mcp_version(value, where: str) -> str:
    if value not in MCP_VERSIONS:
        raise HarnessError(f"{where}: MCP revision {value!r} unknown (known: {', '.join(MCP_VERSIONS)})")
    return value


def parse_env(items) -> dict:
    env = {}
    for item in items or ():
        if "=" not in item or item.startswith("="):
            raise HarnessError(f"--worker-env {item!r}: expected KEY=VALUE")
        k, v = item.split("=", 1)
        env[k] = v
    return env


def resolve_program(argv: list[str]) -> list[str]:
    """argv with its program made absolute: a relative path with a slash is
    taken from the current directory, a bare name from PATH. The worker runs
    in a scratch directory, and reproducers run from anywhere."""
    if not argv:
        return argv
    prog = argv[0]
    if "/" in prog:
        prog = os.path.abspath(prog)
    else:
        prog = shutil.which(prog) or prog
    return [prog] + list(argv[1:])


def from_options(command: str | None, profiles, env_items, description: str | None,
                 mcp_version: str | None = None) -> WorkerDescription:
    """The description of this run: the file (if any), then the options."""
    d = load(description) if description else WorkerDescription()
    if mcp_version:
        d.mcp_version = check_mcp_version(mcp_version, "--mcp-version")
    if d.mcp_version is None:
        d.mcp_version = DEFAULT_MCP_VERSION
    if command:
        try:
            d.command = shlex.split(command)
        except ValueError as exc:
            raise HarnessError(f"--worker {command!r}: {exc}") from None
        if not description:
            d.name = os.path.basename(d.command[0]) if d.command else "worker"
    d.command = resolve_program(d.command)
    if profiles:
        d.profiles = _check_profiles(list(profiles), "--worker-profile")
    d.env = dict(d.env, **parse_env(env_items))
    return d


def problems(d: WorkerDescription) -> list[str]:
    """Why this description cannot run (empty when it can)."""
    out = []
    if not d.command:
        out.append("no worker command: pass --worker 'COMMAND ARGS' (or give command in the description)")
    elif not (os.path.isfile(d.command[0]) and os.access(d.command[0], os.X_OK)):
        out.append(f"worker not found or not executable: {d.command[0]}")
    if not d.profiles:
        out.append("the worker claims no profile: pass --worker-profile plain|jsonrpc|mcp "
                   "(or give profiles in the description)")
    return out


# -- a tool the suite may call, found in tools/list ---------------------------------------
_SIMPLE = {"string": "{text}", "number": 1, "integer": 1, "boolean": False}


def _value_for(schema) -> tuple[bool, object]:
    """(True, a value the property schema accepts) or (False, None)."""
    if not isinstance(schema, dict):
        return False, None
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return True, schema["enum"][0]
    if "const" in schema:
        return True, schema["const"]
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k in _SIMPLE), None)
    if kind in _SIMPLE:
        return True, _SIMPLE[kind]
    return False, None


def discover_tool_call(tools) -> tuple[dict | None, str]:
    """The tool call of an MCP worker without a description's tool_call, and
    a note saying why (WORKER_SPEC.md, Profiles): among the tools annotated
    read-only (readOnlyHint) and not open-world, one whose required
    arguments the suite can fill (strings, numbers, booleans, enums); a tool
    whose only required argument is a string first (it takes the text),
    then one without required arguments, then by name. None when no tool
    is safe to call or can be satisfied: the tool-call tests are then not
    judged."""
    if not isinstance(tools, list):
        return None, "tools/list gave no tool list"
    candidates = []
    for t in tools:
        if not isinstance(t, dict) or not isinstance(t.get("name"), str):
            continue
        ann = t.get("annotations") if isinstance(t.get("annotations"), dict) else {}
        if ann.get("readOnlyHint") is not True or ann.get("openWorldHint") is True:
            continue
        schema = t.get("inputSchema") if isinstance(t.get("inputSchema"), dict) else {}
        props = schema.get("properties") if isinstance(schema.get("properties"), dict) else {}
        required = schema.get("required") if isinstance(schema.get("required"), list) else []
        args, ok = {}, True
        for name in required:
            good, value = _value_for(props.get(name))
            ok = ok and isinstance(name, str) and good
            if ok:
                args[name] = value
        if not ok:
            continue
        texts = [k for k, v in args.items() if v == "{text}"]
        if len(texts) > 1:  # one text only; the others get a plain word
            for k in texts[1:]:
                args[k] = "suite"
        rank = 0 if len(required) == 1 and texts else 1 if not required else 2
        candidates.append((rank, len(required), t["name"], args))
    if not candidates:
        return None, ("no tool of tools/list is annotated read-only and closed-world with arguments "
                      "the suite can fill: the tool-call tests are not judged")
    rank, _, name, args = min(candidates, key=lambda c: c[:3])
    note = f"discovered in tools/list: {name!r} (read-only" + \
        (", takes the text)" if rank == 0 else ", no text argument)")
    return {"name": name, "arguments": args}, note
