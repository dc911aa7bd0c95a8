"""Start, end of input, signals and pipes (WORKER_SPEC.md, W, T, R): the
worker's lifetime as a daemon, or an MCP client, drives it. SIGTERM is a
`plain` matter (spec 3.3); end of input is the transport's. Every wait is
bounded by the answer deadline or by the description's drain_timeout
(SIGTERM to exit)."""

import signal

import pytest

from stdio_bus_conformance.worker import rawjson as wj
from stdio_bus_conformance.worker.checks import complete, show
from stdio_bus_conformance.worker.process import WorkerTimeout


def ready(worker, w):
    """A first request answered: the worker is up and reading."""
    m = worker.request(id="ready", session="s1")
    w.send(m.line)
    w.recv_response(m.key)


def exit_status(w, timeout, after):
    """The worker's exit status; a clear failure when it keeps running."""
    try:
        return w.wait_exit(timeout)
    except WorkerTimeout:
        raise AssertionError(f"the worker was still running {timeout:g} s after {after}") from None


def exited_by_itself(rc, after):
    assert rc >= 0, f"the worker was killed by signal {signal.Signals(-rc).name} after {after}, " \
                    "instead of exiting"


@pytest.mark.clause("SB-W-11")
def test_sigterm_when_idle_ends_the_worker_by_itself(worker):
    w = worker.spawn()
    ready(worker, w)
    w.signal(signal.SIGTERM)
    exited_by_itself(exit_status(w, worker.drain_timeout, "SIGTERM"), "SIGTERM")


@pytest.mark.clause("SB-W-11")
def test_sigterm_with_requests_in_flight_ends_the_worker_by_itself(worker):
    w = worker.spawn()
    ready(worker, w)
    w.send_lines([worker.request(session=f"s{i % 3}").line for i in range(100)])
    w.signal(signal.SIGTERM)
    exited_by_itself(exit_status(w, worker.drain_timeout, "SIGTERM"), "SIGTERM")


@pytest.mark.parametrize("sig", ["SIGTERM", "SIGINT"])
@pytest.mark.clause("SB-R-3")
def test_signal_when_idle_exits_0(worker, sig):
    w = worker.spawn()
    ready(worker, w)
    w.signal(signal.Signals[sig])
    rc = exit_status(w, worker.drain_timeout, sig)
    assert rc == 0, f"exit status {rc} after {sig}, expected 0"


@pytest.mark.clause("SB-R-3")
def test_sigterm_with_requests_in_flight_writes_whole_answers_and_exits_0(worker):
    w = worker.spawn()
    ready(worker, w)
    msgs = [worker.request(session=f"s{i % 3}") for i in range(100)]
    w.send_lines([m.line for m in msgs])
    mark = len(w.lines)  # judged: what it writes from here on
    w.signal(signal.SIGTERM)
    rc = exit_status(w, worker.drain_timeout, "SIGTERM")
    w.wait_eof()
    assert rc == 0, f"exit status {rc} after SIGTERM, expected 0"
    assert w.stdout.endswith(b"\n"), f"output ends in the middle of a line: ...{bytes(w.stdout[-200:])!r}"
    cut = [line for line in complete(w.lines[mark:]) if line.obj is None and wj.looks_like_a_message(line.data)]
    assert not cut, f"answers cut short or mixed: {show(cut)}"


@pytest.mark.clause("SB-T-7")
def test_nothing_written_before_the_first_message(worker):
    w = worker.spawn(handshake=False)
    w.expect_silence(0.5)  # a banner or a greeting would come now
    if worker.desc.mcp_handshake:
        worker.handshake(w)
    ready(worker, w)


@pytest.mark.clause("SB-T-15")
def test_requests_read_with_the_end_of_input_are_answered(worker):
    w = worker.spawn()
    msgs = [worker.request(session=f"s{i % 2}") for i in range(10)]
    w.send_lines([m.line for m in msgs])
    w.close_stdin()
    for m in msgs:
        w.recv_response(m.key)


@pytest.mark.clause("SB-T-16")
def test_end_of_input_when_idle_exits_0_at_once(worker):
    w = worker.spawn()
    ready(worker, w)
    w.close_stdin()
    rc = exit_status(w, worker.timeout, "the end of its input")
    assert rc == 0, f"exit status {rc} at the end of input, expected 0"


@pytest.mark.clause("SB-T-16")
def test_end_of_input_after_work_exits_0_once_it_is_written(worker):
    w = worker.spawn()
    msgs = [worker.request(session="s1") for _ in range(5)]
    w.send_lines([m.line for m in msgs])
    w.close_stdin()
    rc = exit_status(w, worker.timeout, "the end of its input")
    assert rc == 0, f"exit status {rc} at the end of input, expected 0"


@pytest.mark.clause("SB-R-15")
def test_stdin_and_stdout_stay_open_while_serving(worker):
    w = worker.spawn()
    ready(worker, w)
    for _ in range(3):
        ready(worker, w)
        fds = w.pipe_fds()
        assert fds["stdin"], "the worker no longer holds its stdin pipe open"
        assert fds["stdout"], "the worker no longer holds its stdout pipe open"


def stop_as_a_client_does(worker, w, how):
    """MCP lifecycle, Shutdown (stdio): the client closes the server's stdin,
    sends SIGTERM if it has not exited in reasonable time, then SIGKILL. A
    client may also send SIGTERM first (how="sigterm"). Returns the steps
    taken."""
    steps = []
    if how == "eof":
        steps.append("end of input")
        w.close_stdin()
        try:
            w.wait_exit(worker.timeout)
            return steps
        except WorkerTimeout:
            pass
    steps.append("SIGTERM")
    w.signal(signal.SIGTERM)
    try:
        w.wait_exit(worker.timeout)
    except WorkerTimeout:
        steps.append("SIGKILL")
        w.kill()
    return steps


@pytest.mark.parametrize("how", ["eof", "sigterm"])
@pytest.mark.clause("SB-T-3")
def test_nothing_but_json_rpc_while_stopped(worker, how):
    # a launcher (npm's, a shell) that prints on its way out writes on the server's stdout too
    w = worker.spawn()
    ready(worker, w)
    w.send_lines([worker.request(session="s1").line for _ in range(3)])
    steps = stop_as_a_client_does(worker, w, how)
    try:
        w.wait_eof(worker.timeout)
    except WorkerTimeout:  # a process the worker left behind holds its stdout: what came is judged
        steps.append("its stdout still open (a process it left behind)")
    bad = [line for line in w.lines if wj.kind(line.obj) not in ("request", "notification", "response", "batch")]
    assert not bad, f"stopped by {', then '.join(steps)}, the worker wrote lines that are not JSON-RPC " \
                    f"messages: {show(bad)}"
