"""Boundaries (issue 13, item 9): where a daemon that is right in general goes
wrong at the edge. Two tokens that differ in one byte or in type, bytes a
naive implementation would normalise, a slot freed and reused (a client's
slot after it left, a worker's slot after a restart), and clauses that apply
in every mode but were judged in only one (conformance/mutants/mode_coverage.py
lists them). conformance/mutants/2x-*.toml and 3x-*.toml are the broken
daemons these tests are shown to catch.

Nothing here relies on our extensions: restarts are waited for at the
daemon's own pace, workers are told apart by the mock's pid, and log lines
are not read.
"""

import json
import time

import pytest

from stdio_bus_conformance import (MALFORMED_INPUT, ConnectionClosed, DaemonTimeout, checking, field, parse_line, procinfo,
                                   wait_timeout, wait_until)
from stdio_bus_conformance import evidence, pid_of, tracked_client

MIB = 1 << 20


# -- helpers ------------------------------------------------------------------------------
def leave(daemon, client, link):
    """Closes a socket client and waits until the daemon has closed its side:
    by then the daemon has handled the disconnect (7.2)."""
    client.close()
    wait_until(lambda: link not in set(procinfo.fds(daemon.pid).values()), wait_timeout(),
               f"the daemon closing its fd for {link}")


def emit_line(text):
    """params.mock for a worker that writes `text` (raw) instead of answering."""
    return {"mock": {"emit": text}}


def note(session, marker):
    """A worker notification for `session`, carrying `marker`."""
    return json.dumps({"jsonrpc": "2.0", "method": "test/note", "sessionId": session,
                       "params": {"marker": marker}}, separators=(",", ":")) + "\n"


def starts(log):
    return len(log.select("start"))


# =========================================================================================
# Two tokens that differ in one byte or in type
# =========================================================================================
# (the request's id token, the id token of the worker's answer): a daemon
# that compares ids by value, or by their text without a string's quotes,
# delivers these answers to a client that asked for something else.
MISMATCHED = [(b"1.0", b"1"), (b"1", b"1.0"), (b'"1"', b"1"), (b"1", b'"1"'),
              (b'"\\u0061"', b'"a"')]


@pytest.mark.clause("SB-I-3", "SB-6.3.1-4")
@pytest.mark.parametrize("asked,answered", MISMATCHED,
                         ids=["1.0-then-1", "1-then-1.0", "str1-then-1", "1-then-str1", "escaped-then-a"])
def test_answer_must_carry_the_request_token_exactly(bus, asked, answered):
    bus.start(instances=1)
    c = bus.client()
    wrong = b'{"jsonrpc":"2.0","id":' + answered + b',"result":"WRONG-TOKEN"}\n'
    c.send(b'{"jsonrpc":"2.0","id":' + asked + b',"method":"test/m","params":'
           + json.dumps(emit_line(wrong.decode())).encode() + b"}\n")
    got = c.sync()  # one worker: it has written the wrong answer before the sentinel's
    assert not any(b"WRONG-TOKEN" in x for x in got), \
        f"an answer with id {answered.decode()} was delivered for a request with id {asked.decode()}"
    # the request is still pending under its own token: the right answer gets through
    right = b'{"jsonrpc":"2.0","id":' + asked + b',"result":"RIGHT-TOKEN"}\n'
    c.notify("test/answer", params=emit_line(right.decode()))
    assert c.recv_line() == right


@pytest.mark.clause("SB-I-45")
def test_ids_a_double_cannot_tell_apart_are_kept_apart(bus):
    """2^53 + 1 and 2^53 are two tokens, but a worker that keeps numbers in
    doubles (JavaScript, cJSON) reads both as 2^53 and answers the second
    with the first's id (the mock's emit plays such a worker). The daemon
    must not have both pending on one worker: the client would take the
    second's answer for the first's."""
    bus.start(instances=1)
    c = bus.client()
    first, second = 9007199254740992, 9007199254740993
    c.send_json({"jsonrpc": "2.0", "id": first, "method": "test/m",
                 "params": {"who": "first", "mock": {"delay_ms": 300}}})
    bus.worker_log().wait_received(b'"who":"first"')
    as_double = json.dumps({"jsonrpc": "2.0", "id": first, "result": {"params": {"who": "second"}}}) + "\n"
    c.send_json({"jsonrpc": "2.0", "id": second, "method": "test/m", "params": emit_line(as_double)})
    got = c.recv_response(first)
    assert field(got, "result", "params", "who") == "first", \
        "the answer to id 9007199254740993, written back as a double, was taken for id 9007199254740992's"


@pytest.mark.clause("SB-3.4-1", "SB-8.2-7", "SB-6.1.1-1")
def test_sessionids_differing_only_in_their_256th_byte_are_two_sessions(bus):
    bus.start(instances=2)
    c = bus.client()
    a, b = "S" * 255 + "a", "S" * 255 + "b"
    pa = pid_of(c.request(session=a))
    # a new session: round-robin over two workers picks the other one
    pb = pid_of(c.request(session=b))
    assert pb != pa, "a sessionId differing from another only in its 256th byte joined its session"
    for _ in range(2):
        assert pid_of(c.request(session=a)) == pa and pid_of(c.request(session=b)) == pb


@pytest.mark.clause("SB-I-37")
def test_two_spellings_of_a_sessionid_are_two_sessions(bus):
    bus.start(instances=2)
    c = bus.client()
    pa = pid_of(c.request(session="ab"))
    c.send(b'{"jsonrpc":"2.0","id":"esc","method":"test/m","sessionId":"a\\u0062"}\n')
    pb = pid_of(c.recv_response("esc"))
    assert pb != pa, '"a\\u0062" joined the session "ab": sessionIds are compared decoded'
    rec = bus.worker_log().wait_received(b'"id":"esc"')
    assert b'"sessionId":"a\\u0062"' in rec.raw


@pytest.mark.stands_on("malformed")  # a routing field of the wrong type is malformed (SB-I-2)
@pytest.mark.clause("SB-I-2", "SB-4.3-2")
@pytest.mark.parametrize("member,token", [("sessionId", b"5"), ("sessionId", b"null"),
                                          ("sessionId", b"{}"), ("id", b"true"), ("id", b"[1]")],
                         ids=["session-number", "session-null", "session-object", "id-bool", "id-array"])
def test_routing_field_of_the_wrong_type_closes_the_client(bus, member, token):
    d = bus.start(instances=1)
    c = bus.client()
    c.sync()
    since = d.stderr_mark()
    line = b'{"jsonrpc":"2.0","id":"typed","method":"test/t"}\n' if member == "sessionId" else \
        b'{"jsonrpc":"2.0","method":"test/t","sessionId":"typed"}\n'
    line = line[:-2] + b',"' + member.encode() + b'":' + token + b"}\n"
    try:
        c.send(line)
    except ConnectionClosed:
        pass
    # forwarded to a worker: the daemon took the field as valid and keeps the client
    c.expect_closed(bound=evidence.forwarded(bus.worker_log(), b"test/t", f"the line with {member}: {token.decode()}"))
    assert not any(b"test/t" in x for x in bus.worker_log().received())
    # a routing field of the wrong type cannot be extracted under every
    # reading that closes: seed 4.3 "log a warning and close" (any line
    # about that client line; its level is SB-I-34's)
    with checking("SB-4.3-2"):
        d.wait_logged([MALFORMED_INPUT], since=since, what="about the client line whose routing fields were not extracted")


@pytest.mark.clause("SB-I-2", "SB-6.2-1", "SB-6.3.1-2")
def test_id_null_is_a_request_id_like_any_other(bus):
    bus.start(instances=1)
    c = bus.client()
    c.send(b'{"jsonrpc":"2.0","id":null,"method":"test/null"}\n')
    # a sentinel behind it, to the same (only) worker: its answer coming first shows the
    # answer to id null was dropped (one worker's lines reach a client in order, as sync())
    c.send_json({"jsonrpc": "2.0", "id": "sb-after-null", "method": "sb/sync"})
    got = parse_line(c.recv_line())
    assert got.get("id", "") != "sb-after-null", \
        "no answer to the request with id null: the answer to a request sent after it came first"
    assert "id" in got and got["id"] is None and field(got, "result", "method") == "test/null"


# =========================================================================================
# Bytes a naive implementation would normalise
# =========================================================================================
@pytest.mark.clause("SB-5.1.1-3", "SB-4.2.3-3")
def test_crlf_line_endings_pass_through_both_ways(bus):
    bus.start(instances=1)
    c = bus.client()
    answer = b'{"jsonrpc":"2.0","id":"crlf","result":{"r":"\\r"}}\r\n'
    sent = (b'{"jsonrpc":"2.0","id":"crlf","method":"test/crlf","params":'
            + json.dumps(emit_line(answer.decode())).encode() + b"}\r\n")
    c.send(sent)
    assert c.recv_line() == answer, "the worker's \\r\\n line was changed on its way to the client"
    assert bus.worker_log().wait_received(b'"id":"crlf"').line == sent, \
        "the client's \\r\\n line was changed on its way to the worker"


# =========================================================================================
# A slot freed and reused
# =========================================================================================
@pytest.mark.modes("unix", "tcp")
@pytest.mark.clause("SB-7.2-1", "SB-3.4-5")
def test_every_session_of_a_departed_client_ends(bus):
    d = bus.start(instances=2)
    stay = bus.client()
    stay.request(session="stay")
    gone, link = tracked_client(bus)
    theirs = [f"theirs-{i}" for i in range(4)]
    for sid in theirs:
        gone.request(session=sid)
    leave(d, gone, link)
    newcomer = bus.client()  # may well take the departed client's slot or fd
    newcomer.sync()
    # the workers' notifications for the departed client's sessions go nowhere...
    stay.notify("test/emit", session="stay",
                params=emit_line("".join(note(sid, "ORPHANED") for sid in theirs)))
    assert not any(b"ORPHANED" in x for x in stay.sync(session="stay"))
    assert not any(b"ORPHANED" in x for x in newcomer.sync() + newcomer.received), \
        "a notification for a departed client's session reached a newcomer"
    # ...and every one of its sessionIds is free for another client
    for sid in theirs:
        assert stay.request(session=sid)["sessionId"] == sid, \
            f"session {sid} outlived the client that owned it"


@pytest.mark.modes("unix", "tcp")
@pytest.mark.clause("SB-7.2-2", "SB-I-23")
def test_every_request_of_a_departed_client_is_discarded(bus):
    d = bus.start(instances=1)
    log = bus.worker_log()
    gone, link = tracked_client(bus)
    ids = [f"late-{i}" for i in range(4)]
    for i in ids:
        gone.send_json({"jsonrpc": "2.0", "id": i, "method": "test/slow",
                        "params": {"mock": {"no_reply": True}}})
    for i in ids:
        log.wait_received(f'"{i}"'.encode())
    leave(d, gone, link)
    newcomer = bus.client()  # may well take the departed client's slot or fd
    newcomer.sync()
    # now the worker answers every request of the departed client
    newcomer.notify("test/emit", params=emit_line("".join(
        json.dumps({"jsonrpc": "2.0", "id": i, "result": {"marker": "LATE"}}) + "\n" for i in ids)))
    assert not any(b"LATE" in x for x in newcomer.sync() + newcomer.received), \
        "an answer for a departed client reached a newcomer"


def restart_worker(bus, client, old_pid):
    """Has the one worker exit at once and waits until its successor has
    started (the daemon's own restart delay)."""
    log = bus.worker_log()
    n = starts(log)
    client.notify("test/exit", params={"mock": {"exit": 0}})
    log.wait_count(lambda r: r.kind == "start", n + 1, (wait_timeout() + 3), "'start' (the worker restarted)")
    new = [p for p in log.pids() if p != old_pid]
    assert new, "no new worker process"
    return new[-1]


@pytest.mark.stands_on("restart-exit0")  # restart_worker(): the worker exits with status 0
@pytest.mark.clause("SB-7.1.2-4", "SB-7.1.3-1")
def test_restarted_worker_answers_ids_its_predecessor_left_pending(bus):
    bus.start(instances=1)
    c = bus.client()
    log = bus.worker_log()
    old = log.pids()[0]
    for i in (7, 8, 9):
        c.send_json({"jsonrpc": "2.0", "id": i, "method": "test/never",
                     "params": {"mock": {"no_reply": True}}})
    log.wait_count(lambda r: r.kind == "in" and b"test/never" in r.raw, 3, wait_timeout(), "the three requests")
    new = restart_worker(bus, c, old)
    # the predecessor's requests were discarded with it: the same ids are new requests
    for i in (7, 8, 9):
        assert pid_of(c.request(id=i, timeout=wait_timeout())) == new


@pytest.mark.modes("unix", "tcp")
@pytest.mark.stands_on("restart-exit0")
@pytest.mark.clause("SB-7.1.2-4", "SB-I-23")
def test_restarted_worker_holds_no_request_of_a_departed_client(bus):
    d = bus.start(instances=1)
    log = bus.worker_log()
    old = log.pids()[0]
    gone, link = tracked_client(bus)
    for i in ("gone-1", "gone-2"):
        gone.send_json({"jsonrpc": "2.0", "id": i, "method": "test/never",
                        "params": {"mock": {"no_reply": True}}})
        log.wait_received(f'"{i}"'.encode())
    leave(d, gone, link)
    c = bus.client()
    new = restart_worker(bus, c, old)
    for i in ("gone-1", "gone-2"):
        assert pid_of(c.request(id=i, timeout=wait_timeout())) == new


# =========================================================================================
# Clauses judged in one mode only before (mode_coverage.py)
# =========================================================================================
@pytest.mark.modes("unix", "tcp")  # stdio: test_failure.py
@pytest.mark.clause("SB-5.3-4", "SB-5.3-3")
def test_malformed_output_gets_the_worker_restarted(bus):
    # --on-eof stay: a mock that left at the end of its stdin would not log the SIGTERM
    bus.start(pools=[bus.pool("p", 1, args=["--on-eof", "stay"])])
    c = bus.client()
    log = bus.worker_log()
    old = log.pids()[0]
    c.notify("test/emit", params=emit_line("BROKEN not json\n"))
    log.wait_for(lambda r: r.kind == "signal" and r.pid == old, wait_timeout(), "SIGTERM to the worker")
    new = wait_until(lambda: [p for p in log.pids() if p != old], (wait_timeout() + 3),
                     "a new worker process (the restart)")[-1]
    assert pid_of(c.request(timeout=wait_timeout())) == new


@pytest.mark.stands_on("full-pipe")  # it writes to a worker faster than the worker reads
@pytest.mark.clause("SB-7.3.1-3")
def test_client_paused_for_a_busy_worker_resumes_when_it_reads_again(bus):
    cap = 64 * 1024
    # the worker sleeps (reads nothing) for a second before each answer
    bus.start({"limits": {"max_output_queue": cap}},
              pools=[bus.pool("p", 1, args=["--sleep-ms", "1000"])])
    c = bus.client()
    log = bus.worker_log()
    c.send_json({"jsonrpc": "2.0", "id": "busy", "method": "test/busy"})
    log.wait_received(b'"busy"')
    line = json.dumps({"jsonrpc": "2.0", "method": "test/fill",
                       "params": {"pad": "x" * 16000}}).encode() + b"\n"
    count = (2 * MIB) // len(line)  # far more than the cap and the pipes: we get paused
    c.send(line * count, timeout=1 + 2 * wait_timeout())  # returns once the daemon reads us again
    assert field(c.recv_response("busy"), "result", "method") == "test/busy"
    log.wait_count(lambda r: r.kind == "in" and b"test/fill" in r.raw, count, 2 * wait_timeout(),
                   f"the {count} lines sent while the worker was busy")


@pytest.mark.stands_on("full-pipe")  # it writes to a worker faster than the worker reads
@pytest.mark.clause("SB-8.1-2")
def test_default_max_output_queue_holds_four_mebibytes_for_a_worker(bus):
    # the worker reads one message and no more; no max_output_queue configured
    bus.start(pools=[bus.pool("p", 1, args=["--stall", "read", "--stall-after", "1"])])
    c = bus.client()
    c.request(session="s")
    line = json.dumps({"jsonrpc": "2.0", "method": "test/fill", "sessionId": "s",
                       "params": {"pad": "x" * 16000}}).encode() + b"\n"
    sent = 0
    with pytest.raises(DaemonTimeout):
        while sent < 64 * MIB:
            c.send(line, timeout=1.0)  # the daemon stops reading us: no more progress
            sent += len(line)
    assert sent >= 4 * MIB, f"the daemon stopped reading after {sent} bytes, before 4 MiB were queued"
    if bus.mode != "tcp":  # TCP buffers are too elastic for an upper bound
        assert sent < 5 * MIB, f"the daemon read {sent} bytes for a worker that reads nothing"


@pytest.mark.long_wait  # 60 s: it starts first, its wait overlapping the rest
@pytest.mark.timeout(150)
@pytest.mark.modes("stdio")  # a worker's queue: one transport is enough for the one minute it takes
@pytest.mark.stands_on("full-pipe")  # it writes to a worker faster than the worker reads
@pytest.mark.clause("SB-8.1-6")
def test_default_backpressure_timeout_is_60_seconds_for_a_worker(bus):
    # no backpressure_timeout_sec configured; the worker reads one message and no more
    bus.start({"limits": {"max_output_queue": 64 * 1024}},
              pools=[bus.pool("p", 1, args=["--stall", "read", "--stall-after", "1", "--on-eof", "stay"])])
    c = bus.client()
    log = bus.worker_log()
    pid = log.pids()[0]
    c.request(session="s")
    line = json.dumps({"jsonrpc": "2.0", "method": "test/fill", "sessionId": "s",
                       "params": {"pad": "x" * 16000}}).encode() + b"\n"
    sent, first = 0, time.monotonic_ns()
    with pytest.raises(DaemonTimeout):  # until the daemon stops reading us
        while sent < 64 * MIB:
            tried = time.monotonic_ns()
            c.send(line, timeout=1.0)
            sent += len(line)
    # the queue went over its cap after `first` and before `tried` (the daemon had
    # stopped reading us by then; socket buffers make the moment in between unknown)
    term = log.wait_for(lambda r: r.kind == "signal" and r.pid == pid, 60 + 2 * wait_timeout(),
                        "SIGTERM to the worker whose stdin stayed full")
    assert (term.t_ns - first) / 1e9 >= 59, \
        f"the worker was terminated {(term.t_ns - first) / 1e9:.1f} s after the flood began"
    assert (term.t_ns - tried) / 1e9 <= 60 + 3, \
        f"the worker was terminated {(term.t_ns - tried) / 1e9:.1f} s after the daemon stopped reading"
