"""An MCP server, on its own or behind the bus (WORKER_SPEC.md, T, F, R, W):
lifecycle, tools, progress, cancellation, requests to the client, and the
end of work with calls in flight. The tool calls are the description's (or,
for tool_call, one found in tools/list): tool_call (answers at once),
long_call (runs {ms}, reports progress when given a token), ask_call (asks
the client, then answers). Every test here talks MCP (worker_profile); those
citing `plain` clauses (sessions, SIGTERM, readings of the bus) run only for
a worker that claims both."""

import signal

import pytest

from stdio_bus_conformance.worker import rawjson as wj
from stdio_bus_conformance.worker.checks import answers, error_response, require, same_session, show
from stdio_bus_conformance.worker.process import WorkerTimeout
from stdio_bus_conformance.worker.run import CLIENT_INFO

pytestmark = pytest.mark.worker_profile("mcp")

PARAMS, INTERNAL = -32602, -32603


def result_of(line, what):
    obj = line.obj
    assert isinstance(obj.get("result"), dict), f"{what}: expected a result object, got {line.data[:300]!r}"
    return obj["result"]


def long_deadline(worker, ms):
    return worker.long_ms(ms) / 1000 + worker.timeout


def token_key(line):
    """The progress token of a notifications/progress line, as a JSON value."""
    params = line.obj.get("params")
    return wj.key_of(params.get("progressToken")) if isinstance(params, dict) else None


def all_progress(lines):
    return [line for line in lines if wj.kind(line.obj) == "notification"
            and line.obj.get("method") == "notifications/progress"]


def worker_requests(lines):
    return [line for line in lines if line.kind == "request"]


# -- lifecycle ---------------------------------------------------------------------------
@pytest.mark.clause("SB-T-8")
def test_initialize_answers_version_capabilities_and_server_info(worker):
    w = worker.spawn(handshake=False)
    m = worker.initialize(session="s1")
    w.send(m.line)
    res = result_of(w.recv_response(m.key), "initialize")
    assert isinstance(res.get("protocolVersion"), str), f"protocolVersion is not a string: {res}"
    assert isinstance(res.get("capabilities"), dict), f"capabilities is not an object: {res}"
    info = res.get("serverInfo")
    assert isinstance(info, dict) and isinstance(info.get("name"), str) and isinstance(info.get("version"), str), \
        f"serverInfo must hold a string name and version: {res}"


@pytest.mark.clause("SB-T-9")
def test_initialize_negotiates_the_protocol_version(worker):
    w = worker.spawn(handshake=False)
    m = worker.initialize("1999-01-01", session="s1")
    w.send(m.line)
    offered = result_of(w.recv_response(m.key), "initialize 1999-01-01").get("protocolVersion")
    assert isinstance(offered, str) and offered != "1999-01-01", \
        f"asked for an unknown version, the worker offered {offered!r}"
    w = worker.spawn(handshake=False)  # a connection is initialized once (MCP lifecycle)
    again = worker.initialize(offered, session="s2")
    w.send(again.line)
    got = result_of(w.recv_response(again.key), f"initialize {offered}").get("protocolVersion")
    assert got == offered, f"asked for {offered!r}, which it offered, and got {got!r}"


@pytest.mark.clause("SB-T-10")
def test_initialize_declares_tools(worker):
    w = worker.spawn(handshake=False)
    m = worker.initialize(session="s1")
    w.send(m.line)
    caps = result_of(w.recv_response(m.key), "initialize").get("capabilities")
    assert isinstance(caps, dict) and isinstance(caps.get("tools"), dict), \
        f"capabilities has no tools object: {caps!r}"


@pytest.mark.clause("SB-T-11")
def test_initialized_notification_gets_nothing(worker):
    worker.blocked_by("notification-answered")  # every notification, this one too: SB-J-10's root cause
    w = worker.spawn(handshake=False)
    m = worker.initialize(session="s1")
    w.send(m.line)
    w.recv_response(m.key)
    before, _ = worker.exchange(w, [worker.notification("notifications/initialized", session="s1").line],
                                session="s1")
    before = answers(before)  # what it sends on its own (list_changed...) is no reply
    assert not before, f"notifications/initialized was answered: {show(before)}"


@pytest.mark.clause("SB-T-12")
def test_tools_list_gives_named_tools_with_object_schemas(worker):
    w = worker.spawn()
    m = worker.rpc("tools/list", session="s1")
    w.send(m.line)
    tools = result_of(w.recv_response(m.key), "tools/list").get("tools")
    assert isinstance(tools, list), f"tools is not an array: {tools!r}"
    for t in tools:
        assert isinstance(t, dict) and isinstance(t.get("name"), str), f"a tool without a string name: {t!r}"
        schema = t.get("inputSchema")
        assert isinstance(schema, dict) and schema.get("type") == "object", \
            f"tool {t.get('name')!r}: inputSchema must be an object of type \"object\": {schema!r}"


@pytest.mark.requires("tool_call")
@pytest.mark.clause("SB-T-13")
def test_tool_call_result_holds_content(worker):
    w = worker.spawn()
    m = worker.call("tool_call", session="s1", text="hello")
    w.send(m.line)
    res = result_of(w.recv_response(m.key), "tools/call")
    content = res.get("content")
    assert isinstance(content, list), f"content is not an array: {res!r}"
    for item in content:
        assert isinstance(item, dict) and isinstance(item.get("type"), str), f"content item without type: {item!r}"
        if item["type"] == "text":
            assert isinstance(item.get("text"), str), f"text item without a string text: {item!r}"


@pytest.mark.clause("SB-T-14")
def test_unknown_tool_is_invalid_params(worker):
    w = worker.spawn()
    m = worker.rpc("tools/call", {"name": "sb-no-such-tool", "arguments": {}}, session="s1")
    w.send(m.line)
    error_response(w.recv_response(m.key), PARAMS, "tools/call of an unknown tool")


@pytest.mark.clause("SB-R-4")
def test_every_session_initializes_and_nothing_waits_for_it(worker):
    w = worker.spawn()
    first = worker.rpc("tools/list", session="a")  # before any initialize
    w.send(first.line)
    result_of(w.recv_response(first.key), "tools/list before initialize")
    for session in ("a", "b", "a"):
        m = worker.initialize(session=session)
        w.send(m.line)
        result_of(w.recv_response(m.key), f"initialize in session {session}")
    if worker.desc.tool_call is not None:
        m = worker.call("tool_call", session="c")  # a session that never initialized
        w.send(m.line)
        result_of(w.recv_response(m.key), "tools/call in a session that never initialized")


@pytest.mark.clause("SB-T-5")
def test_ping_and_tools_list_are_answered_at_once(worker):
    w = worker.spawn()
    for m in (worker.rpc("ping", session="s1"), worker.rpc("tools/list", session="s1"), worker.rpc("ping"),
              worker.rpc("sb/no/such/method", session="s1")):
        w.send(m.line)
        w.recv_response(m.key, worker.timeout)


def params_error_problem(line, what) -> str | None:
    """SB-J-8 judges the code of an error that comes: a server may accept
    params that a client MUST NOT send (leniency breaks no source). Why the
    answer breaks it; "" when it is a result (not judged); None when right."""
    if "error" not in line.obj:
        return ""
    try:
        error_response(line, PARAMS, what)
    except AssertionError as exc:
        return str(exc)
    return None


@pytest.mark.clause("SB-J-8")
def test_initialize_without_version_and_bad_arguments_are_invalid_params(worker):
    # initialize as the first message of a connection, as a client sends it, without protocolVersion
    w = worker.spawn(handshake=False)
    m = worker.initialize(params={"capabilities": {}, "clientInfo": CLIENT_INFO}, session="s1")
    w.send(m.line)
    problems = [params_error_problem(w.recv_response(m.key), f"request {m.line.strip()!r}")]
    # tools/call whose arguments are not an object (the CallToolRequest schema), on a listed tool
    w = worker.spawn()
    if worker.desc.tool_call is not None:
        name = worker.desc.tool_call["name"]
    else:
        listed = worker.rpc("tools/list", session="s1")
        w.send(listed.line)
        tools = result_of(w.recv_response(listed.key), "tools/list").get("tools") or [{}]
        name = tools[0].get("name") if isinstance(tools[0], dict) else None
        require(isinstance(name, str), f"tools/list names no tool: {tools!r}")
    m = worker.rpc("tools/call", {"name": name, "arguments": 5}, session="s1")
    w.send(m.line)
    problems.append(params_error_problem(w.recv_response(m.key), f"request {m.line.strip()!r}"))
    assert not [p for p in problems if p], "; ".join(p for p in problems if p)
    if problems == ["", ""]:
        pytest.skip("the worker accepted both requests (a result each): no error code to judge")


# -- text on one line, in UTF-8 --------------------------------------------------------------
@pytest.mark.requires("tool_call")
@pytest.mark.clause("SB-T-1")
def test_tool_text_with_newlines_comes_back_on_one_line(worker):
    if not worker.tool_text():
        pytest.skip("the tool call takes no text")
    w = worker.spawn()
    m = worker.call("tool_call", session="s1", text="one\ntwo\r\nthree\u2028four")
    w.send(m.line)
    line = w.recv_response(m.key)
    assert line.complete and b"\n" not in line.data[:-1]


@pytest.mark.requires("tool_call")
@pytest.mark.clause("SB-T-2")
def test_tool_text_that_is_not_ascii_comes_back_in_utf8(worker):
    if not worker.tool_text():
        pytest.skip("the tool call takes no text")
    w = worker.spawn()
    for text in ("caf\u00e9 \U0001F600 \u4e2d", "\u00e9" * 300):
        m = worker.call("tool_call", session="s\u00e9", text=text)
        w.send(m.line)
        w.recv_response(m.key)
    escaped = worker.rpc("tools/call", b'{"name":' + wj.token(worker.desc.tool_call["name"]) + b',"arguments":'
                         + wj.token(worker.call_params("tool_call", text="\x00")["arguments"])
                         .replace(b"\\u0000", b"\\u00e9\\ud83d\\ude00") + b"}", session="s1")
    w.send(escaped.line)
    w.recv_response(escaped.key)
    bad = [line for line in w.lines if not wj.is_utf8(line.data)]
    assert not bad, f"lines that are not UTF-8: {show(bad)}"


# -- progress ------------------------------------------------------------------------------
@pytest.mark.requires("long_call")
@pytest.mark.clause("SB-F-4")
def test_progress_carries_the_token_and_grows(worker):
    w = worker.spawn()
    tokens = [b'"tok-1"', b"7", b'"t\\u0041"', b"-3"]  # strings and integers (MCP progress)
    keys = [wj.id_key(t) for t in tokens]  # compared as JSON values
    msgs = [worker.call_raw_token("long_call", t, session="s1", ms=200, steps=3) for t in tokens]
    w.send_lines([m.line for m in msgs])
    seen = 0
    for key, m in zip(keys, msgs):
        w.recv_response(m.key, long_deadline(worker, 200))
        mine = [line for line in all_progress(w.lines) if token_key(line) == key]
        strays = [line for line in all_progress(w.lines) if token_key(line) not in keys]
        assert not strays, f"progress with a token that is not one sent: {show(strays)}"
        values = [line.obj["params"].get("progress") for line in mine]
        assert all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values), \
            f"progress that is not a number: {show(mine)}"
        assert all(a < b for a, b in zip(values, values[1:])), f"progress does not grow: {values}"
        seen += len(mine)
    if not seen:
        pytest.skip("the long call sent no progress at all: nothing to judge")


@pytest.mark.requires("long_call")
@pytest.mark.clause("SB-F-5")
def test_no_progress_without_a_token(worker):
    w = worker.spawn()
    m = worker.call("long_call", session="s1", ms=200, steps=3)
    w.send(m.line)
    w.recv_response(m.key, long_deadline(worker, 200))
    worker.exchange(w, [], session="s1")
    bad = all_progress(w.lines)
    assert not bad, f"progress for a call that gave no token: {show(bad)}"


@pytest.mark.requires("long_call")
@pytest.mark.clause("SB-F-6")
def test_no_progress_after_the_answer(worker):
    w = worker.spawn()
    a = worker.call("long_call", session="s1", token="tA", ms=150, steps=3)
    w.send(a.line)
    answer = w.recv_response(a.key, long_deadline(worker, 150))
    # a second, longer call: its answer proves time has passed for strays of the first
    b = worker.call("long_call", session="s1", token="tB", ms=300, steps=2)
    w.send(b.line)
    w.recv_response(b.key, long_deadline(worker, 300))
    late = [line for line in all_progress(w.lines) if line.seq > answer.seq
            and line.obj["params"].get("progressToken") == "tA"]
    assert not late, f"progress for a call after its answer: {show(late)}"


@pytest.mark.requires("long_call")
@pytest.mark.clause("SB-W-10")
def test_progress_names_the_session_of_its_request(worker):
    w = worker.spawn()
    m = worker.call("long_call", session="w10", token="tw", ms=150, steps=3)
    w.send(m.line)
    w.recv_response(m.key, long_deadline(worker, 150))
    mine = [line for line in all_progress(w.lines) if line.obj["params"].get("progressToken") == "tw"]
    bad = [line for line in mine if line.obj.get("sessionId") != "w10"]
    assert not bad, f"progress without the request's sessionId \"w10\": {show(bad)}"


@pytest.mark.requires("long_call")
@pytest.mark.clause("SB-R-2")
def test_progress_copies_the_session_token(worker):
    w = worker.spawn()
    session = b'"w\\u0031\\u0030"'
    m = worker.call("long_call", session=session, token="tr", ms=150, steps=3)
    w.send(m.line)
    w.recv_response(m.key, long_deadline(worker, 150))
    mine = [line for line in all_progress(w.lines) if line.obj["params"].get("progressToken") == "tr"]
    bad = [p for p in (same_session(line, session) for line in mine) if p]
    assert not bad, "progress: " + "; ".join(bad)


@pytest.mark.requires("long_call")
@pytest.mark.clause("SB-F-3")
def test_forty_long_calls_with_progress_stay_whole_lines(worker):
    w = worker.spawn()
    msgs = [worker.call("long_call", session=f"s{i % 4}", token=f"t{i}", ms=300, steps=5) for i in range(40)]
    w.send_lines([m.line for m in msgs])
    for m in msgs:
        w.recv_response(m.key, long_deadline(worker, 300))
    cut = [line for line in w.lines if line.obj is None]
    assert not cut, f"lines that are not whole messages: {show(cut)}"


# -- concurrency -----------------------------------------------------------------------------
@pytest.mark.requires("long_call")
@pytest.mark.clause("SB-F-1")
def test_a_long_call_does_not_delay_a_ping(worker):
    w = worker.spawn()
    slow = worker.call("long_call", session="s1", ms=1500)
    w.send(slow.line)
    ping = worker.rpc("ping", session="s2")
    w.send(ping.line)
    pong = w.recv_response(ping.key)
    done = w.recv_response(slow.key, long_deadline(worker, 1500))
    assert pong.seq < done.seq, "the ping was answered only after the long call"


@pytest.mark.requires("long_call")
@pytest.mark.clause("SB-F-1")
def test_concurrent_calls_are_answered_as_they_end(worker):
    # `002_*`: each request runs in its own task: the shorter of two long calls sent together ends first
    if worker.long_ms(900) != 900:
        pytest.skip("the long call's length is fixed (long_call_ms): two calls cannot differ")
    w = worker.spawn()
    long = worker.call("long_call", id="long", session="s1", ms=900)
    short = worker.call("long_call", id="short", session="s2", ms=150)
    w.send_lines([long.line, short.line])
    first = w.recv_response(short.key, long_deadline(worker, 150))
    last = w.recv_response(long.key, long_deadline(worker, 900))
    assert first.seq < last.seq, "the shorter call, sent second, was answered only after the longer one"


@pytest.mark.requires("ask_call")
@pytest.mark.clause("SB-F-1")
def test_a_call_waiting_for_the_client_does_not_delay_a_ping(worker):
    w = worker.spawn(auto_reply=False)
    ask = worker.call("ask_call", session="s1")
    w.send(ask.line)
    req = w.take(lambda l: l.kind == "request", what="the worker's request to its client")
    ping = worker.rpc("ping", session="s2")
    w.send(ping.line)
    w.recv_response(ping.key)
    worker.reply_to(w, req)
    w.recv_response(ask.key)


# -- cancellation ------------------------------------------------------------------------------
@pytest.mark.requires("long_call")
@pytest.mark.clause("SB-F-8")
def test_a_cancelled_call_is_never_answered(worker):
    w = worker.spawn()
    x = worker.call("long_call", id="x", session="s1", ms=600)
    w.send(x.line)
    worker.exchange(w, [], session="s1")  # x has been read
    w.send(worker.cancel("x", session="s1").line)
    y = worker.call("long_call", id="y", session="s1", ms=900)  # sent after, ends after
    w.send(y.line)
    w.recv_response(y.key, long_deadline(worker, 900))
    answered = [line for line in w.lines if line.is_response_to(x.key)]
    assert not answered, f"the cancelled call was answered: {show(answered)}"


@pytest.mark.requires("long_call")
@pytest.mark.clause("SB-F-9")
def test_cancellation_gets_nothing_in_reply(worker):
    w = worker.spawn()
    done = worker.request(id="done", session="s1")
    w.send(done.line)
    w.recv_response(done.key)
    busy = worker.call("long_call", id="busy", session="s1", ms=800)
    w.send(busy.line)
    worker.exchange(w, [], session="s1")
    cancels = [worker.cancel("busy", session="s1"), worker.cancel("done", session="s1"),
               worker.cancel("never-sent", session="s1"), worker.cancel(424242)]
    before, _ = worker.exchange(w, [c.line for c in cancels], session="s1")
    replies = [line for line in answers(before) if not line.is_response_to(busy.key)]
    assert not replies, f"the worker replied to notifications/cancelled: {show(replies)}"


@pytest.mark.requires("long_call")
@pytest.mark.clause("SB-R-5")
def test_cancellation_names_the_request_of_its_own_session(worker):
    w = worker.spawn()
    a = worker.call("long_call", id=5, session="a", ms=600)
    b = worker.call("long_call", id=5, session="b", ms=600)
    w.send_lines([a.line, b.line])
    worker.exchange(w, [], session="a")
    w.send(worker.cancel(b"5.0", session="a").line)
    later = worker.call("long_call", id="later", session="a", ms=900)
    w.send(later.line)
    w.recv_response(later.key, long_deadline(worker, 900))
    fives = [line for line in w.lines if line.is_response_to(a.key)]
    sessions = [line.obj.get("sessionId") for line in fives]
    assert "a" not in sessions, f"the call of session a, cancelled, was answered: {show(fives)}"
    assert "b" in sessions, f"the call with the same id in session b was not answered: {show(fives)}"


# -- requests to the client --------------------------------------------------------------------
@pytest.mark.requires("ask_call")
@pytest.mark.clause("SB-F-10")
def test_requests_to_the_client_have_a_method_and_fresh_ids(worker):
    w = worker.spawn(auto_reply=False)
    asks = [worker.call("ask_call", session="s1") for _ in range(2)]
    w.send_lines([m.line for m in asks])      # two at once
    for m in asks:
        worker.serve(w, m.key)
    for _ in range(2):                           # then one by one
        m = worker.call("ask_call", session="s2")
        w.send(m.line)
        worker.serve(w, m.key)
    reqs = worker_requests(w.lines)
    require(len(reqs) >= 4, f"the ask_call made the worker send {len(reqs)} requests for 4 calls")
    assert all(isinstance(r.obj.get("method"), str) for r in reqs), f"requests without a method: {show(reqs)}"
    ids = [r.id_key for r in reqs]
    assert None not in ids, f"requests without a usable id: {show(reqs)}"
    odd = [r for r in reqs if not (isinstance(r.obj["id"], str) or (isinstance(r.obj["id"], int)
                                                                    and not isinstance(r.obj["id"], bool)))]
    assert not odd, f"request ids that are neither strings nor integers (MCP messages): {show(odd)}"
    assert len(set(ids)) == len(ids), f"request ids used twice: {show(reqs)}"


@pytest.mark.requires("ask_call")
@pytest.mark.clause("SB-F-11", "SB-R-2")
def test_requests_to_the_client_carry_the_session(worker):
    w = worker.spawn(auto_reply=False)
    for session in (b'"ask"', b'"a\\u0073k"'):
        m = worker.call("ask_call", session=session)
        w.send(m.line)
        req = w.take(lambda l: l.kind == "request", what="the worker's request to its client")
        problem = same_session(req, session)
        worker.reply_to(w, req)
        w.recv_response(m.key)
        assert not problem, f"request to the client: {problem}"


@pytest.mark.requires("ask_call")
@pytest.mark.clause("SB-F-12")
def test_the_client_answer_resumes_the_call(worker):
    w = worker.spawn(auto_reply=False)
    for member in (None, {"error": {"code": -1, "message": "the user declined"}}):
        m = worker.call("ask_call", session="s1")
        w.send(m.line)
        req = w.take(lambda l: l.kind == "request", what="the worker's request to its client")
        worker.reply_to(w, req, member)
        w.recv_response(m.key)


# -- the end, with work in flight ------------------------------------------------------------------
@pytest.mark.requires("long_call")
@pytest.mark.clause("SB-T-15")
def test_end_of_input_lets_a_long_call_finish_with_its_progress(worker):
    w = worker.spawn()
    m = worker.call("long_call", session="s1", token="eof", ms=400, steps=2)
    w.send(m.line)
    worker.exchange(w, [], session="s1")
    w.close_stdin()
    answer = w.recv_response(m.key, long_deadline(worker, 400))
    if worker.long_steps():
        mine = [line for line in all_progress(w.lines) if line.obj["params"].get("progressToken") == "eof"
                and line.seq < answer.seq]
        assert len(mine) == 2, f"expected its 2 progress notifications before the answer: {show(mine)}"


@pytest.mark.requires("long_call")
@pytest.mark.clause("SB-W-11")
def test_sigterm_with_a_long_call_in_flight_ends_the_worker_by_itself(worker):
    w = worker.spawn()
    m = worker.call("long_call", session="s1", ms=1000)
    w.send(m.line)
    worker.exchange(w, [], session="s1")
    w.signal(signal.SIGTERM)
    try:
        rc = w.wait_exit(worker.drain_timeout)
    except WorkerTimeout:
        raise AssertionError(f"still running {worker.drain_timeout:g} s after SIGTERM") from None
    assert rc >= 0, f"killed by signal {signal.Signals(-rc).name} instead of exiting"


@pytest.mark.requires("long_call")
@pytest.mark.clause("SB-R-3")
def test_sigterm_lets_a_long_call_finish_then_exits_0(worker):
    w = worker.spawn()
    m = worker.call("long_call", session="s1", token="term", ms=500, steps=2)
    w.send(m.line)
    worker.exchange(w, [], session="s1")
    w.signal(signal.SIGTERM)
    w.recv_response(m.key, long_deadline(worker, 500))
    try:
        rc = w.wait_exit(worker.drain_timeout)
    except WorkerTimeout:
        raise AssertionError(f"still running {worker.drain_timeout:g} s after SIGTERM") from None
    assert rc == 0, f"exit status {rc} after SIGTERM, expected 0"


@pytest.mark.requires("ask_call")
@pytest.mark.parametrize("how", ["eof", "sigterm"])
@pytest.mark.clause("SB-R-8")
def test_a_call_waiting_for_the_client_is_answered_internal_error_at_the_end(worker, how):
    w = worker.spawn(auto_reply=False)
    m = worker.call("ask_call", session="s1")
    w.send(m.line)
    w.take(lambda l: l.kind == "request", what="the worker's request to its client")
    if how == "eof":
        w.close_stdin()
    else:
        w.signal(signal.SIGTERM)
    error_response(w.recv_response(m.key), INTERNAL, f"a call waiting for the client at {how}")
