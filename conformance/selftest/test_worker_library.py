"""Unit tests of the worker-side library without the suite: a worker's own
requests answered while a test waits, what counts as an answer, the tool the
suite picks from tools/list, and the profiles of WORKER_SPEC.md's clauses."""

import contextlib
import sys
import textwrap

import pytest

from stdio_bus_conformance.spec.registry import Registry
from stdio_bus_conformance.common.transcript import Recorder
from stdio_bus_conformance.worker.checks import answers
from stdio_bus_conformance.worker.description import clause_applies, discover_tool_call, speaks
from stdio_bus_conformance.worker.process import Line, WorkerProc, WorkerTimeout

from conftest import CONFORMANCE

# A server that asks its client first (roots/list), and answers ping only once
# the client has answered it; meanwhile it writes a notification of its own.
ASKING_SERVER = textwrap.dedent("""
    import json, sys
    w = lambda o: (sys.stdout.write(json.dumps(o) + "\\n"), sys.stdout.flush())
    w({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
    w({"jsonrpc": "2.0", "id": "srv-1", "method": "roots/list"})
    pending = []
    for line in sys.stdin:
        m = json.loads(line)
        if m.get("id") == "srv-1" and "result" in m:
            for p in pending:
                w({"jsonrpc": "2.0", "id": p, "result": {}})
            pending = None
        elif m.get("method") == "ping":
            if pending is None:
                w({"jsonrpc": "2.0", "id": m["id"], "result": {}})
            else:
                pending.append(m["id"])
""")


def asking_server(tmp_path, auto_reply):
    p = WorkerProc([sys.executable, "-c", ASKING_SERVER], {}, tmp_path, Recorder(), "w", 2.0)
    replies = []

    def reply(proc, line):
        replies.append(line.obj["method"])
        proc.send(b'{"jsonrpc":"2.0","id":"srv-1","result":{"roots":[]}}\n')

    p.auto_reply = reply if auto_reply else None
    return p, replies


def test_a_request_of_the_worker_is_answered_while_the_test_waits(tmp_path):
    p, replies = asking_server(tmp_path, auto_reply=True)
    try:
        p.send(b'{"jsonrpc":"2.0","id":1,"method":"ping"}\n')
        before, answer = p.until(("n", 1))
        assert answer.obj["result"] == {} and replies == ["roots/list"]
        assert [line.obj["method"] for line in before] == ["notifications/tools/list_changed"]
        assert answers(before) == []  # a notification of its own is no answer
    finally:
        p.stop()


def test_without_auto_reply_the_request_waits_for_the_test(tmp_path):
    p, replies = asking_server(tmp_path, auto_reply=False)
    try:
        p.send(b'{"jsonrpc":"2.0","id":1,"method":"ping"}\n')
        with pytest.raises(WorkerTimeout):
            p.recv_response(("n", 1), 0.5)
        req = p.take(lambda line: line.kind == "request")
        assert req.obj["method"] == "roots/list" and replies == []
    finally:
        p.stop()


def test_answers_are_responses_arrays_and_anything_not_a_message():
    lines = [Line(data, 0.0, i) for i, data in enumerate([
        b'{"jsonrpc":"2.0","method":"notifications/message","params":{}}\n',
        b'{"jsonrpc":"2.0","id":3,"method":"roots/list"}\n',
        b'{"jsonrpc":"2.0","id":1,"result":{}}\n', b'[{"jsonrpc":"2.0","id":2,"result":{}}]\n',
        b'not json\n', b'{"hello":1}\n'])]
    assert [line.seq for line in answers(lines)] == [2, 3, 4, 5]


RO = {"readOnlyHint": True, "openWorldHint": False}


@pytest.mark.parametrize("tools, name, args", [
    ([{"name": "echo", "annotations": RO, "inputSchema": {
        "type": "object", "properties": {"message": {"type": "string"}}, "required": ["message"]}}],
     "echo", {"message": "{text}"}),
    ([{"name": "write", "annotations": {"readOnlyHint": False}, "inputSchema": {"type": "object"}},
      {"name": "fetch", "annotations": {"readOnlyHint": True, "openWorldHint": True}, "inputSchema": {"type": "object"}},
      {"name": "now", "annotations": RO, "inputSchema": {"type": "object"}}],
     "now", {}),
    ([{"name": "b", "annotations": RO, "inputSchema": {
        "type": "object", "properties": {"n": {"type": "integer"}, "k": {"enum": ["x", "y"]}}, "required": ["n", "k"]}},
      {"name": "a", "annotations": RO, "inputSchema": {
          "type": "object", "properties": {"q": {"type": "array"}}, "required": ["q"]}}],
     "b", {"n": 1, "k": "x"}),
    ([{"name": "echo", "inputSchema": {"type": "object"}}], None, None),  # not annotated: not called
])
def test_the_tool_the_suite_calls_is_read_only_and_fillable(tools, name, args):
    call, note = discover_tool_call(tools)
    if name is None:
        assert call is None and "not judged" in note
    else:
        assert call == {"name": name, "arguments": args} and name in note


def test_clause_profiles_of_the_worker_spec():
    r = Registry.load(CONFORMANCE.parent / "WORKER_SPEC.md", "WORKER_SPEC.md")
    assert all(c.profiles for c in r), [c.id for c in r if not c.profiles]
    assert r["SB-W-11"].profiles == {"plain": ()}
    assert clause_applies(r["SB-J-4"].profiles, ["mcp"], "2025-11-25")
    assert not clause_applies(r["SB-J-12"].profiles, ["mcp"], "2025-11-25")
    assert clause_applies(r["SB-J-12"].profiles, ["mcp"], "2025-03-26")
    assert not clause_applies(r["SB-R-1"].profiles, ["mcp", "jsonrpc"], "2025-11-25")
    assert speaks(["mcp"], "jsonrpc") and not speaks(["jsonrpc"], "mcp") and not speaks(["mcp"], "plain")


# A server that answers each request with its id, and leaves behind a process of
# its own session (out of the suite's reach, as a launcher's child may be) that
# holds its stdout open until the test kills it.
ECHO_SERVER = textwrap.dedent("""
    import json, subprocess, sys
    left = subprocess.Popen(["sleep", "60"], start_new_session=True).pid if len(sys.argv) > 2 else None
    for line in sys.stdin:
        m = json.loads(line)
        print(json.dumps({"jsonrpc": "2.0", "id": m["id"], "result": {"from": sys.argv[-1], "left": left}}),
              flush=True)
""")


def test_a_stopped_worker_s_pipes_are_never_read_as_the_next_worker_s(tmp_path):
    """A worker stopped while something it left holds its stdout: its reader
    keeps its pipe (and the pipe's fd number) until that pipe ends. Closing
    it under the reader gave the number to the next worker's stdout, and the
    old reader then read the new worker's answers as its own (seen on an ACP
    agent behind a node launcher: a fresh agent 'answered nothing')."""
    import os
    import signal
    a = WorkerProc([sys.executable, "-c", ECHO_SERVER, "leave", "a"], {}, tmp_path, Recorder(), "a", 5.0)
    a.send(b'{"jsonrpc":"2.0","id":1,"method":"ping"}\n')
    left = a.until(("n", 1))[1].obj["result"]["left"]  # it holds a's stdout (inherited)
    b = None
    try:
        ino = os.fstat(a.proc.stdout.fileno()).st_ino
        fd = a.proc.stdout.fileno()
        a.stop()
        # the pipe is still a's, under the same number, while its reader may read it
        assert a._threads[0].is_alive() and _ino(fd) == ino, "a's stdout was closed under its reader"
        b = WorkerProc([sys.executable, "-c", ECHO_SERVER, "b"], {}, tmp_path, Recorder(), "b", 5.0)
        os.kill(left, signal.SIGKILL)  # a's pipe ends now: its reader ends and closes it
        a._threads[0].join(5)
        assert not a._threads[0].is_alive() and a.proc.stdout.closed
        for n in range(2, 12):
            b.send(b'{"jsonrpc":"2.0","id":%d,"method":"ping"}\n' % n)
            assert b.until(("n", n))[1].obj["result"]["from"] == "b"
        assert b'"b"' not in bytes(a.stdout), "the stopped worker's reader read the next worker's output"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(left, signal.SIGKILL)
        if b is not None:
            b.stop()


def _ino(fd: int) -> int | None:
    import os
    try:
        return os.fstat(fd).st_ino
    except OSError:
        return None


PINGED_SERVER = textwrap.dedent("""
    import json, sys, time
    for line in sys.stdin:
        m = json.loads(line)
        time.sleep(float(sys.argv[1]))
        print(json.dumps({"jsonrpc": "2.0", "id": m["id"], "result": {}}), flush=True)
""")


@pytest.mark.parametrize("delay, slow", [(0.0, False), (3.0, True)])
def test_a_worker_far_slower_than_its_preflight_gets_a_note_not_a_failure(tmp_path, monkeypatch, delay, slow):
    """Issue 37: the preflight saw the worker answer in 0.1 s; a test that sees
    it take 3 s (half its 5 s wait, 30 times the preflight) says so in a
    note, so that a wait that ran out is read for what it may be; a test at
    the preflight's pace says nothing."""
    from stdio_bus_conformance.common import context
    from stdio_bus_conformance.common.pace import Pace
    from stdio_bus_conformance.worker.description import from_options
    from stdio_bus_conformance.worker.run import WorkerContext, WorkerRun
    monkeypatch.setattr(context.state, "pace", Pace(answer=0.05, initialize=0.1))
    desc = from_options(f"{sys.executable} -c '{PINGED_SERVER}' {delay}", ["plain"], [], None, None)
    run = WorkerRun(WorkerContext(desc=desc, seed=1, timeout=5.0, first_timeout=5.0), "t::slow")
    try:
        w = run.spawn()
        w.send(b'{"jsonrpc":"2.0","id":1,"method":"ping"}\n')
        w.until(("n", 1))
        run.stop()
        notes = run.slow_notes()
        assert bool(notes) == slow, notes
        assert not notes or "a fresh worker's first answer" in notes[0]
    finally:
        run.stop()
        run.cleanup()
