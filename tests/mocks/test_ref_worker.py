"""ref_worker does what mock_workers/README.md ("ref_worker") says, and so
meets the worker-side clauses of WORKER_SPEC.md.

The test plays the worker's client (the daemon, or an MCP client) directly:
it spawns ref_worker, writes its stdin, reads its stdout and checks exact
bytes, exit statuses and signals. Waits are select() reads with deadlines;
where something must NOT happen, a later event proves it (a second, longer
`slow` call answered first, or a ping answered right after).

Run:
    /usr/bin/python3 -m pytest tests/mocks/test_ref_worker.py \
        --mock-worker build-ref/mock_workers/mock_worker
ref_worker is looked for next to the --mock-worker path (it need not hold a
mock_worker); the environment variable SB_REF_WORKER overrides that.
"""
import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from conftest import Mock

PARSE, INVALID, NOT_FOUND, PARAMS, INTERNAL = -32700, -32600, -32601, -32602, -32603
MESSAGES = {PARSE: "Parse error", INVALID: "Invalid Request", NOT_FOUND: "Method not found",
            PARAMS: "Invalid params", INTERNAL: "Internal error"}
NEWEST = "2025-06-18"


@pytest.fixture(scope="session")
def ref_path(request):
    env = os.environ.get("SB_REF_WORKER")
    path = Path(env) if env else Path(request.config.getoption("--mock-worker")).parent / "ref_worker"
    if not path.is_absolute():
        path = (Path.cwd() / path).resolve()
    if not os.access(path, os.X_OK):
        pytest.fail(f"ref_worker not found at {path}: build it, or set SB_REF_WORKER")
    return path


@pytest.fixture
def ref(ref_path, tmp_path):
    """ref(*args) -> a running ref_worker (conftest.Mock); killed at teardown."""
    workers = []

    def _spawn(*args):
        w = Mock(ref_path, list(args), tmp_path, log=False, name=f"ref{len(workers)}")
        workers.append(w)
        return w

    yield _spawn
    for w in workers:
        w.cleanup()


# ---------------------------------------------------------------- helpers

def rq(id, method, params=None, sid=None):
    msg = {"jsonrpc": "2.0", "id": id, "method": method}
    if params is not None:
        msg["params"] = params
    if sid is not None:
        msg["sessionId"] = sid
    return msg


def notif(method, params=None, sid=None):
    msg = {"jsonrpc": "2.0", "method": method}
    if params is not None:
        msg["params"] = params
    if sid is not None:
        msg["sessionId"] = sid
    return msg


def call(id, tool, args=None, sid=None, token=None):
    params = {"name": tool}
    if args is not None:
        params["arguments"] = args
    if token is not None:
        params["_meta"] = {"progressToken": token}
    return rq(id, "tools/call", params, sid)


def cancel(id, sid=None):
    return notif("notifications/cancelled", {"requestId": id, "reason": "test"}, sid)


def tok(value):
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def answer(id_tok, member, value_tok, sid_tok=None):
    line = f'{{"jsonrpc":"2.0","id":{id_tok},"{member}":{value_tok}'
    if sid_tok is not None:
        line += f',"sessionId":{sid_tok}'
    return (line + "}").encode()


def result(id, res, sid=None):
    return answer(tok(id), "result", tok(res), None if sid is None else tok(sid))


def error(id, code, data, sid=None):
    err = {"code": code, "message": MESSAGES[code], "data": data}
    return answer(tok(id), "error", tok(err), None if sid is None else tok(sid))


def text(t, is_error=False):
    res = {"content": [{"type": "text", "text": t}]}
    if is_error:
        res["isError"] = True
    return res


def finish(w, out=b""):
    """Closes stdin; the worker must write `out` (then nothing) and exit 0."""
    w.close_stdin()
    assert w.read_to_eof() == out
    assert w.wait() == 0


# ---------------------------------------------------------------- MCP lifecycle

def test_initialize_answers_version_capabilities_and_server_info(ref):
    w = ref()
    init = {"protocolVersion": "2025-03-26", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
    w.send(rq(1, "initialize", init, sid="s1"))
    assert w.read_line() == result(1, {
        "protocolVersion": "2025-03-26",
        "capabilities": {"tools": {"listChanged": False}},
        "serverInfo": {"name": "ref_worker", "version": "0.1.0"}}, sid="s1")
    w.send(notif("notifications/initialized", sid="s1"), rq(2, "ping", sid="s1"))
    assert w.read_line() == result(2, {}, sid="s1")  # nothing for the notification
    finish(w)


def test_initialize_offers_its_newest_version_for_an_unknown_one(ref):
    w = ref()
    w.send(rq(1, "initialize", {"protocolVersion": "1999-01-01", "capabilities": {}}))
    assert w.read_json()["result"]["protocolVersion"] == NEWEST
    w.send(rq(2, "initialize", {"protocolVersion": NEWEST, "capabilities": {}}))
    assert w.read_json()["result"]["protocolVersion"] == NEWEST
    finish(w)


def test_initialize_is_served_once_per_session_and_nothing_waits_for_it(ref):
    # One worker behind the bus serves many sessions (WORKER_SPEC.md SB-R-4).
    w = ref()
    w.send(call(1, "echo", {"text": "before any initialize"}, sid="a"))
    assert w.read_line() == result(1, text("before any initialize"), sid="a")
    for i, sid in enumerate(("a", "b", "a"), 2):
        w.send(rq(i, "initialize", {"protocolVersion": NEWEST, "capabilities": {}}, sid=sid))
        assert w.read_json()["id"] == i
    finish(w)


def test_initialize_without_protocol_version_is_invalid_params(ref):
    w = ref()
    w.send(rq(1, "initialize", {"capabilities": {}}), rq(2, "initialize"))
    assert w.read_line() == error(1, PARAMS, "protocolVersion must be a string")
    assert w.read_line() == error(2, PARAMS, "protocolVersion must be a string")
    finish(w)


def test_ping_answers_an_empty_result(ref):
    w = ref()
    w.send(rq("p", "ping"), rq(2, "ping", {}))
    assert w.read_line() == result("p", {})
    assert w.read_line() == result(2, {})
    finish(w)


def test_tools_list_names_four_tools_with_object_schemas(ref):
    w = ref()
    w.send(rq(1, "tools/list", sid="s"))
    ans = w.read_json()
    assert ans["id"] == 1 and ans["sessionId"] == "s"
    tools = ans["result"]["tools"]
    assert [t["name"] for t in tools] == ["echo", "add", "slow", "sample"]
    for t in tools:
        assert isinstance(t["description"], str)
        assert t["inputSchema"]["type"] == "object"
    req = {t["name"]: t["inputSchema"]["required"] for t in tools}
    assert req == {"echo": ["text"], "add": ["a", "b"], "slow": ["ms"], "sample": ["prompt"]}
    finish(w)


# ---------------------------------------------------------------- tools/call

def test_echo_returns_its_text(ref):
    w = ref()
    w.send(call(1, "echo", {"text": "hé\n\"x\" 😀"}, sid="s"))
    assert w.read_json() == {"jsonrpc": "2.0", "id": 1, "result": text("hé\n\"x\" 😀"), "sessionId": "s"}
    w.send(call(2, "echo", {"text": "plain"}))
    assert w.read_line() == result(2, text("plain"))
    finish(w)


@pytest.mark.parametrize("a,b,shown", [(2, 3, "5"), (0.1, 0.2, "0.30000000000000004"),
                                        (-1.5, 0.25, "-1.25"), (1e20, 1, "1e+20")])
def test_add_returns_the_shortest_text_of_the_sum(ref, a, b, shown):
    w = ref()
    w.send(call(7, "add", {"a": a, "b": b}))
    assert w.read_line() == result(7, text(shown))
    finish(w)


def test_add_overflow_is_an_internal_error(ref):
    w = ref()
    w.send(call(1, "add", {"a": 1e308, "b": 1e308}, sid="s"))
    assert w.read_line() == error(1, INTERNAL, "add: the sum is not a finite number", sid="s")
    finish(w)


@pytest.mark.parametrize("params,data", [
    ({"name": "nope"}, "unknown tool: nope"),
    ({"name": "echo"}, "echo: text must be a string"),
    ({"name": "echo", "arguments": {"text": 1}}, "echo: text must be a string"),
    ({"name": "echo", "arguments": []}, "arguments must be an object"),
    ({"name": "add", "arguments": {"a": 1, "b": "2"}}, "add: a and b must be numbers"),
    ({"name": "slow", "arguments": {}}, "slow: ms must be an integer from 0 to 20000"),
    ({"name": "slow", "arguments": {"ms": 1.5}}, "slow: ms must be an integer from 0 to 20000"),
    ({"name": "slow", "arguments": {"ms": 20001}}, "slow: ms must be an integer from 0 to 20000"),
    ({"name": "slow", "arguments": {"ms": 1, "steps": -1}}, "slow: steps must be an integer from 0 to 1000"),
    ({"name": "slow", "arguments": {"ms": 1}, "_meta": {"progressToken": {}}},
     "progressToken must be a string or a number"),
    ({"name": "sample", "arguments": {}}, "sample: prompt must be a string"),
    ({"name": "sample", "arguments": {"prompt": "p", "maxTokens": 0}},
     "sample: maxTokens must be a positive integer"),
    ({"name": 5}, "name must be a string"),
    ({}, "name must be a string"),
    (["echo"], "params must be an object"),
])
def test_tools_call_with_bad_params_is_invalid_params(ref, params, data):
    w = ref()
    w.send(rq(3, "tools/call", params, sid="s"))
    assert w.read_line() == error(3, PARAMS, data, sid="s")
    finish(w)


def test_tools_call_without_params_is_invalid_params(ref):
    w = ref()
    w.send(rq(3, "tools/call"))
    assert w.read_line() == error(3, PARAMS, "params must be an object")
    finish(w)


# ---------------------------------------------------------------- JSON-RPC errors

@pytest.mark.parametrize("line,data", [
    (b"{bad", "not valid JSON"),
    (b"this is not json", "not valid JSON"),
    (b'{"jsonrpc":"2.0","id":1,"method":"ping"} x', "not valid JSON"),
    (b'{"jsonrpc":"2.0","id":01,"method":"ping"}', "not valid JSON"),
    (b'{"jsonrpc":"2.0","id":+1,"method":"ping"}', "not valid JSON"),
    (b'{"jsonrpc":"2.0","id":1,"method":"ping",}', "not valid JSON"),
    (b'{"jsonrpc":"2.0","id":"a\tb","method":"ping"}', "not valid JSON"),
    (b'{"jsonrpc":"2.0","id":"\\ud800","method":"ping"}', "not valid JSON"),
    (b'{"jsonrpc":"2.0","id":"\xff","method":"ping"}', "not UTF-8"),
    (b'{"jsonrpc":"2.0","id":"\xed\xa0\x80","method":"ping"}', "not UTF-8"),
    (b'{"jsonrpc":"2.0","id":"\xc0\xaf","method":"ping"}', "not UTF-8"),
    (b"[" * 300 + b"]" * 300, "nested too deeply"),
])
def test_parse_error_has_id_null_and_the_stream_goes_on(ref, line, data):
    w = ref()
    w.send_raw(line + b"\n")
    w.send(rq(2, "ping"))
    assert w.read_line() == error(None, PARSE, data)
    assert w.read_line() == result(2, {})
    w.wait_stderr(b"parse error")
    finish(w)


def test_strict_json_still_takes_every_valid_form(ref):
    w = ref()
    w.send_raw(b' \t{ "jsonrpc" : "2.0" , "id" : 1 , "method" : "ping" , "params" : '
               b'{"x":[1.5e-3,-0.0,0,1E+2,true,false,null,"\\u00e9\\ud83d\\ude00\\/\\b","\xc3\xa9"]} }\r\n')
    assert w.read_line() == result(1, {})
    finish(w)


@pytest.mark.parametrize("line,id,data", [
    (b'{"id":1,"method":"ping"}', 1, 'jsonrpc must be "2.0"'),
    (b'{"jsonrpc":"1.0","id":"q","method":"ping"}', "q", 'jsonrpc must be "2.0"'),
    (b'{"jsonrpc":2.0,"id":"q","method":"ping"}', "q", 'jsonrpc must be "2.0"'),
    (b'{"jsonrpc":"2.0","id":1,"method":7}', 1, "method must be a string"),
    (b'{"jsonrpc":"2.0","id":1,"method":null}', 1, "method must be a string"),
    (b'{"jsonrpc":"2.0","id":{},"method":"ping"}', None, "id must be a string, a number or null"),
    (b'{"jsonrpc":"2.0","id":true,"method":"ping"}', None, "id must be a string, a number or null"),
    (b'{"jsonrpc":"2.0","id":[1],"method":"ping"}', None, "id must be a string, a number or null"),
    (b'{"jsonrpc":"2.0","id":1,"method":"ping","params":3}', 1, "params must be an object or an array"),
    (b'{"jsonrpc":"2.0","id":1,"method":"ping","params":"x"}', 1, "params must be an object or an array"),
    (b'{"jsonrpc":"2.0","method":1,"params":"bar"}', None, "method must be a string"),
    (b'{"jsonrpc":"2.0","method":"x","params":null}', None, "params must be an object or an array"),
    (b'{"jsonrpc":"2.0","id":1}', 1, "neither a request nor a response"),
    (b'{"a":1}', None, "neither a request nor a response"),
    (b"42", None, "not an object"),
    (b'"ping"', None, "not an object"),
    (b"null", None, "not an object"),
])
def test_invalid_request_is_answered_with_its_id_when_readable(ref, line, id, data):
    w = ref()
    w.send_raw(line + b"\n")
    assert w.read_line() == error(id, INVALID, data)
    w.send(rq(2, "ping"))
    assert w.read_line() == result(2, {})
    finish(w)


def test_invalid_request_keeps_its_session(ref):
    w = ref()
    w.send_raw(b'{"jsonrpc":"2.1","id":4,"method":"ping","sessionId":"s"}\n')
    assert w.read_line() == error(4, INVALID, 'jsonrpc must be "2.0"', sid="s")
    finish(w)


def test_unknown_method_is_method_not_found(ref):
    w = ref()
    w.send(rq(1, "resources/list", sid="s"), rq(2, "rpc.discover"))
    assert w.read_line() == error(1, NOT_FOUND, "unknown method: resources/list", sid="s")
    assert w.read_line() == error(2, NOT_FOUND, "unknown method: rpc.discover")
    finish(w)


def test_notifications_are_never_answered(ref):
    w = ref()
    w.send(notif("notifications/initialized"),
           notif("no/such/method", {"x": 1}),
           notif("tools/call", {"name": "nope"}),
           notif("ping"),
           cancel(99),
           notif("notifications/cancelled"),
           {"jsonrpc": "2.0", "method": "x", "params": [1], "sessionId": "s"},
           rq(5, "ping"))
    assert w.read_line() == result(5, {})  # nothing came before it
    finish(w)


def test_responses_are_never_answered(ref):
    w = ref()
    w.send({"jsonrpc": "2.0", "id": "ref-9", "result": {}},
           {"jsonrpc": "2.0", "id": 3, "error": {"code": 1, "message": "x"}},
           {"jsonrpc": "2.0", "result": {}},
           rq(5, "ping"))
    assert w.read_line() == result(5, {})
    w.wait_stderr(b"response to no request of ours")
    finish(w)


# ---------------------------------------------------------------- ids and sessionIds

@pytest.mark.parametrize("id_tok", [b"9007199254740993", b"1.0", b"-0", b"1e2", b'"\\u0041"',
                                    b'"a b"', b"null", b'""'])
def test_ids_and_session_ids_are_echoed_as_raw_tokens(ref, id_tok):
    w = ref()
    w.send_raw(b'{"jsonrpc":"2.0","id": ' + id_tok + b' ,"method":"ping","sessionId":"s\\u0031"}\n')
    assert w.read_line() == answer(id_tok.decode(), "result", "{}", '"s\\u0031"')
    finish(w)


def test_session_id_that_is_not_a_string_is_not_copied(ref):
    w = ref()
    w.send_raw(b'{"jsonrpc":"2.0","id":1,"method":"ping","sessionId":5}\n'
               b'{"jsonrpc":"2.0","id":2,"method":"nope","sessionId":null}\n')
    assert w.read_line() == result(1, {})
    assert w.read_line() == error(2, NOT_FOUND, "unknown method: nope")
    finish(w)


def test_first_of_duplicate_members_wins_as_in_cjson(ref):
    w = ref()
    w.send_raw(b'{"jsonrpc":"2.0","id":1,"id":2,"method":"ping","sessionId":"a","sessionId":"b"}\n')
    assert w.read_line() == result(1, {}, sid="a")
    finish(w)


# ---------------------------------------------------------------- batches

def test_batch_is_answered_with_one_array_in_request_order(ref):
    w = ref()
    w.send([rq(1, "ping", sid="a"), notif("notifications/initialized"), rq(2, "nope"),
            call(3, "echo", {"text": "t"}, sid="b"), {"jsonrpc": "2.0", "id": "ref-7", "result": {}}])
    got = w.read_line()
    assert got == b"[" + b",".join([result(1, {}, sid="a"), error(2, NOT_FOUND, "unknown method: nope"),
                                    result(3, text("t"), sid="b")]) + b"]"
    finish(w)


def test_batch_of_notifications_and_responses_gets_nothing(ref):
    w = ref()
    w.send([notif("notifications/initialized"), notif("x"), {"jsonrpc": "2.0", "id": 9, "result": {}}],
           rq(2, "ping"))
    assert w.read_line() == result(2, {})
    finish(w)


def test_empty_batch_is_one_invalid_request_not_an_array(ref):
    w = ref()
    w.send_raw(b"[]\n")
    assert w.read_line() == error(None, INVALID, "empty batch")
    finish(w)


def test_batch_of_non_objects_gets_one_error_each(ref):
    w = ref()
    w.send_raw(b'[1,"x",[],{"jsonrpc":"2.0","method":2}]\n')
    err = error(None, INVALID, "not an object")
    assert w.read_line() == b"[" + b",".join([err, err, err,
                                              error(None, INVALID, "method must be a string")]) + b"]"
    finish(w)


def test_batch_with_a_slow_call_waits_for_it(ref):
    w = ref()
    t0 = time.monotonic()
    w.send([call(1, "slow", {"ms": 150, "steps": 0}), rq(2, "ping")])
    assert w.read_line() == b"[" + result(1, text("slept 150 ms in 0 steps")) + b"," + result(2, {}) + b"]"
    assert time.monotonic() - t0 >= 0.15
    finish(w)


def test_cancelled_batch_member_is_left_out_and_an_all_cancelled_batch_says_nothing(ref):
    w = ref()
    w.send([call(1, "slow", {"ms": 200, "steps": 0}), rq(2, "ping")],
           [call(3, "slow", {"ms": 200, "steps": 0})],
           cancel(1), cancel(3),
           call(4, "slow", {"ms": 400, "steps": 0}))
    assert w.read_line() == b"[" + result(2, {}) + b"]"
    # The batch of 3 alone would have been answered at 200 ms, before id 4.
    assert w.read_line() == result(4, text("slept 400 ms in 0 steps"))
    finish(w)


# ---------------------------------------------------------------- progress, cancellation

def test_slow_sends_progress_per_step_then_its_answer(ref):
    w = ref()
    t0 = time.monotonic()
    w.send(call(1, "slow", {"ms": 150, "steps": 3}, sid="s", token="tk"))
    for i in (1, 2, 3):
        assert w.read_line() == (b'{"jsonrpc":"2.0","method":"notifications/progress","params":'
                                 b'{"progressToken":"tk","progress":%d,"total":3},"sessionId":"s"}' % i)
    assert w.read_line() == result(1, text("slept 150 ms in 3 steps"), sid="s")
    assert time.monotonic() - t0 >= 0.15
    finish(w)


def test_progress_token_is_copied_as_its_raw_token(ref):
    w = ref()
    w.send_raw(b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"slow",'
               b'"arguments":{"ms":0,"steps":2},"_meta":{"progressToken":"\\u0074k"}}}\n'
               b'{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"slow",'
               b'"arguments":{"ms":0},"_meta":{"progressToken":42}}}\n')
    for i in (1, 2):
        assert w.read_line() == (b'{"jsonrpc":"2.0","method":"notifications/progress","params":'
                                 b'{"progressToken":"\\u0074k","progress":%d,"total":2}}' % i)
    assert w.read_line() == result(1, text("slept 0 ms in 2 steps"))
    assert w.read_line() == (b'{"jsonrpc":"2.0","method":"notifications/progress","params":'
                             b'{"progressToken":42,"progress":1,"total":1}}')
    assert w.read_line() == result(2, text("slept 0 ms in 1 steps"))
    finish(w)


def test_no_progress_without_a_progress_token(ref):
    w = ref()
    w.send(call(1, "slow", {"ms": 50, "steps": 5}, sid="s"))
    assert w.read_line() == result(1, text("slept 50 ms in 5 steps"), sid="s")
    finish(w)


def test_cancelled_request_is_never_answered(ref):
    w = ref()
    w.send(call(1, "slow", {"ms": 200, "steps": 4}, token="t1"), cancel(1),
           call(2, "slow", {"ms": 400, "steps": 0}))
    # Request 1 would have sent progress from 50 ms and answered at 200 ms.
    assert w.read_line() == result(2, text("slept 400 ms in 0 steps"))
    w.wait_stderr(b"cancelled request 1")
    finish(w)


def test_cancel_matches_the_id_as_a_json_value_within_its_session(ref):
    w = ref()
    w.send_raw(b'{"jsonrpc":"2.0","id":"\\u0041","method":"tools/call","params":'
               b'{"name":"slow","arguments":{"ms":200,"steps":0}},"sessionId":"a"}\n')
    w.send(call(5, "slow", {"ms": 300, "steps": 0}, sid="b"),
           cancel("A", sid="b"),   # another session: not this one
           cancel(5.0, sid="b"),   # 5.0 names the request 5
           cancel("A", sid="a"),
           call(9, "slow", {"ms": 400, "steps": 0}))
    assert w.read_line() == result(9, text("slept 400 ms in 0 steps"))
    finish(w)


def test_cancel_for_another_session_or_a_finished_request_changes_nothing(ref):
    w = ref()
    w.send(call(1, "slow", {"ms": 100, "steps": 0}, sid="a"), cancel(1, sid="b"), cancel(1))
    assert w.read_line() == result(1, text("slept 100 ms in 0 steps"), sid="a")
    w.send(cancel(1, sid="a"), rq(2, "ping"))
    assert w.read_line() == result(2, {})
    w.wait_stderr(b"cancel: no request 1 in flight")
    finish(w)


# ---------------------------------------------------------------- concurrency

def test_slow_call_does_not_block_a_fast_one(ref):
    w = ref()
    t0 = time.monotonic()
    w.send(call(1, "slow", {"ms": 3000}), rq(2, "ping"), call(3, "echo", {"text": "x"}))
    assert w.read_line(timeout=2) == result(2, {})
    assert w.read_line(timeout=2) == result(3, text("x"))
    assert time.monotonic() - t0 < 2
    w.send(cancel(1))
    finish(w)  # nothing left in flight: it exits at once


def test_many_slow_calls_run_at_once(ref):
    w = ref()
    t0 = time.monotonic()
    w.send(*[call(i, "slow", {"ms": 300, "steps": 0}) for i in range(40)])
    got = sorted(w.read_json(timeout=3)["id"] for _ in range(40))
    assert got == list(range(40))
    assert time.monotonic() - t0 < 3  # 40 x 300 ms one after the other would be 12 s
    finish(w)


def test_too_many_requests_in_flight_is_an_internal_error(ref):
    w = ref()
    w.send(*[call(i, "slow", {"ms": 20000}) for i in range(1, 1026)])
    assert w.read_line() == error(1025, INTERNAL, "too many requests in flight")
    w.send(*[cancel(i) for i in range(1, 1025)])
    finish(w)


# ---------------------------------------------------------------- server-to-client requests

def sampling_request(n, prompt, sid=None, max_tokens=100):
    params = {"messages": [{"role": "user", "content": {"type": "text", "text": prompt}}],
              "maxTokens": max_tokens}
    msg = {"jsonrpc": "2.0", "id": f"ref-{n}", "method": "sampling/createMessage", "params": params}
    if sid is not None:
        msg["sessionId"] = sid
    return tok(msg).encode()


def test_sample_asks_the_client_and_answers_with_its_text(ref):
    w = ref()
    w.send(call(1, "sample", {"prompt": "hi"}, sid="s"))
    assert w.read_line() == sampling_request(1, "hi", sid="s")
    w.send(rq(2, "ping"))  # not blocked meanwhile
    assert w.read_line() == result(2, {})
    w.send({"jsonrpc": "2.0", "id": "ref-1", "sessionId": "s",
            "result": {"role": "assistant", "content": {"type": "text", "text": "hello"}, "model": "m"}})
    assert w.read_line() == result(1, text("hello"), sid="s")
    w.send(call(3, "sample", {"prompt": "again", "maxTokens": 7}))
    assert w.read_line() == sampling_request(2, "again", max_tokens=7)
    w.send({"jsonrpc": "2.0", "id": "ref-2", "result": {"odd": [1]}})
    assert w.read_line() == result(3, text('{"odd":[1]}'))
    finish(w)


def test_sample_reports_a_client_error_as_a_tool_error(ref):
    w = ref()
    w.send(call(1, "sample", {"prompt": "hi"}))
    assert w.read_line() == sampling_request(1, "hi")
    w.send({"jsonrpc": "2.0", "id": "ref-1", "error": {"code": -1, "message": "user rejected"}})
    assert w.read_line() == result(1, text("sampling failed: user rejected", is_error=True))
    finish(w)


def test_cancelled_sample_ignores_the_late_client_answer(ref):
    w = ref()
    w.send(call(1, "sample", {"prompt": "hi"}, sid="s"))
    assert w.read_line() == sampling_request(1, "hi", sid="s")
    w.send(cancel(1, sid="s"), {"jsonrpc": "2.0", "id": "ref-1", "result": {}}, rq(2, "ping"))
    assert w.read_line() == result(2, {})
    w.wait_stderr(b"response to no request of ours")
    finish(w)


def test_sample_in_flight_at_eof_is_answered_with_an_internal_error(ref):
    w = ref()
    w.send(call(1, "sample", {"prompt": "hi"}, sid="s"))
    assert w.read_line() == sampling_request(1, "hi", sid="s")
    finish(w, error(1, INTERNAL, "input closed before the client answered", sid="s") + b"\n")


# ---------------------------------------------------------------- framing

def test_line_split_across_writes_and_lines_sharing_a_write(ref):
    w = ref()
    w.send_raw(b'{"jsonrpc":"2.0","id":1,')
    w.assert_silent(0.1)
    w.send_raw(b'"method":"ping"}\n{"jsonrpc":"2.0","id":2,"method":"ping"}\n{"jsonrpc":"2.0",')
    assert w.read_line() == result(1, {})
    assert w.read_line() == result(2, {})
    w.send_raw(b'"id":3,"method":"ping"}\r\n')
    assert w.read_line() == result(3, {})
    finish(w)


def test_blank_lines_are_ignored(ref):
    w = ref()
    w.send_raw(b"\n \t\r\n\r\n")
    w.send(rq(1, "ping"))
    assert w.read_line() == result(1, {})
    finish(w)


def test_last_line_without_newline_is_handled_at_eof(ref):
    w = ref()
    w.send_raw(b'{"jsonrpc":"2.0","id":1,"method":"ping"}')
    finish(w, result(1, {}) + b"\n")


def test_over_long_line_is_a_parse_error_and_skipped(ref):
    w = ref()
    pad = b"x" * (5 << 20)
    w.send_raw(b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"pad":"' + pad + b'"}}\n')
    w.send(rq(2, "ping"))
    assert w.read_line() == error(None, PARSE, "line too long")
    assert w.read_line() == result(2, {})
    finish(w)


def test_stdout_carries_only_json_rpc_and_diagnostics_go_to_stderr(ref):
    w = ref("--verbose")
    w.send_raw(b"garbage\n[]\n{}\n")
    w.send(rq(1, "nope"), notif("x"), call(2, "slow", {"ms": 10, "steps": 2}, token=1), [rq(3, "ping")])
    w.close_stdin()
    out = w.read_to_eof()
    assert w.wait() == 0
    lines = out.split(b"\n")
    assert lines[-1] == b"" and len(lines) == 9
    for line in lines[:-1]:
        msg = json.loads(line)
        for m in msg if isinstance(msg, list) else [msg]:
            assert m["jsonrpc"] == "2.0"
            assert ("method" in m) != ("result" in m or "error" in m)
            assert not ("result" in m and "error" in m)
    err = w.stderr()
    assert b"parse error" in err and b"notification x" in err and b"request 1 nope" in err
    assert all(l.startswith(b"ref_worker[%d]: " % w.pid) for l in err.splitlines())


# ---------------------------------------------------------------- end of work

def test_eof_when_idle_exits_0_at_once(ref):
    w = ref()
    w.send(rq(1, "ping"))
    assert w.read_line() == result(1, {})
    finish(w)


def test_eof_finishes_work_in_flight_then_exits_0(ref):
    w = ref()
    t0 = time.monotonic()
    w.send(call(1, "slow", {"ms": 300, "steps": 1}, token="t"), call(2, "slow", {"ms": 100, "steps": 0}))
    w.close_stdin()
    assert w.read_line() == result(2, text("slept 100 ms in 0 steps"))
    assert time.monotonic() - t0 >= 0.1
    rest = w.read_to_eof()
    assert w.wait() == 0
    assert time.monotonic() - t0 >= 0.3
    assert rest == (b'{"jsonrpc":"2.0","method":"notifications/progress","params":'
                    b'{"progressToken":"t","progress":1,"total":1}}\n'
                    + result(1, text("slept 300 ms in 1 steps")) + b"\n")


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signal_finishes_work_in_flight_then_exits_0(ref, sig):
    w = ref()
    t0 = time.monotonic()
    w.send(call(1, "slow", {"ms": 300, "steps": 0}, sid="s"), rq(2, "ping"))
    assert w.read_line() == result(2, {})  # both were read
    w.proc.send_signal(sig)
    assert w.read_line() == result(1, text("slept 300 ms in 0 steps"), sid="s")
    assert time.monotonic() - t0 >= 0.3
    assert w.read_to_eof() == b""
    assert w.wait() == 0
    w.wait_stderr(b"finishing 1 request(s) in flight")


def test_sigterm_when_idle_exits_0_and_stops_reading(ref):
    w = ref()
    w.send(rq(1, "ping"))
    assert w.read_line() == result(1, {})
    w.proc.send_signal(signal.SIGTERM)
    assert w.wait() == 0
    assert w.read_to_eof() == b""


def test_sigterm_answers_a_sample_call_with_an_internal_error(ref):
    w = ref()
    w.send(call(1, "sample", {"prompt": "p"}))
    assert w.read_line() == sampling_request(1, "p")
    w.proc.send_signal(signal.SIGTERM)
    assert w.read_line() == error(1, INTERNAL, "shutting down before the client answered")
    assert w.wait() == 0


def test_reader_gone_exits_1(ref):
    w = ref()
    w.proc.stdout.close()
    w.send(rq(1, "ping"))
    assert w.wait() == 1
    w.wait_stderr(b"stdout: reader gone")


# ---------------------------------------------------------------- command line

def test_help_version_and_usage_errors(ref_path):
    p = subprocess.run([str(ref_path), "--help"], capture_output=True, timeout=5)
    assert p.returncode == 0 and p.stdout.startswith(b"usage: ref_worker")
    p = subprocess.run([str(ref_path), "--version"], capture_output=True, timeout=5)
    assert p.returncode == 0 and p.stdout == b"ref_worker 0.1.0\n"
    p = subprocess.run([str(ref_path), "--bogus"], stdin=subprocess.DEVNULL, capture_output=True, timeout=5)
    assert p.returncode == 2 and p.stdout == b"" and b"unknown argument" in p.stderr
