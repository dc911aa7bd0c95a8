"""What a worker may write on its stdout (WORKER_SPEC.md, W, T, J, R): each
test makes the worker write every kind of line its profiles allow (the
workload: requests, notifications, malformed input, and per profile errors,
the MCP lifecycle, tools and progress), then judges every line by one rule."""

import pytest

from stdio_bus_conformance.worker import rawjson as wj
from stdio_bus_conformance.worker.process import WorkerError, WorkerTimeout
from stdio_bus_conformance.worker.checks import (complete, error_shape_problem, messages,
                                                  reserved_code_problem, responses, show)


def run_workload(worker, *, verbose=False, batch=False):
    """A worker that went through the workload and ended; its lines. batch:
    a batch too, when the worker's profiles take batches."""
    w = worker.spawn(verbose=verbose)
    worker.workload(w)
    if batch and worker.takes_batches():
        try:
            worker.exchange(w, [b'[' + worker.request(id="b1").line.strip() + b','
                                + worker.request(notification=True).line.strip() + b','
                                + worker.rpc("no/such/method", id="b2").line.strip() + b',7]\n'])
        except WorkerError:
            pass  # whether the batch is answered is SB-J-12's business; here every line is judged
    w.finish(worker.timeout, worker.drain_timeout)
    return w


def not_json(line) -> bool:
    try:
        wj.syntax(line.data)
    except wj.NotJson:
        return True
    return False


@pytest.mark.clause("SB-W-2")
def test_every_line_is_one_json_object(worker):
    w = run_workload(worker)
    bad = [line for line in complete(w.lines) if not isinstance(line.obj, dict)]
    assert not bad, f"stdout lines that are not one JSON object: {show(bad)}"


@pytest.mark.clause("SB-W-3")
def test_every_message_ends_with_a_newline_the_last_one_too(worker):
    w = worker.spawn()
    worker.workload(w)
    try:  # a last answer written while the worker ends
        w.send(worker.request(id="last").line)
    except WorkerError:
        pass  # it is gone already: what it wrote is judged all the same
    ended = w.finish(worker.timeout, worker.drain_timeout)
    if ended == "killed":
        pytest.skip("the worker exited neither at end of input nor on SIGTERM (SB-T-16, SB-W-11): "
                    "its last bytes cannot be judged")
    try:
        w.wait_eof(worker.timeout)
    except WorkerTimeout:  # no clause asks a launcher to take its children with it (codex-acp's node wrapper)
        pytest.skip("the worker exited and a process it left behind holds its stdout open: "
                    "its last bytes cannot be judged")
    assert w.stdout, "the worker wrote nothing at all"
    assert w.stdout.endswith(b"\n"), f"stdout ends without a newline: ...{bytes(w.stdout[-200:])!r}"


@pytest.mark.clause("SB-W-4")
def test_nothing_but_json_on_stdout_even_verbose(worker):
    w = run_workload(worker, verbose=True)
    bad = [line for line in complete(w.lines) if not_json(line)]
    assert not bad, f"stdout lines that are not JSON (banner, log, blank line...): {show(bad)}"


@pytest.mark.clause("SB-T-2")
def test_every_line_is_utf8(worker):
    # the workload sends raw and escaped non-ASCII ids and sessionIds
    w = run_workload(worker)
    bad = [line for line in w.lines if not wj.is_utf8(line.data)]
    assert not bad, f"stdout lines that are not UTF-8: {show(bad)}"


@pytest.mark.worker_profile("jsonrpc")
@pytest.mark.clause("SB-T-2")
def test_output_stays_utf8_after_input_that_is_not(worker):
    w = worker.spawn()
    bad_input = [b'{"jsonrpc":"2.0","id":"\xff","method":"ping"}\n',
                 b'{"jsonrpc":"2.0","id":"u","method":"ping","params":{"t":"\xc3\x28"}}\n',
                 b'{"jsonrpc":"2.0","id":"o","method":"\xc0\xaf"}\n',
                 b'\xfe\xff{}\n']
    if worker.uses_sessions():
        bad_input.append(b'{"jsonrpc":"2.0","id":"u","method":"ping","sessionId":"\xc3\x28"}\n')
    for line in bad_input:
        worker.exchange(w, [line])
    w.finish(worker.timeout, worker.drain_timeout)
    bad = [line for line in w.lines if not wj.is_utf8(line.data)]
    assert not bad, f"stdout lines that are not UTF-8: {show(bad)}"


@pytest.mark.clause("SB-R-6")
def test_no_array_unless_answering_a_batch(worker):
    w = run_workload(worker)  # the workload sends no batch
    bad = [line for line in complete(w.lines) if isinstance(line.obj, list)]
    assert not bad, f"arrays on stdout, and no batch was sent: {show(bad)}"


@pytest.mark.clause("SB-T-3")
def test_nothing_but_json_rpc_messages(worker):
    w = run_workload(worker, batch=True)
    bad = []
    for line in complete(w.lines):
        obj = line.obj
        if isinstance(obj, list):  # the batch's answer
            if not obj or any(wj.kind(e) != "response" for e in obj):
                bad.append(line)
        elif wj.kind(obj) not in ("request", "notification", "response"):
            bad.append(line)
    assert not bad, f"lines that are not JSON-RPC requests, notifications or responses: {show(bad)}"


@pytest.mark.clause("SB-J-1")
def test_every_message_says_jsonrpc_2_0(worker):
    w = run_workload(worker, batch=True)
    bad = [line for line, obj in messages(complete(w.lines))
           if not isinstance(obj, dict) or obj.get("jsonrpc") != "2.0"]
    assert not bad, f"messages without \"jsonrpc\":\"2.0\": {show(bad)}"


@pytest.mark.clause("SB-J-2")
def test_no_response_has_both_result_and_error(worker):
    w = run_workload(worker, batch=True)
    bad = [line for line, obj in responses(complete(w.lines)) if "result" in obj and "error" in obj]
    assert not bad, f"responses with both result and error: {show(bad)}"


@pytest.mark.clause("SB-J-3")
def test_errors_have_an_integer_code_and_a_string_message(worker):
    w = run_workload(worker, batch=True)
    errors = [(line, obj["error"]) for line, obj in responses(complete(w.lines)) if "error" in obj]
    assert errors, "the workload provoked no error response (unknown method, invalid requests)"
    bad = [f"{error_shape_problem(err)}: {line.data[:200]!r}" for line, err in errors if error_shape_problem(err)]
    assert not bad, "; ".join(bad)


@pytest.mark.clause("SB-J-11")
def test_no_reserved_error_code(worker):
    w = run_workload(worker, batch=True)
    bad = []
    for line, obj in responses(complete(w.lines)):
        err = obj.get("error")
        problem = reserved_code_problem(err.get("code")) if isinstance(err, dict) else None
        if problem:
            bad.append(f"{problem}: {line.data[:200]!r}")
    assert not bad, "; ".join(bad)
