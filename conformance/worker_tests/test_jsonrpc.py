"""JSON-RPC 2.0 over NDJSON (WORKER_SPEC.md, J and R; profiles `jsonrpc` and
`mcp`, whose messages follow JSON-RPC 2.0): error codes, parse errors that do
not poison the stream, notifications that get no answer, batches (`jsonrpc`;
`mcp` 2025-03-26 only). Each input goes with a sentinel request: the answers
the worker writes before the sentinel's answer are what that input made it
write (a worker reads its input in order); silence is proved the same way.
Notifications and requests the worker writes on its own are no answers."""

import pytest

from stdio_bus_conformance.worker import rawjson as wj
from stdio_bus_conformance.worker.checks import (answers, error_response, error_shape_problem, one_error,
                                                  reserved_code_problem, same_session, show)

PARSE, INVALID, NOT_FOUND, PARAMS, INTERNAL = -32700, -32600, -32601, -32602, -32603

NOT_JSON = [b"{bad\n", b'{"jsonrpc":"2.0","id":1,"method":"ping"\n', b"nul\n", b'{"a":1}}\n',
            b'{"jsonrpc":"2.0","id":2,"method":"ping"} trailing\n', b"{'single':'quotes'}\n", b"[1,2\n"]

# (line, the id its error must carry: None = null, or a key that may be echoed)
INVALID_REQUESTS = [
    (b"1\n", None), (b'"text"\n', None), (b"true\n", None), (b"null\n", None),
    (b'{"jsonrpc":"1.0","id":"v1","method":"ping"}\n', "v1"),
    (b'{"id":"no-version","method":"ping"}\n', "no-version"),
    (b'{"jsonrpc":"2.0","id":"m5","method":5}\n', "m5"),
    (b'{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}\n', None),
    (b'{"jsonrpc":"2.0","id":true,"method":"ping"}\n', None),
    (b'{"jsonrpc":"2.0","id":[1],"method":"ping"}\n', None),
    (b'{"jsonrpc":"2.0","id":"neither"}\n', "neither"),
    (b'{"jsonrpc":"2.0","method":1,"params":"bar"}\n', None),
]
# MCP's own narrowing of a valid request (MCP messages): no null id, params an object
INVALID_FOR_MCP = [(b'{"jsonrpc":"2.0","id":null,"method":"ping"}\n', None)]


def first_error(worker, w, line, code, what, id_null=False):
    """Sends line; exactly one error response of this code must come of it."""
    before, _ = worker.exchange(w, [line])
    return one_error(before, code, what, worker.error_id_ok if id_null else None)


def silence(worker, w, lines, what, session=None):
    before, _ = worker.exchange(w, lines, session=session)
    before = answers(before)
    assert not before, f"{what}: the worker answered {show(before)}"


@pytest.mark.clause("SB-J-4")
def test_a_line_that_is_not_json_gets_one_parse_error_with_id_null(worker):
    worker.judge_each(NOT_JSON, lambda w, line: first_error(worker, w, line, PARSE, f"after {line!r}",
                                                            id_null=True))


@pytest.mark.clause("SB-J-5")
def test_the_stream_goes_on_after_parse_errors(worker):
    def judge(w, bad):
        m = worker.request(session="s1")
        w.send(bad + m.line)
        reply = w.answer(m.key)
        assert wj.error_code(reply) != PARSE, f"after {bad!r}, the next request got a parse error: {reply}"
    # bytes that are not UTF-8 are no JSON text either (RFC 8259 section 8.1)
    worker.judge_each([b"".join(NOT_JSON), b"{\n", b'{"jsonrpc":"2.0","id":"\xff","method":"ping"}\n',
                       b"\xfe\xff{}\n"], judge)


@pytest.mark.clause("SB-J-6")
def test_invalid_requests_get_invalid_request_and_the_stream_goes_on(worker):
    cases = INVALID_REQUESTS + (INVALID_FOR_MCP if worker.claims("mcp") and not worker.claims("jsonrpc") else [])
    if not worker.takes_batches():  # MCP from 2025-06-18: `[]` is no batch, one more invalid value
        cases += [(b"[]\n", None)]
    # params that are not structured: -32600 here, or -32602 (SB-R-9 asks for -32600)
    cases.append((worker.rpc(worker.desc.the_request()["method"], 3, id="p3").line, "params"))

    def judge(w, case):
        line, id_value = case
        if id_value == "params":
            before, _ = worker.exchange(w, [line])
            before = answers(before)
            assert len(before) == 1 and wj.error_code(before[0].obj) in (INVALID, PARAMS), \
                f"params 3: expected one error response of code -32600 (or -32602), got {show(before)}"
            return
        obj = first_error(worker, w, line, INVALID, f"after {line!r}")
        if id_value is None:
            assert worker.error_id_ok(obj), f"after {line!r}: no valid id could be read, so the error's " \
                                            f"id must be null, got {obj.get('id', 'no id')!r}"
        else:
            assert obj.get("id", "missing") in (id_value, None), \
                f"after {line!r}: the error carries id {obj.get('id', 'no id')!r}"
    worker.judge_each(cases, judge)


@pytest.mark.clause("SB-J-7")
def test_unknown_method_gets_method_not_found(worker):
    w = worker.spawn()
    for method in ("sb/no/such/method", "rpc.sb-conformance-unknown", "PING-unknown"):
        m = worker.rpc(method, {"x": 1}, session="s1")
        w.send(m.line)
        error_response(w.recv_response(m.key), NOT_FOUND, f"method {method!r}")


@pytest.mark.requires("invalid_params_request")
@pytest.mark.clause("SB-J-8")
def test_params_the_method_cannot_take_get_invalid_params(worker):
    w = worker.spawn()
    m = worker.invalid_params_request(session="s1")
    w.send(m.line)
    error_response(w.recv_response(m.key), PARAMS, f"request {m.line.strip()!r}")


@pytest.mark.requires("failing_request")
@pytest.mark.clause("SB-J-9")
def test_a_request_that_fails_inside_gets_internal_error_and_the_stream_goes_on(worker):
    w = worker.spawn()
    m = worker.failing_request(session="s1")
    w.send(m.line)
    error_response(w.recv_response(m.key), INTERNAL, f"request {m.line.strip()!r}")
    again = worker.failing_request(session="s2")
    ping = worker.request(session="s2")
    w.send(again.line + ping.line)
    w.recv_response(again.key)
    w.answer(ping.key)


@pytest.mark.clause("SB-J-10")
def test_notifications_get_no_answer(worker):
    r = worker.desc.the_request()
    notes = [worker.request(notification=True), worker.request(notification=True, session="s1"),
             worker.notification("notifications/initialized"),
             worker.notification("sb/no/such/notification", {"a": 1}),
             worker.notification("sb/no/such/notification", {}),
             worker.notification(r["method"], {"unexpected": True}),
             worker.notification("rpc.sb-unknown"),
             worker.notification("notifications/cancelled", {"requestId": "never-sent"})]
    if not worker.mcp_only:  # MCP messages: params is an object, so an MCP client never sends an array
        notes.insert(4, worker.notification("sb/no/such/notification", [1, 2]))
    worker.judge_each([n.line for n in notes],
                      lambda w, line: silence(worker, w, [line], f"notification {line.strip()!r}"))


@pytest.mark.clause("SB-J-12")
def test_a_batch_gets_one_array_with_one_response_per_request(worker):
    w = worker.spawn()
    a, b = worker.request(id="b-a"), worker.rpc("sb/no/such/method", id="b-b")
    batch = b"[" + b",".join([a.line.strip(), worker.request(notification=True).line.strip(), b.line.strip(),
                              b'{"jsonrpc":"2.0","id":"resp","result":{}}']) + b"]\n"
    before, _ = worker.exchange(w, [batch])
    before = answers(before)
    assert len(before) == 1, f"expected one line answering the batch, got {len(before)}: {show(before)}"
    arr = before[0].obj
    assert isinstance(arr, list), f"the batch's answer is not an array: {before[0].data[:300]!r}"
    keys = sorted(map(repr, (wj.key_of(e.get("id")) for e in arr if isinstance(e, dict))))
    assert keys == sorted(map(repr, (a.key, b.key))), \
        f"expected one response for each of the 2 requests, got {before[0].data[:300]!r}"
    assert all(wj.kind(e) == "response" for e in arr), f"not only responses: {before[0].data[:300]!r}"


@pytest.mark.clause("SB-J-13")
def test_a_batch_without_requests_gets_nothing(worker):
    w = worker.spawn()
    for batch in (b"[" + worker.request(notification=True).line.strip() + b"]\n",
                  b'[{"jsonrpc":"2.0","method":"sb/x"},{"jsonrpc":"2.0","id":"r","result":1},'
                  b'{"jsonrpc":"2.0","id":"e","error":{"code":1,"message":"m"}}]\n'):
        silence(worker, w, [batch], f"batch {batch.strip()!r}")


@pytest.mark.clause("SB-J-14")
def test_an_empty_array_gets_one_invalid_request_error(worker):
    worker.judge_each([b"[]\n", b" [ ] \n"],
                      lambda w, line: first_error(worker, w, line, INVALID, f"after {line!r}", id_null=True))


@pytest.mark.clause("SB-J-15")
def test_each_invalid_element_of_a_batch_gets_its_own_error(worker):
    w = worker.spawn()
    before, _ = worker.exchange(w, [b"[1,2,3]\n"])
    before = answers(before)
    assert len(before) == 1 and isinstance(before[0].obj, list), f"expected one array: {show(before)}"
    arr = before[0].obj
    assert len(arr) == 3 and all(wj.error_code(e) == INVALID for e in arr), \
        f"[1,2,3] must get three -32600 errors: {before[0].data[:300]!r}"
    ok = worker.request(id="in-batch")
    before, _ = worker.exchange(w, [b'[{"foo":"boo"},' + ok.line.strip() + b"]\n"])
    before = answers(before)
    assert len(before) == 1 and isinstance(before[0].obj, list), f"expected one array: {show(before)}"
    codes = sorted(str(wj.error_code(e)) for e in before[0].obj)
    ids = [wj.key_of(e.get("id")) for e in before[0].obj if isinstance(e, dict)]
    assert len(before[0].obj) == 2 and str(INVALID) in codes and ok.key in ids, \
        f"expected a -32600 error and the request's answer: {before[0].data[:300]!r}"


@pytest.mark.clause("SB-J-11", "SB-J-3")
def test_every_error_code_seen_is_allowed(worker):
    # the codes of each kind of error, one request each
    w = worker.spawn()
    # a kind of line the worker dies on is its own test's root cause (worker/inputs.py)
    for line in worker.harmless([b"{bad\n", b'{"jsonrpc":"2.0","id":"x","method":5}\n', worker.rpc("sb/none").line]):
        before, _ = worker.exchange(w, [line])
        for entry in answers(before):
            err = entry.obj.get("error") if isinstance(entry.obj, dict) else None
            problem = error_shape_problem(err) or reserved_code_problem(err.get("code"))
            assert not problem, f"{problem}: {entry.data[:200]!r}"


@pytest.mark.worker_profile("jsonrpc")  # an error response to an unknown method
@pytest.mark.clause("SB-W-9", "SB-R-2")
def test_error_responses_carry_the_session_token(worker):
    w = worker.spawn()
    for session in (b'"s1"', b'"a\\u0062"', b'"caf\xc3\xa9"'):
        m = worker.rpc("sb/no/such/method", session=session)
        w.send(m.line)
        line = w.recv_response(m.key)
        problem = same_session(line, session)
        assert not problem, f"error response: {problem}"


@pytest.mark.clause("SB-R-9")
def test_params_that_are_not_structured_are_an_invalid_request(worker):
    w = worker.spawn()
    method = worker.desc.the_request()["method"]
    plain = worker.request()
    w.send(plain.line)
    if wj.error_code(w.answer(plain.key)) == NOT_FOUND:  # its params cannot matter: nothing to judge
        pytest.skip(f"the worker does not know `{method}` (-32601 with valid params)")
    for params in (b"3", b'"text"', b"true", b"null"):
        m = worker.rpc(method, params, id="p", session="s1")
        before, _ = worker.exchange(w, [m.line])
        if not answers(before):
            pytest.skip(f"params {params.decode()} got no answer at all: SB-J-6's failure, not this reading's")
        obj = one_error(before, INVALID, f"params {params.decode()}")
        assert obj.get("id") == m.obj["id"], f"params {params.decode()}: the error should carry the request's id"


@pytest.mark.clause("SB-R-10")
def test_responses_get_no_answer(worker):
    session = b',"sessionId":"s1"' if worker.uses_sessions() else b""  # only a bus worker gets sessionIds
    lines = [b'{"jsonrpc":"2.0","id":"nobody","result":{}}\n',
             b'{"jsonrpc":"2.0","id":77,"error":{"code":-32000,"message":"x"}' + session + b'}\n']
    if not worker.mcp_only:  # MCP messages: a result's id is a string or an integer, never null
        lines.append(b'{"jsonrpc":"2.0","id":null,"result":null}\n')
    worker.judge_each(lines, lambda w, line: silence(worker, w, [line], f"response {line.strip()!r}"))


@pytest.mark.worker_profile("jsonrpc")  # the parse error's code
@pytest.mark.clause("SB-R-11")
def test_lines_that_are_not_strict_json_or_utf8_get_a_parse_error(worker):
    w = worker.spawn()
    for line in (b'{"jsonrpc":"2.0","id":"\xff","method":"ping"}\n',
                 b'{"jsonrpc":"2.0","id":"x","method":"ping","params":{"t":"\xc3\x28"}}\n',
                 b'{"jsonrpc":"2.0","id":01,"method":"ping"}\n',
                 b'{"jsonrpc":"2.0","id":+1,"method":"ping"}\n',
                 b'{"jsonrpc":"2.0","id":"a\tb","method":"ping"}\n',
                 b'{"jsonrpc":"2.0","id":"\\ud800","method":"ping"}\n'):
        first_error(worker, w, line, PARSE, f"after {line!r}", id_null=True)


@pytest.mark.clause("SB-R-13")
def test_invalid_request_errors_carry_the_id_and_session_they_can(worker):
    w = worker.spawn()
    cases = [(b'{"jsonrpc":"1.0","id":"r13","method":"ping"%s}\n', "r13", "s"),
             (b'{"jsonrpc":"2.0","id":7,"method":5%s}\n', 7, "t"),
             (b'{"jsonrpc":"2.0","id":null,"method":["x"]%s}\n', None, None),
             (b'{"jsonrpc":"2.0","id":"n"%s}\n', "n", "u")]
    sessions = worker.uses_sessions()  # the sessionId part of the reading (SB-R-2): bus workers only
    for pattern, id_value, session in cases:
        session = session if sessions else None
        line = pattern % (b',"sessionId":' + wj.token(session) if session else b"")
        before, _ = worker.exchange(w, [line])
        errors = [a for a in answers(before) if wj.error_code(a.obj) == INVALID]
        if not errors:
            pytest.skip(f"{line!r} got no -32600 error: SB-J-6's failure, not this reading's")
        obj = one_error(before, INVALID, f"after {line!r}")
        if id_value is None:
            assert worker.error_id_ok(obj), f"after {line!r}: id {obj.get('id', 'missing')!r}, expected null"
        else:
            assert obj.get("id", "missing") == id_value, f"after {line!r}: id {obj.get('id', 'missing')!r}, " \
                                                         f"expected {id_value!r}"
        assert obj.get("sessionId") == session, f"after {line!r}: sessionId {obj.get('sessionId')!r}, " \
                                                f"expected {session!r}"


@pytest.mark.clause("SB-F-13")
def test_blank_lines_are_ignored(worker):
    # a blank line is not JSON either: the one parse error SB-J-4 asks for is no answer of its own
    def judge(w, line):
        before, _ = worker.exchange(w, [line])
        before = answers(before)
        parse_errors = [a for a in before if wj.error_code(a.obj) == PARSE and worker.error_id_ok(a.obj)]
        assert not before or before == parse_errors[:1], f"blank line {line!r}: the worker answered {show(before)}"
    worker.judge_each([b"\n", b"   \n", b"\t \t\n", b" \r\n"], judge)
