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
"""

from __future__ import annotations

import itertools
import json
import os
import random
import shutil
import tempfile
import time
import zlib
from dataclasses import dataclass
from pathlib import Path

from . import worker_json as wj
from .errors import HarnessError
from .transcript import Recorder, render
from .worker_desc import WorkerDescription, fill
from .worker_proc import Line, WorkerError, WorkerProc, WorkerTimeout

SAMPLING_RESULT = {"role": "assistant", "content": {"type": "text", "text": "the suite answers"},
                   "model": "sb-conformance", "stopReason": "endTurn"}


@dataclass
class WorkerContext:
    """Options of the whole run, shared by every test."""
    desc: WorkerDescription
    seed: int
    timeout: float  # answer deadline ("at once")


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


class WorkerRun:
    def __init__(self, ctx: WorkerContext, nodeid: str):
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

    # -- processes -------------------------------------------------------------------
    def spawn(self, extra_args=(), env: dict | None = None, verbose: bool = False) -> WorkerProc:
        """Starts a worker: the description's command (plus its verbose_args
        when verbose), its environment on top of the suite's."""
        args = list(extra_args) + (list(self.desc.verbose_args or []) if verbose else [])
        full_env = dict(os.environ)
        full_env.update(self.desc.env)
        full_env.update(env or {})
        p = WorkerProc(self.desc.argv(args), full_env, self.workdir, self.recorder,
                       f"worker#{len(self.procs) + 1}", self.timeout)
        self.procs.append(p)
        return p

    def claims(self, profile: str) -> bool:
        return self.desc.claims_profile(profile)

    # -- messages --------------------------------------------------------------------
    def next_id(self) -> int:
        return next(self._ids)

    def rpc(self, method: str, params=None, *, id=None, session=None, notification: bool = False) -> Msg:
        """A JSON-RPC request (or notification). id and session: Python values
        or raw tokens (bytes); id defaults to a fresh number."""
        if notification:
            return Msg(envelope(method=method, params=params, session=_tok(session)))
        id_tok = _tok(self.next_id() if id is None else id)
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

    def invalid_params_requests(self, *, session=None) -> list[Msg]:
        """Requests whose params their method cannot take: the description's,
        and for an MCP worker initialize without protocolVersion and tools/call
        with arguments that are not an object."""
        out = []
        if self.desc.invalid_params_request is not None:
            r = self.desc.invalid_params_request
            out.append(self.rpc(r["method"], r.get("params"), session=session))
        if self.claims("mcp"):
            out.append(self.rpc("initialize", {"capabilities": {}, "clientInfo": CLIENT_INFO}, session=session))
            name = (self.desc.tool_call or {}).get("name", "echo")
            out.append(self.rpc("tools/call", {"name": name, "arguments": 5}, session=session))
        if not out:
            raise HarnessError("the worker description gives no invalid_params_request")
        return out

    def call_params(self, fact: str, *, token=None, **values) -> dict:
        """params of a tools/call for an [mcp] fact (tool_call, long_call,
        ask_call), placeholders filled."""
        c = self._fact(fact)
        values.setdefault("text", "hello from the suite")
        values.setdefault("steps", 1)
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
        from .worker_desc import mentions
        c = self._fact("long_call")
        return ms if mentions(c, "ms") else int(self.desc.long_call_ms)

    def long_steps(self) -> bool:
        from .worker_desc import mentions
        return mentions(self._fact("long_call"), "steps")

    def initialize(self, version: str = "2025-06-18", *, id=None, session=None) -> Msg:
        return self.rpc("initialize", {"protocolVersion": version, "capabilities": {},
                                       "clientInfo": CLIENT_INFO}, id=id, session=session)

    def cancel(self, request_id, *, session=None) -> Msg:
        """notifications/cancelled naming request_id (a Python value or raw token)."""
        params = b'{"requestId":' + _tok(request_id) + b',"reason":"the suite cancels it"}'
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
        timeout = self.timeout if timeout is None else timeout
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
        worker write."""
        try:
            self._workload(proc, malformed)
        except WorkerError:
            pass

    def _workload(self, proc: WorkerProc, malformed: bool) -> None:
        msgs = [self.request(id=1), self.request(id="a", session="s1"), self.request(id=-7, session="s2"),
                self.request(id=b'"\\u00e9t\\u00e9"', session=b'"caf\\u00e9"'),
                self.request(id="été 😀", session="sé"), self.request(notification=True, session="s1")]
        proc.send_lines([m.line for m in msgs])
        proc.send_pieces(self.request(id="pieces", session="s3").line, 3, 0.01)
        if malformed:
            proc.send_lines([b"{broken\n", b"not json at all\n", b'{"jsonrpc":"2.0"}\n', b"\n", b"  \t \n",
                             b'{"jsonrpc":"2.0","id":"resp-1","result":{}}\n'])
        if self.claims("jsonrpc"):
            proc.send_lines([self.rpc("no/such/method", id="nm", session="s1").line,
                             b'{"jsonrpc":"1.0","id":"v1","method":"ping"}\n',
                             b'{"jsonrpc":"2.0","id":"m5","method":5}\n', b"42\n",
                             b'{"jsonrpc":"2.0","id":"e1","error":{"code":-1,"message":"x"}}\n'])
        if self.claims("mcp"):
            proc.send_lines([self.initialize(id="init", session="s1").line,
                             self.notification("notifications/initialized", session="s1").line,
                             self.rpc("tools/list", id="tl", session="s1").line])
            if self.desc.tool_call is not None:
                proc.send(self.call("tool_call", id="tc", session="s1", text="line\nbreak é").line)
            if self.desc.long_call is not None:
                proc.send(self.call("long_call", id="lc", session="s2", token="tok-lc", ms=150, steps=3).line)
            if self.desc.ask_call is not None:
                proc.send(self.call("ask_call", id="ac", session="s2").line)
        sentinel = self.request(id="sentinel", session="s1")
        proc.send(sentinel.line)
        self.serve(proc, sentinel.key)
        if self.claims("mcp") and self.desc.long_call is not None:
            self.serve(proc, wj.key_of("lc"), self.timeout + self.long_ms(150) / 1000)
        if self.claims("mcp") and self.desc.ask_call is not None:
            self.serve(proc, wj.key_of("ac"))

    # -- teardown and artifacts ----------------------------------------------------------
    def stop(self) -> None:
        for p in self.procs:
            p.stop()

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


CLIENT_INFO = {"name": "stdio-bus-conformance", "version": "0.1.0"}
