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
* sigterm (`plain`): SIGTERM ends an idle worker by itself.

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
from ..common.transcript import Recorder, render
from .description import WorkerDescription, discover_tool_call
from .process import WorkerError, WorkerProc, WorkerTimeout

# root cause -> (clause, the test that names it)
SILENT_PLAIN = ("SB-W-1", "test_every_complete_line_is_handled")
SILENT_RPC = ("SB-J-16", "test_every_request_gets_exactly_one_response")
INITIALIZE = ("SB-T-8", "test_initialize_answers_version_capabilities_and_server_info")
FOREIGN = ("SB-W-12", "test_a_request_with_members_it_does_not_know_is_answered")
SIGTERM = ("SB-W-11", "test_sigterm_when_idle_ends_the_worker_by_itself")


def _finding(key: str, where: tuple, summary: str) -> dict:
    return {"key": key, "clause": where[0], "test": where[1], "summary": summary}


class _Probe:
    """One preflight process: the suite's client side, stripped down."""

    def __init__(self, desc: WorkerDescription, timeout: float, recorder: Recorder, workdir: str, n: int):
        env = dict(os.environ)
        env.update(desc.env)
        self.desc, self.timeout = desc, timeout
        self.proc = WorkerProc(desc.argv(), env, workdir, recorder, f"preflight#{n}", timeout)
        self.proc.auto_reply = self._reply
        self.ids = 0

    @staticmethod
    def _reply(proc, line):
        from .run import WorkerRun, envelope
        member = WorkerRun.client_result(line.obj)
        (name, value), = member.items()
        proc.send(envelope(id=line.raw("id"), extra={name: value}))

    def ask(self, method: str, params=None, session: bytes | None = None):
        """Sends a request; its response object, or None when none came in
        time (or the worker ended)."""
        from .run import envelope
        self.ids += 1
        rid = wj.token(f"sb-preflight-{self.ids}")
        self.proc.send(envelope(id=rid, method=method, params=params, session=session))
        try:
            return self.proc.recv_response(wj.id_key(rid), self.timeout).obj
        except WorkerError:
            return None

    def notify(self, method: str) -> None:
        from .run import envelope
        self.proc.send(envelope(method=method))

    def stop(self) -> None:
        self.proc.stop()


def _request(desc: WorkerDescription) -> tuple[str, object]:
    r = desc.the_request()
    return r["method"], r.get("params")


def run(desc: WorkerDescription, timeout: float) -> dict:
    """The preflight of one run; never raises for what the worker does."""
    from .run import CLIENT_CAPABILITIES, CLIENT_INFO
    t0 = time.monotonic()
    recorder = Recorder()
    workdir = tempfile.mkdtemp(prefix="sbw-preflight-")
    findings: list[dict] = []
    tool_call, tool_note = None, ""
    method, params = _request(desc)
    try:
        p = _Probe(desc, timeout, recorder, workdir, 1)
        try:
            init = None
            if desc.mcp_handshake:
                init = p.ask("initialize", {"protocolVersion": desc.mcp_version,
                                            "capabilities": CLIENT_CAPABILITIES, "clientInfo": CLIENT_INFO})
                if isinstance(init, dict) and isinstance(init.get("result"), dict):
                    p.notify("notifications/initialized")
            answer = p.ask(method, params)
            if answer is None and (init is None or not desc.mcp_handshake):
                where = SILENT_PLAIN if desc.bus else SILENT_RPC
                what = f"`{method}`" + (" nor `initialize`" if desc.mcp_handshake else "")
                findings.append(_finding("silent", where, f"the worker answers no request: neither {what} "
                                         f"got an answer within {timeout:g} s"))
            elif desc.mcp_handshake and not (isinstance(init, dict) and isinstance(init.get("result"), dict)):
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
        if desc.bus and not any(f["key"] == "silent" for f in findings):
            findings += _sigterm(desc, timeout, recorder, workdir)
    except WorkerError as exc:  # e.g. its stdin closed while the suite wrote
        findings.append(_finding("silent", SILENT_PLAIN if desc.bus else SILENT_RPC,
                                 f"the worker answers no request: {exc}"))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return {"findings": findings, "tool_call": tool_call, "tool_note": tool_note,
            "seconds": round(time.monotonic() - t0, 3), "transcript": render(recorder)}


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
