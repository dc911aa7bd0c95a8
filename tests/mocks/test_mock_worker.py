"""mock_worker does what mock_workers/README.md says.

The test plays the daemon: it spawns the mock directly, writes its stdin,
reads its stdout, and checks exact bytes, exit statuses, signals and log
records. Waits are select()/log polls with deadlines, never fixed sleeps.
"""
import json
import os
import select
import signal
import subprocess
import time

import pytest

from conftest import read_log


def req(id, method="m", params=None, sid=None, mock=None):
    msg = {"jsonrpc": "2.0", "id": id, "method": method}
    if mock is not None:
        params = dict(params or {}, mock=mock)
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


def echo_line(pid, id_tok, method_tok, params_tok="null", worker="null", pool="null",
              sid_tok=None, extra=""):
    line = (f'{{"jsonrpc":"2.0","id":{id_tok},"result":{{"method":{method_tok},'
            f'"params":{params_tok},"worker":{worker},"pool":{pool},"pid":{pid}{extra}}}')
    if sid_tok is not None:
        line += f',"sessionId":{sid_tok}'
    return (line + "}").encode()


# ---------------------------------------------------------------- echo

def test_echo_answer_has_the_contract_shape(spawn):
    m = spawn(env={"STDIO_BUS_WORKER_ID": "3", "STDIO_BUS_POOL_ID": "p1"})
    m.send_raw(b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"x":1},"sessionId":"s1"}\n')
    assert m.read_line() == echo_line(m.pid, "1", '"tools/call"', '{"x":1}', '"3"', '"p1"', '"s1"')
    m.send_raw(b'{"jsonrpc":"2.0","id":"a","method":"ping"}\n')
    assert m.read_line() == echo_line(m.pid, '"a"', '"ping"', worker='"3"', pool='"p1"')


def test_unset_env_is_reported_as_null(spawn):
    m = spawn()
    m.send(req(5))
    ans = m.read_json()
    assert ans["result"]["worker"] is None and ans["result"]["pool"] is None
    assert ans["result"]["pid"] == m.pid
    assert "sessionId" not in ans


@pytest.mark.parametrize("id_tok", [b"9007199254740993", b"1.0", b"-0", b'"\\u0041"', b"1e2"])
def test_ids_and_params_are_echoed_as_raw_bytes(spawn, id_tok):
    m = spawn()
    m.send_raw(b'{"jsonrpc":"2.0", "id" : ' + id_tok
               + b' ,"method":"x","params":{ "a" : [1, 2.50] },"sessionId":"s\\u0031"}\n')
    assert m.read_line() == echo_line(m.pid, id_tok.decode(), '"x"', '{ "a" : [1, 2.50] }',
                                      sid_tok='"s\\u0031"')


def test_notifications_blank_lines_and_garbage_get_no_answer(spawn):
    m = spawn()
    m.send_raw(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n'
               b'\n   \n'
               b'this is garbage\n'
               b'[1,2]\n'
               b'{"jsonrpc":"2.0","id":1,"result":{}}\n'
               b'{"a":1}\n')
    m.send(req(2))
    assert json.loads(m.read_line())["id"] == 2  # nothing came before it
    m.wait_stderr(b"not a JSON object")
    m.close_stdin()
    assert m.read_to_eof() == b""
    assert m.wait() == 0


def test_partial_line_waits_for_its_newline(spawn):
    m = spawn()
    m.send_raw(b'{"jsonrpc":"2.0","id":1,')
    m.wait_log(lambda r: any(x.dir == "start" for x in r))
    m.assert_silent(0.1)
    m.send_raw(b'"method":"late"}\n')
    assert m.read_json()["result"]["method"] == "late"


def test_last_line_without_newline_is_handled_at_eof(spawn):
    m = spawn()
    m.send_raw(b'{"jsonrpc":"2.0","id":1,"method":"x"}')
    m.close_stdin()
    assert m.read_json()["id"] == 1
    assert m.wait() == 0


# ---------------------------------------------------------------- log & pidfile

def test_log_records_start_in_out_exit(spawn):
    m = spawn("--mode", "echo", env={"STDIO_BUS_WORKER_ID": "7"})
    line = b'{"jsonrpc":"2.0","id":1,"method":"x"}'
    m.send_raw(line + b"\n\n")
    out = m.read_line()
    m.close_stdin()
    assert m.wait() == 0
    recs = m.log()
    assert [r.dir for r in recs] == ["start", "in", "in", "out", "exit"]
    assert recs[0].data == " ".join(m.args).encode()
    assert recs[1].data == line and recs[2].data == b""
    assert recs[3].data == out
    assert recs[4].data == b"0"
    assert all(r.worker == "7" for r in recs)
    assert [r.ns for r in recs] == sorted(r.ns for r in recs)


def test_log_without_worker_id_uses_dash(spawn):
    m = spawn()
    m.close_stdin()
    assert m.wait() == 0
    assert {r.worker for r in m.log()} == {"-"}


def test_two_workers_share_one_log_without_torn_records(spawn, tmp_path):
    a = spawn(env={"STDIO_BUS_WORKER_ID": "1"}, name="shared")
    b = spawn(env={"STDIO_BUS_WORKER_ID": "2"}, name="shared")
    assert a.log_path == b.log_path
    big = "y" * 3000
    for m in (a, b):
        m.send(*[req(i, params={"pad": big}) for i in range(200)])
        m.close_stdin()
    for m in (a, b):
        assert len(m.read_to_eof().split(b"\n")) == 201
        assert m.wait() == 0
    recs = read_log(a.log_path)  # LogRecord() asserts every record parses
    for m, wid in ((a, "1"), (b, "2")):
        mine = [r for r in recs if r.pid == m.pid]
        assert {r.worker for r in mine} == {wid}
        assert sum(r.dir == "in" for r in mine) == 200
        assert sum(r.dir == "out" for r in mine) == 200
        assert all(json.loads(r.data) for r in mine if r.dir in ("in", "out"))


def test_pidfile_gets_one_line_per_start(spawn, tmp_path):
    pf = tmp_path / "pids"
    pids = []
    for _ in range(3):
        m = spawn("--pidfile", str(pf))
        m.close_stdin()
        assert m.wait() == 0
        pids.append(m.pid)
    assert pf.read_text() == "".join(f"{p}\n" for p in pids)


def test_usage_errors_exit_2_and_help_exits_0(mock_path):
    for args in (["--bogus"], ["--mode", "nope"], ["--after", "x"], ["--signal", "NOPE"],
                 ["extra"]):
        p = subprocess.run([str(mock_path), *args], stdin=subprocess.DEVNULL,
                           capture_output=True, timeout=5)
        assert p.returncode == 2, args
        assert p.stdout == b""
    p = subprocess.run([str(mock_path), "--help"], capture_output=True, timeout=5)
    assert p.returncode == 0 and b"usage" in p.stdout


# ---------------------------------------------------------------- directives

def test_delay_lets_later_requests_overtake(spawn):
    m = spawn()
    t0 = time.monotonic()
    m.send(req(1, mock={"delay_ms": 300}), req(2))
    assert m.read_json()["id"] == 2
    assert m.read_json()["id"] == 1
    assert time.monotonic() - t0 >= 0.3


def test_notify_sends_progress_before_the_answer(spawn):
    m = spawn()
    t0 = time.monotonic()
    m.send(req("p", sid="s", mock={"notify": 3, "notify_interval_ms": 60}))
    for i in (1, 2, 3):
        line = m.read_line()
        assert line == (b'{"jsonrpc":"2.0","method":"notifications/progress","params":'
                        b'{"progressToken":"p","progress":%d,"total":3},"sessionId":"s"}' % i)
    assert time.monotonic() - t0 >= 0.12
    ans = m.read_json()
    assert ans["id"] == "p" and ans["sessionId"] == "s"


def test_notify_without_session_omits_it(spawn):
    m = spawn()
    m.send(req(4, mock={"notify": 1}))
    assert m.read_line() == (b'{"jsonrpc":"2.0","method":"notifications/progress","params":'
                             b'{"progressToken":4,"progress":1,"total":1}}')
    assert m.read_json()["id"] == 4


def test_exit_directive_exits_without_answer_after_earlier_output(spawn):
    m = spawn()
    m.send(req(1), req(2, mock={"exit": 7}), req(3))  # one write: 3 is never handled
    assert m.read_json()["id"] == 1
    assert m.read_to_eof() == b""
    assert m.wait() == 7
    assert [r.data for r in m.log("exit")] == [b"7"]
    assert len(m.log("in")) == 2


@pytest.mark.parametrize("name,signo", [("SEGV", signal.SIGSEGV), ("KILL", signal.SIGKILL),
                                        ("ABRT", signal.SIGABRT)])
def test_signal_directive_kills_with_that_signal(spawn, name, signo):
    m = spawn()
    m.send(req(1), req(2, mock={"signal": name}))
    assert m.read_json()["id"] == 1
    assert m.read_to_eof() == b""
    assert m.wait() == -signo
    assert [r.data for r in m.log("raise")] == [name.encode()]
    assert m.log("exit") == []


def test_signal_term_directive_goes_through_the_term_handler(spawn):
    m = spawn()
    m.send(req(1, mock={"signal": "TERM"}))
    assert m.wait() == 0
    assert [r.dir for r in m.log()][-3:] == ["raise", "signal", "exit"]


def test_emit_repeat_writes_verbatim_then_exit(spawn):
    m = spawn()
    m.send(req(1, mock={"emit": '{"a":1}\n', "emit_repeat": 100, "then": "exit"}))
    assert m.read_to_eof() == b'{"a":1}\n' * 100
    assert m.wait() == 0
    assert len(m.log("out")) == 100


def test_then_exit_leaves_later_lines_of_the_same_read_unhandled(spawn):
    m = spawn()
    m.send(req(1, mock={"then": "exit"}), req(2))  # one write: 2 is never handled
    assert m.read_json()["id"] == 1
    assert m.read_to_eof() == b""
    assert m.wait() == 0
    assert len(m.log("in")) == 1


def test_then_exit_after_the_client_reply_leaves_later_lines_unhandled(spawn):
    m = spawn()
    m.send(req(1, mock={"request": {"method": "q"}, "then": "exit"}))
    assert json.loads(m.read_line())["id"] == "srv-1"
    m.send({"jsonrpc": "2.0", "id": "srv-1", "result": {}}, req(2))  # one write
    assert m.read_json()["id"] == 1
    assert m.read_to_eof() == b""
    assert m.wait() == 0
    assert len(m.log("in")) == 2


def test_emit_without_newline_is_logged_as_a_fragment(spawn):
    m = spawn()
    m.send(req(1, mock={"emit": "partial", "then": "exit"}))
    assert m.read_to_eof() == b"partial"
    assert m.wait() == 0
    assert [r.data for r in m.log("out")] == [b"partial"]


def test_directives_on_notifications(spawn):
    m = spawn()
    m.send(notif("n", {"mock": {"emit": "hello\n"}}), notif("n", {"mock": {"exit": 4}}))
    assert m.read_line() == b"hello"
    assert m.wait() == 4


def test_reply_id_and_reply_session(spawn):
    m = spawn()
    m.send(req(1, sid="s", mock={"reply_id": "nobody", "reply_session": "ghost"}))
    ans = m.read_json()
    assert ans["id"] == "nobody" and ans["sessionId"] == "ghost"
    m.send(req(2, sid="s", mock={"reply_session": None}))
    ans = m.read_json()
    assert ans["id"] == 2 and "sessionId" not in ans
    m.send(req(3, mock={"reply_id": {"x": [1]}}))
    assert m.read_json()["id"] == {"x": [1]}


def test_no_reply_answers_nothing(spawn):
    m = spawn()
    m.send(req(1, mock={"no_reply": True}), req(2))
    assert m.read_json()["id"] == 2
    m.close_stdin()
    assert m.read_to_eof() == b""
    assert m.wait() == 0


def test_big_pads_the_result(spawn):
    m = spawn()
    m.send(req(1, mock={"big": 300000}))
    ans = m.read_json()
    assert ans["result"]["pad"] == "x" * 300000


def test_split_writes_the_line_in_pieces_with_pauses(spawn):
    m = spawn()
    t0 = time.monotonic()
    m.send(req(1, mock={"split": 3, "split_pause_ms": 200}))
    chunks = []
    while sum(map(len, chunks)) == 0 or not chunks[-1].endswith(b"\n"):
        chunks.append(m.read_chunk())
    line = b"".join(chunks)
    assert json.loads(line)["id"] == 1
    n = len(line)
    # Each piece arrives on its own (the reader is far quicker than 200 ms).
    assert chunks == [line[: n // 3], line[n // 3: 2 * n // 3], line[2 * n // 3:]]
    assert time.monotonic() - t0 >= 0.4
    recs = m.wait_log(lambda r: any(x.dir == "out" for x in r))
    assert [r.data for r in recs if r.dir == "out"] == [line[:-1]]


def test_stall_read_stops_reading(spawn):
    m = spawn()
    m.send(req(1, mock={"stall": "read"}), req(2))
    assert m.read_json()["id"] == 1
    # The pipe to the mock fills up: nobody reads it any more.
    fd = m.proc.stdin.fileno()
    os.set_blocking(fd, False)
    sent, deadline = 0, time.monotonic() + 5
    chunk = json.dumps(req(3)).encode() + b"\n"
    while True:
        try:
            sent += os.write(fd, chunk * 64)
        except BlockingIOError:
            break
        assert time.monotonic() < deadline and sent < 16 << 20, "the mock keeps reading"
    assert [json.loads(r.data)["id"] for r in m.log("in")] == [1]
    m.assert_silent(0.05)
    m.kill(signal.SIGTERM)  # signals still work
    assert m.wait() == 0
    assert [r.dir for r in m.log()][-2:] == ["signal", "exit"]


def test_stall_write_keeps_reading_but_never_writes(spawn):
    m = spawn()
    m.send(req(1), req(2, mock={"stall": "write"}), req(3))
    assert m.read_json()["id"] == 1
    m.wait_log(lambda r: sum(x.dir == "in" for x in r) == 3)
    m.close_stdin()
    assert m.read_to_eof() == b""
    assert m.wait() == 0
    assert len(m.log("out")) == 1


def test_server_to_client_request_waits_for_the_reply(spawn):
    m = spawn()
    m.send(req(10, "ask", sid="s", mock={"request": {"method": "sampling/createMessage",
                                                      "params": {"q": 1}}}))
    assert m.read_line() == (b'{"jsonrpc":"2.0","id":"srv-1","method":"sampling/createMessage",'
                             b'"params":{"q":1},"sessionId":"s"}')
    m.send(req(11))  # served while 10 waits
    assert m.read_json()["id"] == 11
    m.send({"jsonrpc": "2.0", "id": "srv-99", "result": {}})  # nobody waits for it
    m.wait_stderr(b"srv-99")
    reply = b'{"jsonrpc":"2.0","id":"srv-1","result":{"ok":true},"sessionId":"s"}'
    m.send_raw(reply + b"\n")
    ans = m.read_line()
    assert ans == echo_line(m.pid, "10", '"ask"',
                            '{"mock":{"request":{"method":"sampling/createMessage","params":{"q":1}}}}',
                            sid_tok='"s"', extra=',"client_reply":' + reply.decode())
    m.send(req(12, mock={"request": {"method": "roots/list"}}))
    assert json.loads(m.read_line()) == {"jsonrpc": "2.0", "id": "srv-2", "method": "roots/list"}


def test_cancellable_request_is_dropped_on_cancel(spawn):
    m = spawn()
    m.send(req(5, sid="s", mock={"cancellable": True}),
           req(6, mock={"cancellable": True, "delay_ms": 100}))
    assert m.read_json()["id"] == 6  # finishes after its delay_ms
    m.send(notif("notifications/cancelled", {"requestId": 5, "reason": "user"}, sid="s"),
           notif("notifications/cancelled", {"requestId": 77}),
           req(7, "mock/cancelled"))
    ans = m.read_json()
    assert ans["id"] == 7 and ans["result"]["cancelled"] == [5]
    assert [r.data for r in m.log("cancel")] == [b"5"]
    m.wait_stderr(b"77")
    m.close_stdin()
    assert m.read_to_eof() == b""  # 5 is never answered
    assert m.wait() == 0


def test_params_mock_not_an_object_is_ignored(spawn):
    m = spawn()
    m.send(req(1, params={"mock": 3}))
    assert m.read_json()["result"]["params"] == {"mock": 3}
    m.wait_stderr(b"params.mock is not an object")


# ---------------------------------------------------------------- worker-level

@pytest.mark.parametrize("status", [0, 3, 42])
def test_crash_mode_exit_status(spawn, status, tmp_path):
    pf = tmp_path / "pids"
    m = spawn("--mode", "crash", "--exit-status", str(status), "--pidfile", str(pf))
    assert m.wait() == status
    assert pf.read_text() == f"{m.pid}\n"
    assert [r.dir for r in m.log()] == ["start", "exit"]


def test_crash_mode_default_status_is_1(spawn):
    assert spawn("--mode", "crash").wait() == 1


@pytest.mark.parametrize("name,signo", [("SEGV", signal.SIGSEGV), ("SIGABRT", signal.SIGABRT),
                                        ("KILL", signal.SIGKILL)])
def test_crash_mode_signal(spawn, name, signo):
    m = spawn("--mode", "crash", "--signal", name)
    assert m.wait() == -signo


def test_crash_after_ms_serves_until_then(spawn):
    m = spawn("--mode", "crash", "--crash-after-ms", "300", "--exit-status", "5")
    m.send(req(1))
    assert m.read_json()["id"] == 1
    assert m.wait() == 5
    start, end = [r.ns for r in m.log() if r.dir in ("start", "exit")]
    assert end - start >= 300_000_000


def test_after_n_messages_exits(spawn):
    m = spawn("--after", "3", "--exit-status", "9")
    m.send(req(1), notif("n"), req(2), req(3))
    assert [m.read_json()["id"] for _ in range(2)] == [1, 2]
    assert m.read_to_eof() == b""
    assert m.wait() == 9


def test_after_n_messages_aborts(spawn):
    m = spawn("--after", "1", "--signal", "ABRT")
    m.send(req(1))
    assert m.read_json()["id"] == 1
    assert m.wait() == -signal.SIGABRT


def test_exit_on_method(spawn):
    m = spawn("--exit-on", "shutdown/now", "--exit-status", "6")
    m.send(req(1), req(2, "shutdown/now"))
    assert m.read_json()["id"] == 1
    assert m.read_to_eof() == b""
    assert m.wait() == 6


def test_sigterm_default_logs_and_exits_0(spawn):
    m = spawn()
    m.send(req(1))
    m.read_line()
    m.kill(signal.SIGTERM)
    assert m.wait() == 0
    assert [(r.dir, r.data) for r in m.log()][-2:] == [("signal", b"TERM"), ("exit", b"0")]


def test_ignore_sigterm_needs_sigkill(spawn):
    m = spawn("--ignore-sigterm")
    m.wait_log(lambda r: any(x.dir == "start" for x in r))
    m.kill(signal.SIGTERM)
    m.wait_log(lambda r: any(x.dir == "signal" and x.data == b"TERM" for x in r))
    m.send(req(1))
    assert m.read_json()["id"] == 1  # still serving
    assert m.alive()
    m.kill(signal.SIGKILL)
    assert m.wait() == -signal.SIGKILL


def test_term_delay_keeps_serving_then_exits_0(spawn):
    m = spawn("--term-delay-ms", "300")
    m.wait_log(lambda r: any(x.dir == "start" for x in r))
    t0 = time.monotonic()
    m.kill(signal.SIGTERM)
    m.wait_log(lambda r: any(x.dir == "signal" for x in r))
    m.send(req(1))
    assert m.read_json()["id"] == 1
    assert m.wait() == 0
    assert time.monotonic() - t0 >= 0.28


def test_eof_drains_delayed_answers_then_exits_0(spawn):
    m = spawn()
    t0 = time.monotonic()
    m.send(req(1, mock={"delay_ms": 200}), req(2, mock={"cancellable": True}),
           req(3, mock={"request": {"method": "x"}}))
    assert json.loads(m.read_line())["id"] == "srv-1"
    m.close_stdin()
    assert m.read_json()["id"] == 1
    assert m.read_to_eof() == b""  # 2 and 3 can never finish: dropped
    assert m.wait() == 0
    assert time.monotonic() - t0 >= 0.2


def test_on_eof_stay_keeps_running(spawn):
    m = spawn("--on-eof", "stay")
    m.send(req(1))
    m.read_line()
    m.close_stdin()
    m.assert_silent(0.1)
    assert m.alive()
    m.kill(signal.SIGTERM)
    assert m.wait() == 0
    assert [r.dir for r in m.log()][-2:] == ["signal", "exit"]


def test_delay_ms_option_delays_every_answer(spawn):
    m = spawn("--delay-ms", "200")
    t0 = time.monotonic()
    m.send(req(1), req(2, mock={"delay_ms": 0}))
    assert m.read_json()["id"] == 2
    assert m.read_json()["id"] == 1
    assert time.monotonic() - t0 >= 0.2


def test_sleep_ms_blocks_between_answers(spawn):
    m = spawn("--sleep-ms", "150")
    t0 = time.monotonic()
    m.send(req(1), req(2))
    assert m.read_json()["id"] == 1
    assert m.read_json()["id"] == 2
    assert time.monotonic() - t0 >= 0.3  # serial: 150 ms each


def test_split_option_applies_to_every_answer(spawn):
    m = spawn("--split", "2", "--split-pause-ms", "150")
    m.send(req(1))
    first = m.read_chunk()
    assert not first.endswith(b"\n")
    rest = m.read_chunk()
    assert json.loads(first + rest)["id"] == 1
    assert len(first) == len(first + rest) // 2


def test_coalesce_writes_n_lines_in_one_write(spawn):
    m = spawn("--coalesce", "3")
    m.send(req(1))
    m.wait_log(lambda r: any(x.dir == "in" for x in r))
    m.assert_silent(0.2)
    m.send(req(2), req(3))
    lines = [m.read_json()["id"] for _ in range(3)]
    assert lines == [1, 2, 3]
    recs = m.wait_log(lambda r: sum(x.dir == "out" for x in r) == 3)
    last_in = max(r.ns for r in recs if r.dir == "in")
    outs = [r for r in recs if r.dir == "out"]
    assert len(outs) == 3 and all(r.ns > last_in for r in outs)
    m.send(req(4))
    m.close_stdin()  # held lines are written at EOF
    assert m.read_json()["id"] == 4
    assert m.wait() == 0


def test_stall_write_after_n_messages(spawn):
    m = spawn("--stall", "write", "--stall-after", "1")
    m.send(req(1), req(2))
    assert m.read_json()["id"] == 1
    m.wait_log(lambda r: sum(x.dir == "in" for x in r) == 2)
    m.close_stdin()
    assert m.read_to_eof() == b""
    assert m.wait() == 0


def test_stall_read_from_start(spawn):
    m = spawn("--stall", "read")
    m.send(req(1))
    m.assert_silent(0.1)
    assert m.log("in") == []
    m.kill(signal.SIGTERM)
    assert m.wait() == 0


def test_stdout_reader_gone_exits_3(spawn):
    m = spawn()
    m.proc.stdout.close()
    m.send(req(1))
    assert m.wait() == 3
    assert [r.data for r in m.log("exit")] == [b"3"]


# ---------------------------------------------------------------- flood, spam, bad

def test_flood_at_rate_with_session(spawn):
    m = spawn("--mode", "flood", "--rate", "100", "--count", "10", "--session", "S",
              "--trigger", "start")
    for i in range(1, 11):
        assert m.read_line() == (b'{"jsonrpc":"2.0","method":"notifications/message",'
                                 b'"params":{"seq":%d},"sessionId":"S"}' % i)
    # The mock's own clock: the flood starts after the `start` record and
    # the 10th notification is due 90 ms after the flood starts.
    recs = m.wait_log(lambda r: sum(x.dir == "out" for x in r) == 10)
    start = [r.ns for r in recs if r.dir == "start"][0]
    assert [r.ns for r in recs if r.dir == "out"][9] - start >= 90_000_000
    m.send(req(1))  # still echoes
    assert m.read_json()["id"] == 1


def test_flood_unlimited_rate_takes_session_from_first_request(spawn):
    m = spawn("--mode", "flood", "--count", "3000")
    m.assert_silent(0.05)  # --trigger first: nothing before a request
    m.send(req(1, sid="abc"))
    assert m.read_json()["id"] == 1  # the answer comes first
    for i in range(1, 3001):
        msg = m.read_json()
        assert msg["params"]["seq"] == i and msg["sessionId"] == "abc"
    m.close_stdin()
    assert m.read_to_eof() == b""
    assert m.wait() == 0


def test_flood_pauses_while_nobody_reads(spawn):
    m = spawn("--mode", "flood", "--trigger", "start")
    # Unlimited flood, stdout unread: the mock must block on the pipe, not
    # keep generating (memory stays bounded). Its `out` count stops growing
    # once the pipe (64 KiB) and its 64 KiB queue are full.
    recs = m.wait_log(lambda r: sum(x.dir == "out" for x in r) > 100)
    deadline = time.monotonic() + 5
    prev = -1
    while True:
        n = len(m.log("out"))
        if n == prev:
            break
        prev = n
        assert time.monotonic() < deadline, "flood never stops while unread"
        select.select([], [], [], 0.1)  # let it run; the loop exits when it stopped
    assert n * 80 < 1 << 20
    # Blocked in poll() (state S), not spinning, and small.
    status = open(f"/proc/{m.pid}/status").read()
    assert "State:\tS" in status, status
    rss_kb = int(status.split("VmRSS:")[1].split()[0])
    assert rss_kb < 32 * 1024
    # Reading resumes it, in sequence.
    seqs = [m.read_json()["params"]["seq"] for _ in range(n + 50)]
    assert seqs == list(range(1, n + 51))


def test_spam_writes_exact_bytes_to_stderr(spawn):
    m = spawn("--mode", "spam", "--spam-bytes", "250050")
    m.send(req(1))
    assert m.read_json()["id"] == 1  # spam is written (blocking) before the answer
    err = m.stderr()
    assert err[:100] == b"spam 00000001 " + b"x" * 85 + b"\n"
    assert err[100:200] == b"spam 00000002 " + b"x" * 85 + b"\n"
    assert err[250000:250050] == (b"spam 00002501 " + b"x" * 85 + b"\n")[:50]
    assert len(err) == 250050


BAD = {
    "nonjson": (b"this is not json\n", True),
    "truncated": (b'{"jsonrpc":"2.0","id":7,"result":{"trunc\n', True),
    "nonewline": (b'{"jsonrpc":"2.0","id":7,"result":{},"sessionId":"S"}', False),
    "binary": (b"\x00\x01\x02\x03\xff\xfe\xfd\x80\x81 binary \x00\n", True),
    "badutf8": (b'{"jsonrpc":"2.0","id":7,"result":{"text":"\xc3\x28\xa0\xa1\xff"},"sessionId":"S"}\n',
                False),
    "unknown-id": (b'{"jsonrpc":"2.0","id":"mock-unknown-id","result":{},"sessionId":"S"}\n', True),
    "unknown-session": (b'{"jsonrpc":"2.0","method":"notifications/message","params":{"level":'
                        b'"info","data":"unknown session"},"sessionId":"mock-unknown-session"}\n',
                        True),
    "unroutable": (b'{"jsonrpc":"2.0","method":"notifications/message","params":{"level":'
                   b'"info","data":"no id, no session"}}\n', True),
}


@pytest.mark.parametrize("kind", sorted(BAD))
def test_bad_output_on_first_request(spawn, kind):
    expected, answer_follows = BAD[kind]
    m = spawn("--mode", "bad", "--bad", kind)
    m.send(req(7, "a", sid="S"))
    if kind == "nonewline":
        assert m.read_to_eof() == expected
        assert m.wait() == 0
        return
    got = b""
    while len(got) < len(expected):
        got += m.read_chunk()
    assert got[: len(expected)] == expected
    m.buf = got[len(expected):] + m.buf
    if answer_follows:
        assert m.read_line() == echo_line(m.pid, "7", '"a"', sid_tok='"S"')
    m.send(req(8))  # later requests are echoed normally
    assert m.read_json()["id"] == 8


def test_bad_longline_has_exact_length(spawn):
    m = spawn("--mode", "bad", "--bad", "longline", "--bytes", "100000")
    m.send(req(7, sid="S"))
    line = m.read_line()
    assert len(line) == 100000
    msg = json.loads(line)
    assert msg["id"] == 7 and msg["sessionId"] == "S" and set(msg["result"]["pad"]) == {"x"}


def test_bad_at_start_uses_mock_bad_id(spawn):
    m = spawn("--mode", "bad", "--bad", "truncated", "--trigger", "start")
    assert m.read_line() == b'{"jsonrpc":"2.0","id":"mock-bad","result":{"trunc'
    m.send(req(1))
    assert m.read_json()["id"] == 1


# ---------------------------------------------------------------- determinism

SCRIPT = [
    req(1, sid="s"),
    req(2, mock={"delay_ms": 400}),
    req(3, mock={"notify": 2, "notify_interval_ms": 150, "delay_ms": 250}),
    notif("n"),
    req(4, mock={"big": 50, "reply_id": "r4"}),
    req(5, mock={"emit": "x\ny\n", "emit_repeat": 2}),
    req(6, mock={"request": {"method": "q"}}),
    b'{"jsonrpc":"2.0","id":"srv-1","error":{"code":1,"message":"no"}}',
    req(7, mock={"cancellable": True}),
    notif("notifications/cancelled", {"requestId": 7}),
    req(8, "mock/cancelled"),
]


def run_script(spawn, chunked):
    m = spawn(env={"STDIO_BUS_WORKER_ID": "1"})
    data = b"".join((s if isinstance(s, bytes) else json.dumps(s).encode()) + b"\n"
                    for s in SCRIPT)
    if chunked:  # odd-sized pieces, so lines arrive split across reads
        for i in range(0, len(data), 37):
            m.send_raw(data[i:i + 37])
    else:
        m.send_raw(data)
    m.close_stdin()
    out = m.read_to_eof()
    assert m.wait() == 0
    return out.replace(str(m.pid).encode(), b"0")


def test_same_input_same_output_however_chunked(spawn):
    """The same lines whatever the chunking, and in the same order wherever the
    order depends on the input alone. Where a line's time is counted from its
    request's arrival (the second progress of 3, the answers of 3 and 2), how
    it falls among the others depends on how fast the pieces arrived, which a
    busy machine decides: there only the order within one request is fixed."""
    a = run_script(spawn, chunked=False)
    b = run_script(spawn, chunked=True)
    assert sorted(a.split(b"\n")) == sorted(b.split(b"\n"))
    for out in (a, b):
        ids = [json.loads(line).get("id") for line in out.split(b"\n") if line.startswith(b"{")]
        second_progress = max(i for i, x in enumerate(ids) if x is None)
        timed = {second_progress, ids.index(3), ids.index(2)}
        assert [x for i, x in enumerate(ids) if i not in timed] == [1, None, "r4", "srv-1", 6, 8], ids
        assert second_progress < ids.index(3), ids  # 3's progress comes before its answer
        assert b"x\ny\nx\ny\n" in out
