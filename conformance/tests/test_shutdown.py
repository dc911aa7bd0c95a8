"""Graceful shutdown (spec 10, SB-3.1-6, SB-I-21) and the end of stdio mode
(SB-I-5): what the daemon does between the signal and its exit, seen from
its clients, its workers' logs and /proc."""

import errno
import os
import signal
import socket
import subprocess
import time

import pytest

from stdio_bus_conformance import ConnectionClosed, check, pace, procinfo
from stdio_bus_conformance.daemon import config as cfg


# -- local helpers -------------------------------------------------------------------
def connect_fails(d):
    """True when a new connection to the daemon's address is refused."""
    family = socket.AF_UNIX if d.mode == "unix" else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.settimeout(2)
        try:
            s.connect(d.address)
        except (ConnectionRefusedError, FileNotFoundError):
            return True
        except OSError as exc:
            return exc.errno in (errno.ECONNREFUSED, errno.ENOENT)
    return False


def signal_records(log, pids):
    return {r.pid: r.raw for r in log.select("signal") if r.pid in pids}


def assert_workers_gone(pids):
    alive = [p for p in pids if procinfo.exists(p)]
    assert alive == [], f"worker(s) {alive} outlived the daemon"


# -- 10.1 triggers, 10.2 sequence ---------------------------------------------------------
@pytest.mark.clause("SB-10.2-2", "SB-10.2-6", "SB-3.1-6")
@pytest.mark.parametrize("signo", [
    pytest.param(signal.SIGTERM, marks=pytest.mark.clause("SB-10.1-1"), id="SIGTERM"),
    pytest.param(signal.SIGINT, marks=pytest.mark.clause("SB-10.1-2"), id="SIGINT"),
])
def test_signal_stops_every_worker_and_exits_0(bus, signo):
    # workers that stay at end of stdin: only the signal makes them exit
    d = bus.start(pools=[bus.pool("p", 3, args=["--on-eof", "stay"])])
    bus.client().request()
    pids = bus.worker_pids()
    d.signal(signo)
    rc = d.wait_exit()
    check("SB-10.2-6", rc == 0, f"exit status {rc}, not 0")
    log = bus.worker_log()
    got = signal_records(log, pids)
    assert sorted(got) == sorted(pids), f"workers that logged a signal: {sorted(got)} of {sorted(pids)}"
    assert set(got.values()) == {b"TERM"}, f"signals the workers got: {got}"
    assert_workers_gone(pids)


@pytest.mark.modes("unix", "tcp")
@pytest.mark.clause("SB-10.2-1", "SB-I-22", "SB-I-21")
def test_listener_is_closed_before_workers_are_signalled(bus):
    # workers that take a while to exit keep the daemon in its drain
    d = bus.start(pools=[bus.pool("p", 2, args=["--term-delay-ms", "500", "--on-eof", "stay"])])
    bus.client().request()
    d.signal(signal.SIGTERM)
    bus.worker_log().wait_for(lambda r: r.kind == "signal", what="SIGTERM of a worker")
    assert connect_fails(d), "a new client could still connect after the workers were told to stop"
    assert d.running, "the daemon exited before its workers: this test proves nothing"
    if d.mode == "unix":
        check("SB-I-22", not os.path.lexists(d.socket_path), "the socket file is still there during the drain")
    assert d.wait_exit() == 0


@pytest.mark.clause("SB-10.2-3", "SB-10.2-6")
def test_drain_ends_as_soon_as_the_workers_have_exited(bus):
    d = bus.start({"limits": {"drain_timeout_sec": 4}},
                  pools=[bus.pool("p", 2, args=["--term-delay-ms", "300", "--on-eof", "stay"])])
    bus.client().request()
    pids = bus.worker_pids()
    t0 = time.monotonic()
    d.signal(signal.SIGTERM)
    rc = d.wait_exit()
    check("SB-10.2-6", rc == 0, f"exit status {rc}, not 0")
    took = time.monotonic() - t0
    exits = [r for r in bus.worker_log().select("exit") if r.pid in pids]
    assert len(exits) == 2, "a worker was killed instead of being let exit in its own time"
    assert took >= 0.25, f"the daemon exited {took:.2f} s after the signal, before its workers could"
    assert took < 0.3 + pace().bound("exit", 2.2), f"the daemon exited {took:.2f} s after the signal; its workers were gone after 0.3 s"
    assert_workers_gone(pids)


@pytest.mark.clause("SB-10.2-4", "SB-10.2-3", "SB-10.2-6", "SB-9.2-5")
def test_workers_still_running_after_drain_timeout_are_killed(bus):
    stubborn = bus.pool("p", 2, args=["--ignore-sigterm", "--on-eof", "stay"])
    d = bus.start({"limits": {"drain_timeout_sec": 1}}, pools=[stubborn])
    bus.client().request()
    pids = bus.worker_pids()
    t0 = time.monotonic()
    d.signal(signal.SIGTERM)
    rc = d.wait_exit(1 + pace().bound("exit", 5))
    check("SB-10.2-6", rc == 0, f"exit status {rc}, not 0")
    took = time.monotonic() - t0
    assert took >= 0.9, f"the daemon did not wait drain_timeout_sec (1 s): it exited after {took:.2f} s"
    assert took < 1 + pace().bound("exit", 1.5), f"the daemon took {took:.2f} s with drain_timeout_sec 1"
    assert len(signal_records(bus.worker_log(), pids)) == 2, "SIGTERM was not sent to every worker first"
    assert_workers_gone(pids)
    assert [r for r in bus.worker_log().select("exit") if r.pid in pids] == [], \
        "a worker that ignores SIGTERM exited by itself: it should have been killed"


# -- SB-I-21 what happens during the drain -------------------------------------------------------
@pytest.mark.clause("SB-I-21", "SB-10.2-2")
def test_answers_in_flight_are_delivered_during_the_drain(bus):
    # a worker that ignores SIGTERM but finishes its work and exits at end of
    # stdin: the daemon must close its stdin and keep forwarding its output
    # (a worker that exits by itself logs its exit; one killed at the end of
    # the drain cannot: no timing involved, and a daemon that keeps the
    # stdin open costs one short drain)
    patient = bus.pool("p", 1, args=["--ignore-sigterm"])
    d = bus.start({"limits": {"drain_timeout_sec": 2}}, pools=[patient])
    c = bus.client()
    c.send_json({"jsonrpc": "2.0", "id": "inflight", "method": "slow", "sessionId": "s",
                 "params": {"mock": {"delay_ms": 300}}})
    bus.worker_log().wait_received(b'"inflight"')
    d.signal(signal.SIGTERM)
    assert c.recv_response("inflight")["sessionId"] == "s"
    assert d.wait_exit() == 0
    log = bus.worker_log()
    assert log.select("exit") != [], \
        "the worker was not let go at end of stdin: its stdin stayed open until it was killed"
    # it ignores SIGTERM, but logs it: the daemon sent it (seed 10.2 step 2)
    # besides closing its stdin
    got = {r.raw for r in log.select("signal")}
    check("SB-10.2-2", b"TERM" in got, f"the worker got no SIGTERM during the shutdown (signals: {sorted(got)})")


@pytest.mark.clause("SB-I-21")
def test_second_signal_changes_nothing(bus):
    patient = bus.pool("p", 1, args=["--ignore-sigterm"])
    d = bus.start({"limits": {"drain_timeout_sec": 4}}, pools=[patient])
    c = bus.client()
    c.send_json({"jsonrpc": "2.0", "id": "inflight", "method": "slow",
                 "params": {"mock": {"delay_ms": 300}}})
    log = bus.worker_log()
    log.wait_received(b'"inflight"')
    d.signal(signal.SIGTERM)
    log.wait_for(lambda r: r.kind == "signal", what="SIGTERM of the worker")
    d.signal(signal.SIGINT)
    d.signal(signal.SIGTERM)
    c.recv_response("inflight")
    assert d.wait_exit() == 0
    assert log.select("exit") != [], "the second signal got the worker killed"


@pytest.mark.requires("restart_backoff")
@pytest.mark.clause("SB-I-21", "SB-7.1.3-1")
def test_no_worker_is_restarted_during_shutdown(bus):
    quick = bus.pool("p", 2)
    slow = bus.pool("q", 1, args=["--term-delay-ms", "300", "--on-eof", "stay"])
    d = bus.start({"limits": {"restart_backoff_ms": 1}}, pools=[quick, slow])
    bus.client().request()
    d.signal(signal.SIGTERM)
    assert d.wait_exit() == 0
    # pool p's workers exited at once; the drain lasted 300 ms more
    assert len(bus.worker_pids("p")) == 2, "a worker was restarted during the shutdown"
    assert len(bus.worker_pids("q")) == 1


@pytest.mark.clause("SB-I-21", "SB-B-3")
def test_clients_are_not_read_after_the_signal(bus):
    slow = bus.pool("p", 1, args=["--term-delay-ms", "300", "--on-eof", "stay"])
    d = bus.start(pools=[slow])
    c = bus.client()
    c.request()
    d.signal(signal.SIGTERM)
    log = bus.worker_log()
    log.wait_for(lambda r: r.kind == "signal", what="SIGTERM of the worker")
    try:
        c.send_json({"jsonrpc": "2.0", "id": "too-late", "method": "echo"})
    except ConnectionClosed:
        pass  # closing the client at once is fine too
    assert d.wait_exit() == 0
    assert not any(b"too-late" in line for line in log.received()), \
        "a message sent after the signal reached a worker that was being stopped"


# -- SB-I-5 end of stdio mode ---------------------------------------------------------------
@pytest.mark.modes("stdio")
@pytest.mark.clause("SB-I-5", "SB-10.2-6")
def test_stdin_eof_delivers_answers_in_flight_then_exits_0(bus):
    d = bus.start({"limits": {"drain_timeout_sec": 4}}, instances=2)
    c = bus.client()
    c.send_json({"jsonrpc": "2.0", "id": "a", "method": "slow", "params": {"mock": {"delay_ms": 300}}})
    c.send_json({"jsonrpc": "2.0", "id": "b", "method": "slow", "sessionId": "s",
                 "params": {"mock": {"delay_ms": 200}}})
    c.close()  # EOF right behind the requests
    assert c.recv_response("b")["sessionId"] == "s"
    c.recv_response("a")
    rc = d.wait_exit()
    check("SB-10.2-6", rc == 0, f"exit status {rc}, not 0")
    assert_workers_gone(bus.worker_pids())


@pytest.mark.modes("stdio")
@pytest.mark.clause("SB-I-5", "SB-10.2-3")
def test_stdin_eof_with_nothing_in_flight_exits_at_once(bus):
    # workers that stay at end of their stdin: they leave only when the
    # daemon stops them (SIGTERM, 10.2), not because the daemon went away
    d = bus.start({"limits": {"drain_timeout_sec": 5}}, pools=[bus.pool("p", 2, args=["--on-eof", "stay"])])
    c = bus.client()
    c.request()
    pids = bus.worker_pids()
    t0 = time.monotonic()
    c.close()
    assert d.wait_exit() == 0
    took = time.monotonic() - t0
    # whatever ends stdio mode, the daemon's exit is 10.2's last step: it
    # waited for its workers to exit (and killed those left at the drain's end)
    alive = [p for p in pids if procinfo.exists(p) and procinfo.state(p) != "Z"]
    check("SB-10.2-3", alive == [], f"the daemon exited while its worker(s) {alive} still ran: "
                                    "it did not wait for them to exit")
    assert took < pace().bound("exit", 2.5), f"the daemon lingered {took:.2f} s with nothing in flight"


@pytest.mark.modes("stdio")
@pytest.mark.clause("SB-I-5")
def test_stdin_eof_waits_at_most_drain_timeout_for_unanswered_requests(bus):
    d = bus.start({"limits": {"drain_timeout_sec": 1}}, instances=1)
    c = bus.client()
    c.send_json({"jsonrpc": "2.0", "id": "never", "method": "x", "params": {"mock": {"no_reply": True}}})
    bus.worker_log().wait_received(b'"never"')
    t0 = time.monotonic()
    c.close()
    assert d.wait_exit(1 + pace().bound("exit", 5)) == 0
    took = time.monotonic() - t0
    assert took < 1 + pace().bound("exit", 3), f"the daemon waited {took:.2f} s for an answer; drain_timeout_sec is 1"


@pytest.mark.modes("stdio")
@pytest.mark.clause("SB-I-5")
def test_closed_stdout_ends_stdio_mode(bus):
    path = cfg.write_config(bus.workdir / "config.json", bus.config(instances=1))
    argv = bus.profile.argv("stdio", daemon=bus.ctx.daemon, config=path, socket="", host="", port="")
    bus.recorder.note("run (stdout closed at once): " + " ".join(argv))
    p = subprocess.Popen(argv, cwd=bus.workdir, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, start_new_session=True)
    try:
        p.stdout.close()  # nobody will ever read what the daemon writes
        try:
            p.stdin.write(b'{"jsonrpc":"2.0","id":1,"method":"echo"}\n')
            p.stdin.flush()
        except BrokenPipeError:
            pass  # the daemon already stopped reading: fine
        try:
            rc = p.wait(5)
        except subprocess.TimeoutExpired:
            raise AssertionError("the daemon kept running with its stdout closed") from None
        err = p.stderr.read()
        bus.recorder.add("daemon stderr", err)
        assert rc == 0, f"exit status {rc} (negative: killed by that signal); stderr {err[-300:]!r}"
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
        for f in (p.stdin, p.stderr):
            try:
                f.close()
            except OSError:
                pass
    assert_workers_gone(bus.worker_pids())
