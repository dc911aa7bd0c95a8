"""The worker preflight: what most worker tests stand on, checked once per
run before them (WORKER_SPEC.md, "Preflight and root causes").

    result = run(ctx)       # {"findings": [...], "tool_call": ..., "tool_note": ..., "seconds": ...}

Probes, each on a fresh process, each wait bounded by the answer deadline
(SIGTERM: drain_timeout):

* silent: the worker answers its simplest request (the description's; `ping`
  for MCP), after `initialize` for an MCP server that is not a bus worker;
* initialize: that MCP server answers `initialize` with a result;
* foreign-member (`plain`): a request carrying a top-level sessionId is
  answered too;
* sigterm (`plain`): SIGTERM ends an idle worker by itself;
* id shapes (`jsonrpc`, `mcp`): a worker that answers no request with a
  string id is tried again, on a fresh process, with integer ids; when those
  are answered, the root cause is named once (SB-W-7) and the run goes on
  with integer ids (WorkerRun.int_ids) instead of blocking every test;
* poisons (`jsonrpc`, `mcp`): each kind of input of worker/inputs.py, then
  a request: a worker that dies on that kind, or stops answering after it,
  is named once by the test of that input's clause (worker/inputs.py);
* notifications (`jsonrpc`, `mcp`): a worker that answers one is named once
  (SB-J-10), and SB-T-11, its special case, is blocked.

A finding names its root cause once: the clause it breaks and the test that
judges it (that test runs as usual). Every other test that would stand on it
is skipped as blocked when it gets there (WorkerRun.blocked_by). Also, for an
MCP server without a description's tool_call, the tool the tool-call tests
use is chosen here from tools/list (description.discover_tool_call).
"""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
import time

from . import rawjson as wj
from ..common.pace import FIRST_CONTACT, Pace, first_contact
from ..common.transcript import Recorder, render
from .description import WorkerDescription, discover_tool_call, speaks
from .inputs import POISONS, namer
from .process import WorkerError, WorkerProc, WorkerTimeout

# root cause -> (clause, the test that names it)
SILENT_PLAIN = ("SB-W-1", "test_every_complete_line_is_handled")
SILENT_RPC = ("SB-J-16", "test_every_request_gets_exactly_one_response")
INITIALIZE = ("SB-T-8", "test_initialize_answers_version_capabilities_and_server_info")
FOREIGN = ("SB-W-12", "test_a_request_with_members_it_does_not_know_is_answered")
SIGTERM = ("SB-W-11", "test_sigterm_when_idle_ends_the_worker_by_itself")
STRING_IDS = ("SB-W-7", "test_response_carries_the_request_id")
NOTIFICATIONS = ("SB-J-10", "test_notifications_get_no_answer")
BASELINE_METHODS = ("SB-G-10", "test_acp_has_the_baseline_session_methods")


PACE = Pace()  # what this run's preflight measured (run() starts it anew)


def _finding(key: str, where: tuple, summary: str) -> dict:
    return {"key": key, "clause": where[0], "test": where[1], "summary": summary}


FIRST = FIRST_CONTACT  # this run's first contact (pace.first_contact)

class _Probe:
    """One preflight process: the suite's client side, stripped down."""

    def __init__(self, desc: WorkerDescription, timeout: float, recorder: Recorder, workdir: str, n: int,
                 int_ids: bool = False, first_timeout: float | None = None):
        env = dict(os.environ)
        env.update(desc.env)
        self.desc, self.timeout = desc, timeout
        self.proc = WorkerProc(desc.argv(), env, workdir, recorder, f"preflight#{n}", timeout,
                               first_timeout or PACE.bound("initialize", FIRST if not PACE.initialize
                                                           else timeout))
        self.proc.auto_reply = self._reply
        self.ids = 0
        self.int_ids = int_ids  # integer ids only (a worker that takes no string id)

    @staticmethod
    def _reply(proc, line):
        from .run import WorkerRun, envelope
        member = WorkerRun.client_result(line.obj)
        (name, value), = member.items()
        proc.send(envelope(id=line.raw("id"), extra={name: value}))

    def ask(self, method: str, params=None, session: bytes | None = None, before: list | None = None,
            timeout: float | None = None):
        """Sends a request; its response object, or None when none came in
        time (timeout, else the answer deadline; or the worker ended).
        before: gets the lines the worker wrote before that response."""
        from .run import envelope
        self.ids += 1
        rid = wj.token(self.ids if self.int_ids else f"sb-preflight-{self.ids}")
        self.proc.send(envelope(id=rid, method=method, params=params, session=session))
        first, t0 = not self.proc.lines, time.monotonic()
        try:
            earlier, answer = self.proc.until(wj.id_key(rid), timeout or self.timeout)
        except WorkerError:
            return None
        if timeout is None:  # a turn of an agent is no round trip: it does not set the pace
            PACE.saw("initialize" if first else "answer", time.monotonic() - t0)
        if before is not None:
            before.extend(earlier)
        return answer.obj

    def notify(self, method: str) -> None:
        from .run import envelope
        self.proc.send(envelope(method=method))

    def send(self, line: bytes) -> bool:
        """Writes a line; False when the worker's stdin is closed."""
        try:
            self.proc.send(line)
            return True
        except WorkerError:
            return False

    def stop(self) -> None:
        self.proc.stop()


def _request(desc: WorkerDescription) -> tuple[str, object]:
    r = desc.the_request()
    return r["method"], r.get("params")


def _initialized(init) -> bool:
    return isinstance(init, dict) and isinstance(init.get("result"), dict)


def _start(desc: WorkerDescription, timeout: float, recorder: Recorder, workdir: str, n: int,
           int_ids: bool) -> tuple[_Probe, object, object]:
    """A probe process, initialized as an MCP client does (when it is an MCP
    server alone), that has been sent the simplest request: (probe, the
    initialize response, that request's response)."""
    from .run import CLIENT_CAPABILITIES, CLIENT_INFO
    p = _Probe(desc, timeout, recorder, workdir, n, int_ids)
    init = None
    if desc.mcp_handshake:
        init = p.ask("initialize", {"protocolVersion": desc.mcp_version,
                                    "capabilities": CLIENT_CAPABILITIES, "clientInfo": CLIENT_INFO})
        if _initialized(init):
            p.notify("notifications/initialized")
    elif desc.acp_handshake and desc.request is not None:  # else its request is initialize itself
        from .description import ACP_INITIALIZE
        init = p.ask("initialize", ACP_INITIALIZE["params"])
    method, params = _request(desc)
    return p, init, p.ask(method, params)


def _time_initialize(desc: WorkerDescription, timeout: float, recorder: Recorder, workdir: str) -> None:
    """A bus worker that claims MCP is sent `initialize` by the tests, not
    first: how long a fresh one takes to answer it is timed here (the pace
    of every later initialize; a server may load before it answers)."""
    from .run import CLIENT_CAPABILITIES, CLIENT_INFO
    p = _Probe(desc, timeout, recorder, workdir, 9, first_timeout=FIRST)
    try:
        p.ask("initialize", {"protocolVersion": desc.mcp_version, "capabilities": CLIENT_CAPABILITIES,
                             "clientInfo": CLIENT_INFO})
    finally:
        p.stop()


def run(desc: WorkerDescription, timeout: float, fixed: float | None = None) -> dict:
    """The preflight of one run; never raises for what the worker does.
    Its first probe waits FIRST_CONTACT for a first answer (no pace is known
    yet); the pace it measures (a fresh worker's first answer, a round trip
    after it) bounds the waits of the probes after it and of the tests
    (result["pace"])."""
    global PACE, FIRST
    PACE, FIRST = Pace(), first_contact(fixed)
    t0 = time.monotonic()
    recorder = Recorder()
    workdir = tempfile.mkdtemp(prefix="sbw-preflight-")
    findings: list[dict] = []
    tool_call, tool_note = None, ""
    method, params = _request(desc)
    int_ids = False
    try:
        p, init, answer = _start(desc, timeout, recorder, workdir, 1, False)
        if "mcp" in desc.claims and not desc.mcp_handshake and answer is not None:
            _time_initialize(desc, timeout, recorder, workdir)
        timeout = PACE.bound("answer", timeout)
        try:
            if answer is None and speaks(desc.claims, "jsonrpc") and not desc.bus:
                # strings and integers are both valid ids (JSON-RPC 2.0 section 4, MCP messages):
                # one shape refused is one root cause, and the rest is judged with the other
                q, q_init, q_answer = _start(desc, timeout, recorder, workdir, 2, True)
                if q_answer is not None:
                    p.stop()
                    p, init, answer, int_ids = q, q_init, q_answer, True
                    findings.append(_finding("string-ids", STRING_IDS,
                                             "the worker answers no request whose id is a string, and answers "
                                             "the same request with an integer id: the run goes on with "
                                             "integer ids"))
                else:
                    q.stop()
            if answer is None and (init is None or not desc.mcp_handshake):
                where = SILENT_PLAIN if desc.bus else SILENT_RPC
                what = f"`{method}`" + (" nor `initialize`" if desc.mcp_handshake else "")
                findings.append(_finding("silent", where, f"the worker answers no request: neither {what} "
                                         f"got an answer within {timeout:g} s"))
            elif desc.mcp_handshake and not _initialized(init):
                got = "no answer" if init is None else f"{init.get('error', init)!r}"[:200]
                findings.append(_finding("initialize", INITIALIZE,
                                         f"the worker does not initialize an MCP session: `initialize` got {got}"))
            if answer is not None and "mcp" in desc.claims and desc.tool_call is None:
                tools = p.ask("tools/list")
                result = tools.get("result") if isinstance(tools, dict) else None
                tool_call, tool_note = discover_tool_call(result.get("tools") if isinstance(result, dict)
                                                          else None)
            if answer is not None and desc.bus:
                if p.ask(method, params, session=b'"sb-preflight"') is None:
                    ended = "" if p.proc.running else " (it ended)"
                    findings.append(_finding("foreign-member", FOREIGN,
                                             "the worker does not answer a request that carries a top-level "
                                             f"sessionId{ended}, while it answers the same request without"))
        finally:
            p.stop()
        healthy = not any(f["key"] in ("silent", "initialize") for f in findings)
        if desc.bus and healthy:
            findings += _sigterm(desc, timeout, recorder, workdir)
        if speaks(desc.claims, "jsonrpc") and healthy:
            findings += _poisons(desc, timeout, recorder, workdir, int_ids)
        if desc.acp_handshake and healthy:
            findings += _acp_flow(desc, timeout, recorder, workdir)
    except WorkerError as exc:  # e.g. its stdin closed while the suite wrote
        findings.append(_finding("silent", SILENT_PLAIN if desc.bus else SILENT_RPC,
                                 f"the worker answers no request: {exc}"))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return {"findings": findings, "tool_call": tool_call, "tool_note": tool_note, "int_ids": int_ids,
            "seconds": round(time.monotonic() - t0, 3), "transcript": render(recorder), "pace": PACE.to_json()}


def _poisons(desc: WorkerDescription, timeout: float, recorder: Recorder, workdir: str,
             int_ids: bool) -> list[dict]:
    """Each kind of input a worker may die on (worker/inputs.py), then the
    simplest request, on one process while it lives: a kind after which that
    request gets no answer is a root cause, named by its own test."""
    method, params = _request(desc)
    found, p, n, notified = [], None, 10, False
    try:
        batches = "jsonrpc" in desc.claims or ("mcp" in desc.claims and desc.mcp_version == "2025-03-26")
        for kind, (_, _, line) in POISONS.items():
            if p is None:
                n += 1
                p, _, answer = _start(desc, timeout, recorder, workdir, n, int_ids)
                if answer is None:
                    return found  # a flaky start: the tests will tell
            try:
                survived = p.send(line) and p.ask(method, params) is not None
            except WorkerError:  # it died on the line before the request was written: EPIPE
                survived = False
            if survived:
                if not notified:  # once, on a worker that lives
                    notified = True
                    try:
                        found += _answers_notifications(p, method, params)
                    except WorkerError:  # it died on the notification: its own test names that
                        pass
                continue
            ended = f"it exited with status {p.proc.proc.poll()}" if not p.proc.running \
                else "it stops answering"
            found.append(_finding(f"poison:{kind}", namer(kind, batches),
                                  f"the worker does not survive the line {line.strip()!r}: {ended}"))
            p.stop()
            p = None
    finally:
        if p is not None:
            p.stop()
    return found


def _answers_notifications(p: _Probe, method: str, params) -> list[dict]:
    """A notification the worker does not know, then a request: a response
    before that request's answer is an answer to the notification. Named
    once, by SB-J-10; SB-T-11 (notifications/initialized) is its special case."""
    from .run import envelope
    p.send(envelope(method="sb/preflight/notification"))
    before: list = []
    if p.ask(method, params, before=before) is None:
        return []
    replies = [x for x in before if x.kind == "response"]
    if not replies:
        return []
    return [_finding("notification-answered", NOTIFICATIONS,
                     f"the worker answers notifications: {replies[0].data[:120]!r} came for one")]


ACP_BLOCKED = "the agent needs authentication / its back end"
TURN_FACTOR = 4  # a turn waits this many answer deadlines (as test_acp.py's turns do)


def _env_finding(key: str, summary: str) -> dict:
    """What the environment lacks, not a defect: no clause, no test names it;
    the tests that need it are blocked, not judged (WORKER_SPEC.md, Appendix G)."""
    return {"key": key, "clause": None, "test": None, "environment": True,
            "summary": f"{ACP_BLOCKED}: {summary}"}


def satisfiable(methods, env: dict) -> dict | None:
    """The first authentication method the environment can satisfy: an
    `env_var` method (ACP auth methods) whose variables are all set."""
    for m in methods if isinstance(methods, list) else []:
        vars_ = m.get("vars") if isinstance(m, dict) and m.get("type") == "env_var" else None
        if vars_ and all(isinstance(v, dict) and env.get(str(v.get("name"))) for v in vars_):
            return m
    return None


def _lacks(answer) -> bool:
    """Whether an answer says the method does not exist (-32601)."""
    error = answer.get("error") if isinstance(answer, dict) else None
    return isinstance(error, dict) and error.get("code") == -32601


def _acp_flow(desc: WorkerDescription, timeout: float, recorder: Recorder, workdir: str) -> list[dict]:
    """The default flow of an editor (WORKER_SPEC.md, Appendix G): initialize,
    authenticate when the agent offers a method this environment satisfies,
    session/new, a short prompt. What it cannot do here is one root cause:
    acp-session (no session: a login, its back end), acp-turn (no turn ends);
    a baseline method the agent does not have (-32601) is its defect, named
    by SB-G-10's test, and blocks the same tests."""
    from .description import ACP_INITIALIZE, DEFAULT_ACP_PROMPT
    p = _Probe(desc, timeout, recorder, workdir, 30)
    try:
        init = p.ask("initialize", ACP_INITIALIZE["params"])
        if not _initialized(init):
            return []  # SB-G-3's test names that
        methods = init["result"].get("authMethods") or []
        method = satisfiable(methods, {**os.environ, **desc.env})
        if method is not None:
            p.ask("authenticate", {"methodId": method.get("id")})
        new = p.ask("session/new", {"cwd": workdir, "mcpServers": []})
        sid = ((new or {}).get("result") or {}).get("sessionId") if isinstance(new, dict) else None
        if _lacks(new):  # no login makes a method appear: a defect, not the environment
            return [_finding("acp-session", BASELINE_METHODS, "session/new is not there: it got -32601")]
        if not isinstance(sid, str):
            got = "no answer" if new is None else f"{new.get('error', new)!r}"[:200]
            offered = [str(m.get("id")) for m in methods if isinstance(m, dict)]
            auth = (f"; it offers authentication ({', '.join(offered)}), none this environment can satisfy"
                    if offered and method is None else "")
            return [_env_finding("acp-session", f"session/new got {got}{auth}")]
        turn = timeout * TURN_FACTOR
        text = desc.acp_prompt or DEFAULT_ACP_PROMPT
        ans = p.ask("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": text}]}, timeout=turn)
        if ans is None:
            return [_env_finding("acp-turn", f"a prompt ({text!r}) was not answered within {turn:g} s")]
        if _lacks(ans):
            return [_finding("acp-turn", BASELINE_METHODS, "session/prompt is not there: it got -32601")]
        if "error" in ans:
            return [_env_finding("acp-turn", f"a prompt ({text!r}) got {ans['error']!r}"[:300])]
        return []
    except WorkerError:
        return []
    finally:
        p.stop()


def _sigterm(desc: WorkerDescription, timeout: float, recorder: Recorder, workdir: str) -> list[dict]:
    """SIGTERM to an idle worker that has answered once: does it exit by
    itself within drain_timeout?"""
    p = _Probe(desc, timeout, recorder, workdir, 2)
    try:
        method, params = _request(desc)
        if p.ask(method, params) is None:
            return []  # flaky start: the tests will tell
        p.proc.signal(signal.SIGTERM)
        try:
            rc = p.proc.wait_exit(desc.drain_timeout)
        except WorkerTimeout:
            return [_finding("sigterm", SIGTERM, f"the worker ignores SIGTERM: still running "
                                                 f"{desc.drain_timeout:g} s after it")]
        if rc < 0:
            return [_finding("sigterm", SIGTERM,
                             f"the worker dies on SIGTERM (killed by {signal.Signals(-rc).name})")]
        return []
    finally:
        p.stop()
