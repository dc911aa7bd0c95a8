"""A client's end reaching its worker, and no client waiting on another's
leftovers (SPEC.md SB-X-19..SB-X-21, issue 23): under connection affinity
the worker of a client that ends sees the end of its input at once, as it
would had the client spawned it; a worker whose client left serves no one
else before it is replaced; a per_connection slot frees as its client
leaves; a client the daemon cannot serve is told so.

Every test requires the profile feature `client_end`. Waits are for events
(the mock's log, the daemon's lines); drain_timeout_sec is set far beyond
the run's wait deadline, so a daemon that holds a departed client's worker
until then fails the wait.
"""

import json
import os
import signal

import pytest

from stdio_bus_conformance import pid_of, procinfo, wait_timeout, wait_until

CLIENT_END = pytest.mark.requires("client_end")
DESCENDANTS = pytest.mark.requires("descendants")
GROUPS = pytest.mark.requires("process_groups")
SOCKETS = pytest.mark.modes("unix", "tcp")
STAY = ["--on-eof", "stay"]  # a worker that keeps running at stdin EOF until a signal
LONG = {"limits": {"drain_timeout_sec": 120}}
POOLS = {"per_connection": {"spawn": "per_connection"}, "affinity": {"affinity": "connection"}}


def start(bus, kind, instances=1, args=(), limits=None, probe_gone=True):
    pool = bus.pool("p", instances, args)
    pool.update(POOLS[kind])
    overrides = {"limits": {**LONG["limits"], **(limits or {})}}
    d = bus.start(overrides, pools=[pool], wait_workers=kind != "per_connection")
    if kind == "per_connection" and bus.mode != "stdio" and probe_gone:
        # the readiness probe was a connection too: its worker leaves first
        wait_until(lambda: not procinfo.children(bus.daemon.pid), what="no worker while no client is connected")
    return d


# -- SB-X-19: the end of a client reaches its worker ----------------------------------------
@CLIENT_END
@pytest.mark.clause("SB-X-19")
@pytest.mark.parametrize("kind", sorted(POOLS))
def test_a_clients_end_closes_its_workers_stdin_with_a_request_pending(bus, kind):
    start(bus, kind, instances=2 if kind == "affinity" else 1)
    c = bus.client()
    pid = pid_of(c.request())
    # a request its worker never answers: the client's answer stays owed
    c.send_json({"jsonrpc": "2.0", "id": "owed", "method": "wait", "params": {"mock": {"no_reply": True}}})
    bus.worker_log().wait_for(lambda r: r.kind == "in" and r.pid == pid and b'"owed"' in r.raw,
                              wait_timeout(), "the owed request at its worker")
    c.close_write()  # a half-close on a socket, EOF on stdin: it may still read
    # the mock exits at stdin EOF (--on-eof drain): the end reached it
    bus.worker_log().wait_for(lambda r: r.kind == "exit" and r.pid == pid, wait_timeout(),
                              "the worker exiting on the end of its input, before drain_timeout_sec")
    assert not bus.worker_log().select("signal", pid), "the worker was signalled: it exited on EOF"


@CLIENT_END
@SOCKETS
@pytest.mark.clause("SB-X-19")
def test_a_worker_that_stays_gets_sigterm_only_after_stop_grace_ms(bus):
    start(bus, "per_connection", args=STAY, limits={"stop_grace_ms": 200})
    c = bus.client()
    pid = pid_of(c.request())
    c.close()
    bus.worker_log().wait_for(lambda r: r.kind == "signal" and r.pid == pid, wait_timeout(),
                              "SIGTERM once stop_grace_ms is over")
    wait_until(lambda: procinfo.state(pid) is None, what="the worker exited and reaped")


# -- SB-X-21: a slot frees as its client leaves ---------------------------------------------
@CLIENT_END
@SOCKETS
@pytest.mark.clause("SB-X-21", "SB-X-19")
def test_a_client_that_reconnects_at_once_is_served_while_the_old_worker_exits(bus):
    # the old worker stays (STAY) and its grace is long: it is still there,
    # as is the readiness probe's (a connection too): two workers exiting,
    # neither counted against instances, each in a slot of its own
    start(bus, "per_connection", instances=2, args=STAY, limits={"stop_grace_ms": 60000},
          probe_gone=False)
    first = bus.client()
    old = pid_of(first.request())
    first.close()
    again = bus.client()
    new = pid_of(again.request())
    assert new != old, "the new connection reached the departed client's worker"
    assert not bus.worker_log().select("signal", old), "SIGTERM before stop_grace_ms"
    assert procinfo.state(old) is not None, "the old worker is gone: the test proves nothing"


@CLIENT_END
@SOCKETS
@pytest.mark.clause("SB-X-21")
def test_a_connection_that_cannot_be_served_is_told_before_the_close(bus):
    start(bus, "per_connection")
    first = bus.client()
    pid = pid_of(first.request())
    second = bus.client()
    lines = second.expect_closed()
    told = [json.loads(line) for line in lines if line.strip()]
    assert told, "closed without a JSON-RPC line: a silent reset"
    note = told[0]
    assert note.get("jsonrpc") == "2.0" and isinstance(note.get("method"), str) and "id" not in note, \
        f"not a JSON-RPC notification: {note}"
    assert pid_of(first.request()) == pid


# -- SB-X-20: no leftovers of a departed client -----------------------------------------------
@CLIENT_END
@SOCKETS
@pytest.mark.clause("SB-X-20")
def test_a_new_client_gets_an_idle_fresh_worker_not_a_departed_ones_or_a_live_ones(bus):
    start(bus, "affinity", instances=2)
    a = bus.client()
    pid_a = pid_of(a.request())
    b = bus.client()
    pid_b = pid_of(b.request())
    assert pid_b != pid_a, "B was bound beside A while a worker was idle"
    # B leaves a request its worker never answers, with an id C will use too
    b.send_json({"jsonrpc": "2.0", "id": "same", "method": "wait", "params": {"mock": {"no_reply": True}}})
    bus.worker_log().wait_for(lambda r: r.kind == "in" and r.pid == pid_b and b'"same"' in r.raw,
                              wait_timeout(), "B's owed request at its worker")
    b.close()
    c = bus.client()
    pid_c = pid_of(c.request(id="same"))
    assert pid_c != pid_a, "C was bound to A's worker, which has a live client, while one was idle"
    assert pid_c != pid_b, "C was bound to the departed client's worker, its turn still pending"
    assert pid_of(a.request()) == pid_a


# -- SB-X-23: a slot held by a worker slow to leave is freed for a waiting client ------------
@CLIENT_END
@SOCKETS
@pytest.mark.clause("SB-X-23")
def test_a_waiting_client_gets_the_slot_of_a_worker_slow_to_leave(bus):
    # One slot, workers that ignore the end of their input and SIGTERM: each client's worker,
    # once its client has left, would hold the slot until its SIGKILL drain_timeout_sec (120 s)
    # later. A client waiting for the slot is served long before: the daemon kills the worker
    # retiring longest for it. (The readiness probe's worker is the first such worker.)
    start(bus, "per_connection", args=["--ignore-sigterm"] + STAY, probe_gone=False)
    log = bus.worker_log()
    try:
        pids = []
        for _ in range(2):
            c = bus.client()
            pids.append(pid_of(c.request()))  # waits while the slot's worker is retiring
            c.close()
        assert pids[0] != pids[1], f"both clients were served by worker {pids[0]}"
    finally:  # the stubborn workers would hold the shutdown for drain_timeout_sec
        for r in log.select("start"):
            if helper_alive(r.pid, log.path):
                os.kill(r.pid, signal.SIGKILL)


# -- SB-X-24: a client waits for a worker of its own, never shares one ------------------------
@CLIENT_END
@SOCKETS
@pytest.mark.clause("SB-X-24")
def test_a_new_client_waits_for_a_worker_of_its_own_rather_than_share_one(bus):
    start(bus, "affinity", instances=1)
    a = bus.client()
    pid_a = pid_of(a.request())
    b = bus.client()
    b.send_json({"jsonrpc": "2.0", "id": "b-init", "method": "initialize"})
    a.request()  # a is served meanwhile
    assert not [r for r in bus.worker_log().select("in") if b'"b-init"' in r.raw], \
        "b's first message reached the worker a is bound to"
    a.close()  # a's worker retires and comes back fresh (SB-X-20): b's
    # a daemon that bound b beside a answers from a's worker, however late
    answer = b.recv_response("b-init")
    assert pid_of(answer) != pid_a, "b was bound to the worker a live client was bound to"


@CLIENT_END
@SOCKETS
@pytest.mark.clause("SB-X-24")
def test_a_client_that_waits_backpressure_timeout_sec_for_a_worker_is_refused(bus):
    # the small configured limit makes the wait short (1 s)
    start(bus, "affinity", instances=1, limits={"backpressure_timeout_sec": 1})
    a = bus.client()
    pid_a = pid_of(a.request())
    b = bus.client()
    b.send_json({"jsonrpc": "2.0", "id": "b-init", "method": "initialize"})
    lines = b.expect_closed(wait_timeout() + 1)
    told = [json.loads(line) for line in lines if line.strip()]
    assert told, "closed without a JSON-RPC line: a silent reset"
    note = told[-1]
    assert note.get("jsonrpc") == "2.0" and isinstance(note.get("method"), str) and "id" not in note, \
        f"not a JSON-RPC notification: {note}"
    assert not [r for r in bus.worker_log().select("in") if b'"b-init"' in r.raw], \
        "b's first message reached the worker a is bound to"
    assert pid_of(a.request()) == pid_a, "a lost its worker"


# -- SB-X-22: what a worker left outside its group ends with it --------------------------------
@DESCENDANTS
@SOCKETS
@pytest.mark.clause("SB-X-22")
@pytest.mark.parametrize("how", ["setsid", "double-fork"])
def test_a_helper_that_left_its_workers_group_ends_with_the_worker(bus, how):
    # the mock starts a helper that leaves its process group (setsid), and with double-fork its
    # parentage too, as a daemonizing helper does; the connection's end ends the worker
    # the readiness probe's own worker and helper are not awaited: this test judges its own
    start(bus, "per_connection", args=["--spawn-child", how], probe_gone=False)
    c = bus.client()
    pid = pid_of(c.request())
    rec = bus.worker_log().wait_for(lambda r: r.kind == "child" and r.pid == pid, wait_timeout(),
                                    "the helper's pid, logged by the worker")
    helper = int(rec.raw.strip())
    try:
        c.close()
        bus.worker_log().wait_for(lambda r: r.kind == "exit" and r.pid == pid, wait_timeout(),
                                  "the worker exiting at the end of its input")
        wait_until(lambda: not helper_alive(helper, bus.worker_log().path),
                   what=f"helper {helper} ({how}) ended once its worker {pid} had exited")
    finally:  # the harness leaves nothing behind, whatever the daemon did (the probe's helper too)
        log = bus.worker_log()
        for r in log.select("child"):
            if helper_alive(int(r.raw.strip()), log.path):
                os.kill(int(r.raw.strip()), signal.SIGKILL)


# -- SB-X-18: the daemon's signals reach the worker's whole process group ----------------------
@GROUPS
@SOCKETS
@pytest.mark.clause("SB-X-18")
def test_the_sigterm_of_a_retired_worker_reaches_its_group(bus):
    # a worker that ignores the end of its input and SIGTERM, with a helper in its process group
    # that does not: the SIGTERM the client's end brings (stop_grace_ms 0) ends the helper while
    # the worker runs on until its SIGKILL, drain_timeout_sec (120 s) later; had the SIGTERM gone
    # to the worker alone, the helper would live as long as the worker. Two slots: the readiness
    # probe's worker, as stubborn, keeps the other one.
    start(bus, "per_connection", instances=2, args=["--spawn-child", "group", "--ignore-sigterm"] + STAY,
          limits={"stop_grace_ms": 0}, probe_gone=False)
    c = bus.client()
    pid = pid_of(c.request())
    rec = bus.worker_log().wait_for(lambda r: r.kind == "child" and r.pid == pid, wait_timeout(),
                                    "the helper's pid, logged by the worker")
    helper = int(rec.raw.strip())
    path = bus.worker_log().path
    try:
        c.close()
        wait_until(lambda: not helper_alive(helper, path) or not worker_alive(pid),
                   what=f"helper {helper} or its worker {pid} ending, after the client's end")
        assert worker_alive(pid), (f"the worker {pid} ended before its helper {helper}: the SIGTERM "
                                   "did not reach the helper in the worker's group")
    finally:  # nothing left behind; the stubborn workers would hold the shutdown for drain_timeout_sec
        log = bus.worker_log()
        for r in log.select("child"):
            if helper_alive(int(r.raw.strip()), log.path):
                os.kill(int(r.raw.strip()), signal.SIGKILL)
        for r in log.select("start"):
            if helper_alive(r.pid, log.path):
                os.kill(r.pid, signal.SIGKILL)


def worker_alive(pid: int) -> bool:
    return procinfo.state(pid) not in (None, "Z")


def helper_alive(pid: int, log_path) -> bool:
    """The helper still runs: not a zombie, and its pid not reused (its command line, the
    mock's, names this test's worker log)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmdline = f.read()
    except OSError:
        return False
    return str(log_path).encode() in cmdline and procinfo.state(pid) not in (None, "Z")
