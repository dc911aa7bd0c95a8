"""What the daemon does with hostile or unusual peers and signals (issue 14):
signals other than SIGTERM/SIGINT (SB-I-48), a socket path another daemon
took over (SB-I-22), a client that half-closes (SB-I-41), a worker that
closes its stdout and keeps running (SB-I-46), requests left behind by
clients that disconnected (SB-I-47)."""

import json
import os
import re
import signal
import sys
import textwrap
import time

import pytest

from stdio_bus_conformance import DaemonTimeout, evidence, pace, procinfo, restart_wait, wait_timeout, wait_until


# -- SB-I-48 signals that do not stop the daemon, and SIGQUIT -----------------------------
@pytest.mark.clause("SB-I-48")
@pytest.mark.parametrize("signo", [signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2],
                         ids=["SIGHUP", "SIGUSR1", "SIGUSR2"])
def test_hup_and_usr_signals_change_nothing(bus, signo):
    d = bus.start(pools=[bus.pool("p", 2, args=["--on-eof", "stay"])])
    c = bus.client()
    first = c.request(session="kept")["result"]["pid"]
    d.signal(signo)
    # The signal is delivered before the daemon can read anything more: an
    # answer now proves it survived, the same worker proves the session did.
    assert c.request(session="kept")["result"]["pid"] == first
    d.signal(signo)
    assert c.request(session="kept")["result"]["pid"] == first
    assert d.running
    assert bus.worker_log().select("signal") == [], "a worker was signalled"


@pytest.mark.clause("SB-I-48", "SB-10.2-2", "SB-10.2-6")
def test_sigquit_is_a_graceful_shutdown(bus):
    d = bus.start(pools=[bus.pool("p", 2, args=["--on-eof", "stay"])])
    bus.client().request()
    pids = bus.worker_pids()
    d.signal(signal.SIGQUIT)
    # a daemon that ignores SIGQUIT (SIG_IGN) never sees it: no exit can come
    assert d.wait_exit(bound=evidence.signal_ignored(d, signal.SIGQUIT)) == 0, \
        "SIGQUIT did not end the daemon like SIGTERM"
    got = {r.pid: r.raw for r in bus.worker_log().select("signal") if r.pid in pids}
    assert sorted(got) == sorted(pids) and set(got.values()) == {b"TERM"}, \
        f"workers that logged a signal: {got} of {pids}"
    assert [p for p in pids if procinfo.exists(p)] == [], "a worker outlived the daemon"
    if d.mode == "unix":
        assert not os.path.lexists(d.socket_path), "the socket file is left behind"


# -- SB-I-22 the socket file is removed only while it is still the daemon's own --------
@pytest.mark.modes("unix")
@pytest.mark.clause("SB-I-22")
def test_socket_path_taken_over_by_another_daemon_is_left_to_it(bus):
    first = bus.start(pools=[bus.pool("first", 1)])
    os.unlink(first.socket_path)  # someone removed the file...
    second = bus.start(pools=[bus.pool("second", 1)])  # ...and another daemon took the path
    assert first.socket_path == second.socket_path
    first.signal(signal.SIGTERM)
    assert first.wait_exit() == 0
    assert os.path.lexists(second.socket_path), \
        "the daemon that exited removed the socket file of the daemon now on that path"
    # the second daemon's worker answers (its pool's own log has its pid)
    assert bus.client().request()["result"]["pid"] in bus.worker_log("second").pids()
    second.signal(signal.SIGTERM)
    assert second.wait_exit() == 0
    assert not os.path.lexists(second.socket_path), "the socket file is left behind"


# -- SB-I-41 a client that half-closes gets its answers -----------------------------------
def slow(id, ms, session=None, **mock):
    msg = {"jsonrpc": "2.0", "id": id, "method": "slow",
           "params": {"mock": {"delay_ms": ms, **mock}}}
    if session is not None:
        msg["sessionId"] = session
    return msg


@pytest.mark.modes("unix", "tcp")
@pytest.mark.clause("SB-I-41", "SB-7.2-1")
def test_half_closed_client_gets_its_answers_then_is_closed(bus):
    bus.start(instances=1)
    a = bus.client()
    a.request(session="s")
    a.send_json(slow("late-1", 300, "s", notify=1))
    a.send_json(slow("late-2", 400))
    bus.worker_log().wait_received(b'"id":"late-2"')
    a.close_write()  # as `nc -N` does after its last request
    assert a.recv_response("late-1")["sessionId"] == "s"
    assert a.recv_response("late-2")["id"] == "late-2"
    rest = a.expect_closed()  # nothing more is owed: the daemon closes
    assert not any(b'"id"' in line for line in rest), f"unexpected after the answers: {rest}"
    # closed as in 7.2: its session is free for another client now
    b = bus.client()
    assert b.request(session="s", params={"mock": {"notify": 1}})["sessionId"] == "s"


@pytest.mark.modes("unix", "tcp")
@pytest.mark.clause("SB-I-41")
def test_half_closed_client_with_nothing_pending_is_closed_at_once(bus):
    bus.start(instances=1)
    a = bus.client()
    a.request(session="s")
    a.close_write()
    assert a.expect_closed() == []


@pytest.mark.modes("unix", "tcp")
@pytest.mark.clause("SB-I-41")
def test_half_closed_client_waits_at_most_drain_timeout(bus):
    bus.start({"limits": {"drain_timeout_sec": 1}}, instances=1)
    a = bus.client()
    a.send_json(slow("never", 0, no_reply=True))
    bus.worker_log().wait_received(b'"id":"never"')
    a.close_write()
    a.expect_closed(timeout=1 + wait_timeout())  # after drain_timeout_sec (1 s), not never
    assert bus.client().request()["id"]  # and the daemon serves on


@pytest.mark.modes("unix")  # in TCP a close after a half-close shows only when a write fails
@pytest.mark.clause("SB-I-41", "SB-7.2-1")
def test_half_closed_client_that_hangs_up_is_gone_at_once(bus):
    bus.start({"limits": {"drain_timeout_sec": 30}}, instances=1)
    a = bus.client()
    a.request(session="s")
    a.send_json(slow("never", 0, "s", no_reply=True))
    bus.worker_log().wait_received(b'"id":"never"')
    a.close_write()
    a.close()
    # Its session is freed long before drain_timeout_sec: another client
    # can take it (until then its messages are discarded, SB-I-4).
    b = bus.client()
    deadline = time.monotonic() + wait_timeout()
    while True:
        try:
            assert b.request(session="s", timeout=pace().bound("answer", 0.3))["sessionId"] == "s"
            break
        except DaemonTimeout:
            assert time.monotonic() < deadline, "the session of a client that hung up was kept"


# -- SB-I-46 a worker that closes its stdout and keeps running ---------------------------
STDOUT_CLOSER = textwrap.dedent(r'''
    import json, os, signal, sys, time
    LOG = sys.argv[1]
    def rec(kind, raw=b""):
        with open(LOG, "ab") as f:
            f.write(b"%d %d - %s %s\n" % (time.monotonic_ns(), os.getpid(), kind.encode(), raw))
    def on_term(signo, frame):
        rec("signal", b"TERM")
        rec("exit", b"0")
        os._exit(0)
    signal.signal(signal.SIGTERM, on_term)
    rec("start", b"stdout-closer")
    stdout_open = True
    buf = b""
    while True:
        chunk = os.read(0, 65536)
        if not chunk:
            while True:  # keeps running with its stdin closed too
                signal.pause()
        buf += chunk
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            rec("in", line)
            msg = json.loads(line)
            if "id" not in msg or not stdout_open:
                continue  # swallowed: nowhere to answer
            out = {"jsonrpc": "2.0", "id": msg["id"], "result": {"pid": os.getpid()}}
            if "sessionId" in msg:
                out["sessionId"] = msg["sessionId"]
            os.write(1, json.dumps(out).encode() + b"\n")
            if msg.get("method") == "close-stdout":
                os.close(1)
                stdout_open = False
''')


def error_lines(d, *names):
    rx = re.compile(r"\bERROR\b")  # SB-I-34
    return [line for line in d.stderr_lines()
            if rx.search(line) and any(str(n) in line for n in names)]


@pytest.mark.modes("stdio")  # what the worker does involves no client transport
@pytest.mark.clause("SB-I-46")
def test_worker_that_closes_its_stdout_is_failed_and_restarted(bus):
    script = bus.workdir / "stdout_closer.py"
    script.write_text(STDOUT_CLOSER)
    d = bus.start(pools=[{"id": "closer", "command": sys.executable,
                          "args": [str(script), str(bus.workdir / "closer.log")], "instances": 1}],
                  wait_workers=False)
    log = bus.worker_log("closer")
    first = log.wait_for(lambda r: r.kind == "start", wait_timeout(), "'start' of the script worker")
    c = bus.client()
    assert c.request(session="s")["result"]["pid"] == first.pid
    assert c.request("close-stdout", session="s")["result"]["pid"] == first.pid
    # It can no longer answer anything: the daemon must not leave it RUNNING.
    wait_until(lambda: error_lines(d, first.pid, "closer"), wait_timeout(),
               "an error logged for a worker that closed its stdout",
               check=evidence.worker_replaced(log, first.pid, "the failure of the worker that closed its stdout"))
    log.wait_for(lambda r: r.kind == "signal" and r.pid == first.pid, wait_timeout(), "SIGTERM to that worker")
    # restart delay: the spec gives no number (the daemon's own, measured by the preflight)
    second = log.wait_for(lambda r: r.kind == "start" and r.pid != first.pid, restart_wait(),
                          "the worker restarted")
    # its sessions were invalidated: "s" starts again on the new worker
    deadline = time.monotonic() + wait_timeout()
    while True:
        try:
            assert c.request(session="s", timeout=pace().bound("answer", 0.5))["result"]["pid"] == second.pid
            break
        except DaemonTimeout:  # sent before the new worker was RUNNING: discarded (SB-I-12)
            assert time.monotonic() < deadline, "the restarted worker never answered"


# -- SB-I-47 requests left behind by a client that disconnected ---------------------------
MAX_PENDING = 4096
POLL = 0.005


def _links(pid):
    return {v for v in procinfo.fds(pid).values() if v.startswith("socket:")}


def _leave(bus, client_factory):
    """A client that is served once, then closes; returns once the daemon
    has closed its side (its fd is gone from /proc/<daemon>/fd)."""
    d = bus.daemon
    before = _links(d.pid)
    c = client_factory()
    c.sync()
    deadline = time.monotonic() + 5
    while len(_links(d.pid) - before) != 1:
        assert time.monotonic() < deadline, "no new socket in the daemon's /proc/<pid>/fd"
        time.sleep(POLL)
    link = next(iter(_links(d.pid) - before))
    return c, link


def _wait_gone(d, link):
    deadline = time.monotonic() + 5
    while link in set(procinfo.fds(d.pid).values()):
        assert time.monotonic() < deadline, "the daemon kept the departed client's fd"
        time.sleep(POLL)


def _pipelined_unanswered(c, prefix, n):
    c.send(b"".join(json.dumps({"jsonrpc": "2.0", "id": f"{prefix}-{i}", "method": "test/p",
                                "params": {"mock": {"no_reply": True}}}).encode() + b"\n"
                    for i in range(n)))


def _orphans_fill_the_table(bus):
    """Fills the pending table with requests the worker does not answer:
    half from two clients that then disconnect, half from two that stay, a
    quarter each (a daemon may cap one client's share, SB-I-51, and what
    departed clients leave, SB-I-53). Returns another client and the two
    that stay."""
    d = bus.daemon
    quarter = MAX_PENDING // 4
    for k in range(2):
        a, link = _leave(bus, bus.client)
        _pipelined_unanswered(a, f"pend-{k}", quarter)
        bus.worker_log().wait_count(lambda r: r.kind == "in" and f'"pend-{k}-'.encode() in r.raw,
                                    quarter, 10, f"requests received by the worker ({quarter} sent)")
        a.close()
        _wait_gone(d, link)
    stay = [bus.client(), bus.client()]
    for k, c in enumerate(stay):
        _pipelined_unanswered(c, f"live-{k}", quarter)
    bus.worker_log().wait_count(lambda r: r.kind == "in" and b'"live-' in r.raw, 2 * quarter, 10,
                                f"requests received by the worker ({2 * quarter} sent)")
    return bus.client(), stay


def _not_forwarded(bus, c, req_id):
    """Sends a request and proves it never reached the worker: a
    notification sent after it, from another client (a daemon may hold c's
    later input with the request, SB-I-54), arrives; the request does not."""
    log = bus.worker_log()
    c.send_json({"jsonrpc": "2.0", "id": req_id, "method": "test/p"})
    bus.client().notify("test/marker", params={"after": f"marker-{req_id}"})
    log.wait_received(f'"marker-{req_id}"'.encode())
    return not any(f'"{req_id}"'.encode() in x for x in log.received())


def _served_again(c, deadline=None):
    """Retries a request until the table has room again; returns its answer."""
    end = time.monotonic() + (wait_timeout() if deadline is None else deadline)
    while True:
        try:
            return c.request(timeout=pace().bound("answer", 0.5))
        except DaemonTimeout:  # discarded while the table was still full (SB-I-18)
            assert time.monotonic() < end, "the pending table never had room again"


@pytest.mark.modes("unix", "tcp")
@pytest.mark.clause("SB-I-47", "SB-I-23")
def test_requests_of_a_departed_client_count_until_the_worker_answers_them(bus):
    bus.start(instances=1)
    b, stay = _orphans_fill_the_table(bus)
    assert _not_forwarded(bus, b, "b-over"), \
        "a request went through while the table was full, half of it of departed clients' requests"
    # the worker answers them now: the answers reach no one, and the table has room again
    emit = "".join(json.dumps({"jsonrpc": "2.0", "id": f"pend-{k}-{i}", "result": "late"}) + "\n"
                   for k in range(2) for i in range(MAX_PENDING // 4))
    stay[0].notify("test/answer", params={"mock": {"emit": emit}})  # b's input may be held (SB-I-54)
    assert _served_again(b)["result"]["method"] == "echo"
    late = [x for x in b.received + b.pending_lines() if b'"late"' in x]
    assert late == [], f"answers for the departed client reached another one: {late[:3]}"


@pytest.mark.modes("unix", "tcp")
@pytest.mark.stands_on("restart-exit0")  # the one worker exits 0; the table has room once it is back
@pytest.mark.clause("SB-I-47", "SB-I-8")
def test_requests_of_a_departed_client_count_until_the_worker_exits(bus):
    bus.start(instances=1)  # the restart after the exit comes at the daemon's own pace
    b, stay = _orphans_fill_the_table(bus)
    assert _not_forwarded(bus, b, "b-over")
    stay[0].notify("test/exit", params={"mock": {"exit": 0}})  # b's input may be held (SB-I-54)
    # one wait plus a restart delay (the spec gives no number)
    assert _served_again(b, deadline=wait_timeout() + 3.0)["result"]["method"] == "echo"


@pytest.mark.modes("unix", "tcp")
@pytest.mark.clause("SB-I-25")
def test_a_connection_that_ends_mid_line_has_its_last_bytes_discarded_with_a_warning(bus):
    d = bus.start(instances=1)
    control = d.stderr_mark()
    clean = bus.client()  # what a connection that ends after a whole line makes the daemon write
    clean.sync()
    clean.close()
    watcher = bus.client()
    watcher.sync()
    since = d.stderr_mark()
    cut = bus.client()
    cut.send(b'{"jsonrpc":"2.0","id":"cut-short","method":"echo"')  # no newline: the line never ends
    cut.close()
    # the warning, in any words: naming the bytes, or a line of a shape the clean end did not write
    d.wait_caused(control, since, ["cut-short", "partial", "unterminated", "incomplete", "newline", "trailing"],
                  what="a warning about the unterminated bytes the connection left")
    watcher.sync()
    assert not [r for r in bus.worker_log().select("in") if b"cut-short" in r.raw], \
        "the unterminated bytes were forwarded as a line"
