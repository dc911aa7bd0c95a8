"""The `worker` fixture object: one worker-side test's view of the worker
under test.

    w = worker.spawn()                         # a fresh worker process
    m = worker.request(session="s1")           # the description's request
    w.send(m.line)
    reply = w.answer(m.key)                    # its response, as an object
    m = worker.rpc("tools/list", id=7)         # any JSON-RPC request
    m = worker.call("long_call", ms=300, token="t1")   # an MCP tool call
    worker.serve(w, m.key)                     # waits, answering the worker's own requests

Every builder returns a Msg: the exact line to write (raw tokens, so ids like
`1.0` can be sent) and the key its answer is matched by.

How the suite talks follows from the profiles the worker claims
(WORKER_SPEC.md, Profiles): a sessionId is sent only to a `plain` worker (the
`session=` arguments are dropped otherwise); an MCP server that is not a bus
worker is initialized when spawned; requests the worker sends on its own are
answered as its client would, whenever a test waits (spawn(auto_reply=False)
for tests that answer them themselves). What the preflight found
(worker/preflight.py) blocks the tests that would stand on it: they are skipped
with a reason that starts "blocked:" and names the root cause.
"""

from __future__ import annotations

import itertools
import json
import os
import random
import shutil
import signal
import tempfile
import time
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from . import rawjson as wj
from ..common import context
from ..common.errors import HarnessError
from ..common.transcript import Recorder, render
from .description import ACP_INITIALIZE, WorkerDescription, fill, mentions, speaks
from .inputs import kind_of, kinds_in
from .process import Line, WorkerError, WorkerProc, WorkerTimeout

SAMPLING_RESULT = {"role": "assistant", "content": {"type": "text", "text": "the suite answers"},
                   "model": "sb-conformance", "stopReason": "endTurn"}
CLIENT_INFO = {"name": "stdio-bus-conformance", "version": "0.1.0"}
# what the suite declares as an MCP client: it answers sampling requests (SAMPLING_RESULT)
CLIENT_CAPABILITIES = {"sampling": {}}


@dataclass
class WorkerContext:
    """Options of the whole run, shared by every test."""
    desc: WorkerDescription
    seed: int
    timeout: float  # answer deadline ("at once")
    first_timeout: float = 0.0  # deadline of a fresh worker's first answer (its start-up: the pace)
    preflight: dict = field(default_factory=dict)  # preflight.run(): findings, tool call
    selected: set | None = None  # names of the test functions this run runs (None: unknown)

    @property
    def mcp_version(self) -> str:
        return self.desc.mcp_version


@dataclass(frozen=True)
class Msg:
    line: bytes
    key: tuple | None = None  # id key of a request (None: a notification or other line)

    @property
    def obj(self):
        return wj.parse(self.line)


def envelope(*, id: bytes | None = None, method=None, params=None, session: bytes | None = None,
             extra: dict | None = None) -> bytes:
    """`{"jsonrpc":"2.0","id":<id>,"method":...,"params":...,"sessionId":<session>}` with
    id and session given as raw tokens; params as a Python value (or raw
    bytes)."""
    parts = [b'"jsonrpc":"2.0"']
    if id is not None:
        parts.append(b'"id":' + id)
    if method is not None:
        parts.append(b'"method":' + wj.token(method))
    if params is not None:
        parts.append(b'"params":' + (params if isinstance(params, bytes) else wj.token(params)))
    for k, v in (extra or {}).items():
        parts.append(wj.token(k) + b":" + (v if isinstance(v, bytes) else wj.token(v)))
    if session is not None:
        parts.append(b'"sessionId":' + session)
    return b"{" + b",".join(parts) + b"}\n"


def _tok(value) -> bytes | None:
    """A raw token: bytes are taken as they are, anything else is encoded."""
    if value is None:
        return None
    return value if isinstance(value, bytes) else wj.token(value)


# the clauses about sessionIds: their tests cannot run without sending one
SESSION_CLAUSES = frozenset({"SB-W-9", "SB-W-10", "SB-W-12", "SB-R-2", "SB-R-5", "SB-F-11"})


class WorkerRun:
    def __init__(self, ctx: WorkerContext, nodeid: str, clauses=()):
        self.ctx = ctx
        self.desc = ctx.desc
        self.nodeid = nodeid
        self.timeout = ctx.timeout
        self.drain_timeout = ctx.desc.drain_timeout
        self.seed = (ctx.seed ^ zlib.crc32(nodeid.encode())) & 0xFFFFFFFF
        self.rng = random.Random(self.seed)
        self.workdir = Path(tempfile.mkdtemp(prefix="sbw-"))
        self.recorder = Recorder()
        self.procs: list[WorkerProc] = []
        self._ids = itertools.count(1)
        self.test_name = nodeid.split("::")[-1].split("[")[0]
        self.clauses = set(clauses)
        self.findings = {f["key"]: f for f in (ctx.preflight or {}).get("findings", [])}
        foreign = self.findings.get("foreign-member")
        # sessionIds go to a bus worker, unless it drops messages that carry one (preflight):
        # then only the test that names that root cause sends them
        if foreign is not None and ctx.selected is not None and foreign["test"] not in ctx.selected:
            foreign = None
        self.sessions_ok = self.desc.bus and (foreign is None or foreign["test"] == self.test_name)
        # a worker that takes no string id (preflight) gets integers instead, except in the test
        # that names it; the MCP handshake always gets integers, so that test reaches its own ids
        self.handshake_int_ids = bool((ctx.preflight or {}).get("int_ids"))
        self.int_ids = self.handshake_int_ids and not self._names("string-ids")
        self._int_of: dict = {}
        self._in_handshake = False

    def _names(self, key: str) -> bool:
        """Whether this test is the one that names the root cause `key`."""
        f = self.findings.get(key)
        return f is not None and f["test"] == self.test_name

    # -- what the preflight found ---------------------------------------------------------
    def blocked_by(self, key: str) -> None:
        """Skips the test as blocked when the preflight found the root cause
        `key` and this test is not the one that names it."""
        f = self.findings.get(key)
        if f is not None and f.get("environment"):  # no defect: not judged here (summary.ENV_BLOCKED)
            pytest.skip(f"blocked: environment: {f['summary']}")
        selected = self.ctx.selected
        # a root cause whose own test is left out of the run is not named: nothing is blocked by it
        if f is not None and f["test"] != self.test_name and (selected is None or f["test"] in selected):
            pytest.skip(f"blocked: {f['summary']} (root cause, named by {f['clause']} in {f['test']})")

    def poisoned(self, line: bytes) -> bool:
        """Whether the preflight found that this kind of line kills the worker
        or stops its answers (worker/inputs.py)."""
        return f"poison:{kind_of(line, self.mcp_only)}" in self.findings

    def harmless(self, lines) -> list[bytes]:
        """The lines without those that kill the worker, for tests that send
        them only to make it write (the workload)."""
        return [line for line in lines if not self.poisoned(line)]

    def _before_send(self, data: bytes) -> None:
        """A test about to write a kind of input the worker dies on is
        blocked by that root cause, unless it is the test that names it."""
        if not self.speaks_jsonrpc() or not any(k.startswith("poison:") for k in self.findings):
            return
        for kind in sorted(kinds_in(data, self.mcp_only)):
            self.blocked_by(f"poison:{kind}")

    @property
    def mcp_only(self) -> bool:
        """Judged as an MCP server only: ids never null, params an object."""
        return self.claims("mcp") and not self.claims("jsonrpc") and not self.bus

    def uses_sessions(self) -> bool:
        """Whether this test may send sessionIds (in raw lines of its own):
        to a bus worker, unless the preflight found it drops such messages.
        A test of a session clause is then blocked; others go on without."""
        if self.desc.bus and not self.sessions_ok and self.clauses & SESSION_CLAUSES:
            self.blocked_by("foreign-member")
        return self.sessions_ok

    # -- processes -------------------------------------------------------------------
    def spawn(self, extra_args=(), env: dict | None = None, verbose: bool = False,
              handshake: bool | None = None, auto_reply: bool = True) -> WorkerProc:
        """Starts a worker: the description's command (plus its verbose_args
        when verbose), its environment on top of the suite's. handshake (by
        default for an MCP server that is not a bus worker): initialize it
        first, as an MCP client does. auto_reply: answer the requests it
        sends whenever the test waits (False: the test answers them)."""
        self.blocked_by("silent")
        handshake = self.desc.handshake if handshake is None else handshake
        if handshake:
            self.blocked_by("initialize")
        args = list(extra_args) + (list(self.desc.verbose_args or []) if verbose else [])
        full_env = dict(os.environ)
        full_env.update(self.desc.env)
        full_env.update(env or {})
        p = WorkerProc(self.desc.argv(args), full_env, self.workdir, self.recorder,
                       f"worker#{len(self.procs) + 1}", self.timeout, self.ctx.first_timeout)
        self.procs.append(p)
        # what the preflight timed (its pace): a turn or a tool's work is no round trip
        p.timed = {"initialize", "ping", self.desc.the_request()["method"]}
        p.auto_reply = self.reply_to if auto_reply else None
        p.before_signal = self._before_signal
        p.before_send = self._before_send
        if handshake:
            self.handshake(p)
        return p

    def _before_signal(self, sig: int) -> None:
        if sig == signal.SIGTERM:
            self.blocked_by("sigterm")

    def handshake(self, proc: WorkerProc) -> dict:
        """initialize (the run's MCP revision), then notifications/initialized:
        what an MCP client sends first; then a ping round trip, while which
        the requests the worker sends on being initialized (roots/list...)
        are answered, so a test starts on a settled session. Returns the
        initialize result."""
        self._in_handshake = True
        try:
            if self.desc.acp_handshake:
                return self._acp_handshake(proc)
            m = self.initialize(id=f"sb-init-{self.next_id()}")
            proc.send(m.line)
            line = self.serve(proc, m.key)
            result = line.obj.get("result")
            if not isinstance(result, dict):
                raise WorkerError(f"{proc.name}: initialize failed, so the MCP session cannot start: "
                                  f"{line.data[:300]!r}")
            ping = self.rpc("ping", id=f"sb-init-{self.next_id()}")
            proc.send(self.notification("notifications/initialized").line + ping.line)
            pong = self.serve(proc, ping.key)
            # what the handshake made it write (a reply to notifications/initialized is SB-T-11's
            # to judge) must not pass for an answer to the test's first input
            proc.forget_before(pong)
            proc.settled = pong.seq
            return result
        finally:
            self._in_handshake = False

    def _acp_handshake(self, proc: WorkerProc) -> dict:
        """ACP Initialization: `initialize` (protocol v1, the fs client
        capabilities), nothing after it; what the agent wrote meanwhile is
        no answer to the test's first input."""
        m = self.rpc("initialize", ACP_INITIALIZE["params"], id=f"sb-init-{self.next_id()}")
        proc.send(m.line)
        line = self.serve(proc, m.key)
        result = line.obj.get("result")
        if not isinstance(result, dict):
            raise WorkerError(f"{proc.name}: initialize failed, so the ACP connection cannot start: "
                              f"{line.data[:300]!r}")
        proc.forget_before(line)
        proc.settled = line.seq
        return result

    def claims(self, profile: str) -> bool:
        return self.desc.claims_profile(profile)

    @property
    def bus(self) -> bool:
        """A stdio Bus worker (`plain`): sessionIds and raw-token ids."""
        return self.desc.bus

    def speaks_jsonrpc(self) -> bool:
        return speaks(self.desc.claims, "jsonrpc")

    def takes_batches(self) -> bool:
        """JSON-RPC batches are the worker's business: `jsonrpc`, or `mcp`
        of a revision that has them (WORKER_SPEC.md, SB-J-12)."""
        return self.claims("jsonrpc") or (self.claims("mcp") and self.desc.mcp_version == "2025-03-26")

    def error_id_ok(self, obj: dict) -> bool:
        """The id of an error whose request id could not be read: null, or
        for an MCP server of 2025-11-25 or later also absent."""
        if "id" in obj:
            return obj["id"] is None
        return self.claims("mcp") and not self.claims("jsonrpc") and self.desc.mcp_version >= "2025-11-25"

    # -- messages --------------------------------------------------------------------
    def next_id(self) -> int:
        return next(self._ids)

    def id_token(self, value) -> bytes:
        """The token of an id (a Python value or raw bytes). For a worker that
        takes no string id (preflight), a string id becomes an integer, the
        same one each time in this test, so keys and cancellations agree."""
        tok = _tok(value)
        if not (self.int_ids or (self._in_handshake and self.handshake_int_ids)):
            return tok
        v = wj.parse(tok)
        if not isinstance(v, str):
            return tok
        return wj.token(self._int_of.setdefault(v, 900000 + len(self._int_of)))

    def judge_each(self, cases, judge, *, handshake: bool | None = None) -> None:
        """judge(proc, case) for every case, each judged on its own: a case
        that fails does not stop the others, and after one the worker dies on
        or stops answering, the next runs on a fresh worker. Fails once, with
        every failing case."""
        failures = []
        proc = self.spawn(handshake=handshake)
        for case in cases:
            try:
                judge(proc, case)
            except AssertionError as exc:
                failures.append(str(exc))
            except WorkerError as exc:
                failures.append(f"{case!r}: {exc}")
                proc = self.spawn(handshake=handshake)
        assert not failures, f"{len(failures)} of {len(cases)} cases fail: " + "; ".join(failures)

    def rpc(self, method: str, params=None, *, id=None, session=None, notification: bool = False) -> Msg:
        """A JSON-RPC request (or notification). id and session: Python values
        or raw tokens (bytes); id defaults to a fresh number. The session is
        sent only to a bus worker."""
        if session is not None and not self.uses_sessions():
            session = None
        if notification:
            return Msg(envelope(method=method, params=params, session=_tok(session)))
        id_tok = self.id_token(self.next_id() if id is None else id)
        return Msg(envelope(id=id_tok, method=method, params=params, session=_tok(session)),
                   wj.id_key(id_tok))

    def request(self, *, id=None, session=None, notification: bool = False) -> Msg:
        """The description's request, the one the worker answers at once."""
        r = self.desc.the_request()
        return self.rpc(r["method"], r.get("params"), id=id, session=session, notification=notification)

    def notification(self, method: str, params=None, session=None) -> Msg:
        return self.rpc(method, params, session=session, notification=True)

    def failing_request(self, *, id=None, session=None) -> Msg:
        r = self._fact("failing_request")
        return self.rpc(r["method"], r.get("params"), id=id, session=session)

    def invalid_params_request(self, *, session=None) -> Msg:
        """The description's request whose params its method cannot take."""
        r = self._fact("invalid_params_request")
        return self.rpc(r["method"], r.get("params"), session=session)

    def call_params(self, fact: str, *, token=None, **values) -> dict:
        """params of a tools/call for an [mcp] fact (tool_call, long_call,
        ask_call), placeholders filled."""
        c = self._fact(fact)
        values.setdefault("text", "hello from the suite")
        values.setdefault("steps", 1)
        if "ms" in values:
            values.setdefault("seconds", values["ms"] / 1000)
        params = {"name": c["name"], "arguments": fill(c.get("arguments", {}), values)}
        if token is not None:
            params["_meta"] = {"progressToken": token}
        return params

    def call(self, fact: str, *, id=None, session=None, token=None, **values) -> Msg:
        """tools/call of an [mcp] fact. token: a progress token (a Python value)."""
        return self.rpc("tools/call", self.call_params(fact, token=token, **values), id=id, session=session)

    def call_raw_token(self, fact: str, token: bytes, *, id=None, session=None, **values) -> Msg:
        """tools/call with a progress token given as raw bytes."""
        params = self.call_params(fact, **values)
        params["_meta"] = {"progressToken": "\x00TOKEN\x00"}
        raw = wj.token(params).replace(wj.token("\x00TOKEN\x00"), token)
        return self.rpc("tools/call", raw, id=id, session=session)

    def long_ms(self, ms: int) -> int:
        """How long a long_call asked to run `ms` actually runs."""
        c = self._fact("long_call")
        return ms if mentions(c, "ms") or mentions(c, "seconds") else int(self.desc.long_call_ms)

    def long_steps(self) -> bool:
        return mentions(self._fact("long_call"), "steps")

    def tool_text(self) -> bool:
        """Whether the tool call carries the test's text (T-1, T-2 need it)."""
        return mentions(self._fact("tool_call"), "text")

    def initialize(self, version: str | None = None, *, id=None, session=None, params: dict | None = None
                   ) -> Msg:
        """initialize with the run's MCP revision (or `version`); params
        replaces the whole params object."""
        if params is None:
            params = {"protocolVersion": version or self.desc.mcp_version,
                      "capabilities": CLIENT_CAPABILITIES, "clientInfo": CLIENT_INFO}
        return self.rpc("initialize", params, id=id, session=session)

    def cancel(self, request_id, *, session=None) -> Msg:
        """notifications/cancelled naming request_id (a Python value or raw token)."""
        params = b'{"requestId":' + self.id_token(request_id) + b',"reason":"the suite cancels it"}'
        return self.rpc("notifications/cancelled", params, session=session, notification=True)

    def _fact(self, fact: str):
        value = getattr(self.desc, fact, None)
        if value is None:
            raise HarnessError(f"the worker description gives no {fact}: mark the test "
                               f"@pytest.mark.requires({fact!r})")
        return value

    # -- playing the client ------------------------------------------------------------
    @staticmethod
    def client_result(req: dict) -> dict:
        """What the suite, as the worker's client, answers to a request of the
        worker (sampling, elicitation, roots, ping)."""
        method = req.get("method")
        if method == "sampling/createMessage":
            return {"result": SAMPLING_RESULT}
        if method == "elicitation/create":
            return {"result": {"action": "decline"}}
        if method == "roots/list":
            return {"result": {"roots": []}}
        if method == "ping":
            return {"result": {}}
        return {"error": {"code": -32601, "message": "Method not found"}}

    def reply_to(self, proc: WorkerProc, line: Line, member: dict | None = None) -> bytes:
        """Answers a request the worker sent: its id and sessionId copied as raw
        tokens; member: {"result": ...} or {"error": ...} (default: client_result)."""
        obj = line.obj
        member = member or self.client_result(obj)
        (name, value), = member.items()
        out = envelope(id=line.raw("id"), session=line.raw("sessionId")
                       if isinstance(obj.get("sessionId"), str) else None,
                       extra={name: value})
        proc.send(out)
        return out

    def serve(self, proc: WorkerProc, key, timeout: float | None = None, answer: bool = True) -> Line:
        """Waits for the response with id key, answering (when answer) every
        request the worker sends meanwhile. Returns the response line."""
        timeout = proc.patience(self.timeout if timeout is None else timeout)
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise WorkerTimeout(f"{proc.name}: no response with id {key} within {timeout:g} s")
            line = proc.take(lambda l: l.is_response_to(key) or (answer and l.kind == "request"),
                             left, f"response with id {key}")
            if line.kind == "response":
                return line
            self.reply_to(proc, line)

    def exchange(self, proc: WorkerProc, lines, *, session=None, timeout: float | None = None
                 ) -> tuple[list[Line], dict]:
        """Writes lines (bytes or a list of them) and a sentinel request in one
        write; returns (what the worker wrote before the sentinel's answer,
        that answer). Since a worker handles its input in order, `before` is
        everything the lines made it write at once."""
        sentinel = self.request(id=f"sb-sync-{self.next_id()}", session=session)
        data = b"".join(lines) if isinstance(lines, (list, tuple)) else bytes(lines)
        proc.send(data + sentinel.line)
        before, answer = proc.until(sentinel.key, timeout)
        return before, answer.obj

    def workload(self, proc: WorkerProc, *, malformed: bool = True) -> None:
        """Traffic of every kind the claimed profiles allow, for the tests
        that judge each line the worker writes: requests with many ids and
        sessions (raw and escaped non-ASCII), notifications, a line in pieces,
        malformed input (when malformed), and per profile invalid requests,
        unknown methods, the MCP lifecycle, tools and progress. Ends with a
        sentinel request; waits (bounded) for its answer, answering the
        worker's own requests. Whether answers are right (or come at all: a
        worker may die halfway) is other tests' business: this only makes the
        worker write. A kind of input the preflight found the worker dies on
        is left out: its own test names that (worker/inputs.py)."""
        try:
            self._workload(proc, malformed)
        except WorkerError:
            pass

    def _workload(self, proc: WorkerProc, malformed: bool) -> None:
        def send_some(lines):
            if lines:
                proc.send_lines(lines)
        msgs = [self.request(id=1), self.request(id="a", session="s1"), self.request(id=-7, session="s2"),
                self.request(id=b'"\\u00e9t\\u00e9"', session=b'"caf\\u00e9"'),
                self.request(id="été 😀", session="sé"), self.request(notification=True, session="s1")]
        proc.send_lines([m.line for m in msgs])
        proc.send_pieces(self.request(id="pieces", session="s3").line, 3, 0.01)
        if malformed:
            send_some(self.harmless([b"{broken\n", b"not json at all\n", b'{"jsonrpc":"2.0"}\n', b"\n",
                                     b"  \t \n", b'{"jsonrpc":"2.0","id":"resp-1","result":{}}\n']))
        if self.speaks_jsonrpc():
            send_some(self.harmless([self.rpc("no/such/method", id="nm", session="s1").line,
                                     b'{"jsonrpc":"1.0","id":"v1","method":"ping"}\n',
                                     b'{"jsonrpc":"2.0","id":"m5","method":5}\n', b"42\n",
                                     b'{"jsonrpc":"2.0","id":"e1","error":{"code":-1,"message":"x"}}\n']))
        if self.claims("mcp"):
            if not self.desc.mcp_handshake:  # an MCP server alone was initialized when spawned
                proc.send_lines([self.initialize(id="init", session="s1").line,
                                 self.notification("notifications/initialized", session="s1").line])
            proc.send(self.rpc("tools/list", id="tl", session="s1").line)
            if self.desc.tool_call is not None:
                proc.send(self.call("tool_call", id="tc", session="s1", text="line\nbreak é").line)
            if self.desc.long_call is not None:
                long = self.call("long_call", id="lc", session="s2", token="tok-lc", ms=150, steps=3)
                proc.send(long.line)
            if self.desc.ask_call is not None:
                ask = self.call("ask_call", id="ac", session="s2")
                proc.send(ask.line)
        sentinel = self.request(id="sentinel", session="s1")
        proc.send(sentinel.line)
        self.serve(proc, sentinel.key)
        if self.claims("mcp") and self.desc.long_call is not None:
            self.serve(proc, long.key, self.timeout + self.long_ms(150) / 1000)
        if self.claims("mcp") and self.desc.ask_call is not None:
            self.serve(proc, ask.key)

    # -- teardown and artifacts ----------------------------------------------------------
    def stop(self) -> None:
        for p in self.procs:
            p.stop()

    def slow_notes(self) -> list[str]:
        """What this test saw the worker take far longer for than its
        preflight did (common/pace.py): a note, not a failure, so that a wait
        of this test that ran out is read for what it may be."""
        pace, slowest = context.pace(), {}
        for p in self.procs:
            for kind, seconds in p.round_trips:
                slowest[kind] = max(slowest.get(kind, 0.0), seconds)
        waits = {"answer": self.timeout, "initialize": max(self.timeout, self.ctx.first_timeout)}
        return [n for n in (pace.slow_note(k, s, waits[k]) for k, s in slowest.items()) if n]

    def transcript(self) -> str:
        return render(self.recorder)

    def write_artifacts(self, dest: Path, command: str) -> None:
        dest.mkdir(parents=True, exist_ok=True)
        (dest / "transcript.txt").write_text(self.transcript())
        (dest / "worker.stderr").write_bytes(b"".join(
            (f"--- {p.name} (pid {p.pid}): {' '.join(p.argv)}\n".encode() if len(self.procs) > 1 else b"")
            + p.stderr_bytes() for p in self.procs))
        (dest / "worker.stdout").write_bytes(b"".join(
            (f"--- {p.name} (pid {p.pid})\n".encode() if len(self.procs) > 1 else b"") + bytes(p.stdout)
            for p in self.procs))
        d = self.desc
        (dest / "worker.txt").write_text(json.dumps({
            "command": d.command, "claims": d.claims, "env": d.env, "description": d.path,
            "processes": [{"name": p.name, "pid": p.pid, "argv": p.argv, "status": p.returncode,
                           "killed_by_suite": p.killed} for p in self.procs]}, indent=2) + "\n")
        (dest / "seed").write_text(f"{self.ctx.seed}\n")
        (dest / "command.txt").write_text(command + "\n")

    def cleanup(self) -> None:
        shutil.rmtree(self.workdir, ignore_errors=True)

