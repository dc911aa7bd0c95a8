"""The entity model (spec 3): the daemon, its workers and their processes,
sessions and their owners, requests; worker states (Appendix B) and where
logs go (Appendix C); the worker environment and log format of our daemon
(SB-X-4, SB-X-5, SB-X-9)."""

import dataclasses
import datetime
import json
import os
import re
import signal
import socket
import time

import pytest

from stdio_bus_conformance import (DaemonTimeout, NeverComes, check, checking, pace, pid_of, pipes_held_pool, procinfo,
                                    request_after_exit, wait_timeout, wait_until)


# -- local helpers ------------------------------------------------------------------
def wait_reaped(pid, timeout=None):
    """Waits until pid has gone from /proc entirely: exited and reaped."""
    wait_until(lambda: procinfo.state(pid) is None, timeout,
               f"worker {pid} exited and reaped (state now {procinfo.state(pid)!r})")


def pipe_of(pid, fd):
    """The identity of the pipe (anonymous or a named FIFO: by file type, not
    by the /proc link text) on fd of pid; None when it is not a pipe."""
    f = procinfo.open_file(pid, fd)
    return f.key if f is not None and f.kind == "pipe" else None


def exit_worker(c, session):
    """Asks the worker of `session` to exit with status 0 (a notification)."""
    c.notify("mock/exit", params={"mock": {"exit": 0}}, session=session)


# -- 3.1 the daemon, 3.3 workers ---------------------------------------------------------
@pytest.mark.clause("SB-3.1-1", "SB-3.1-2", "SB-3.3-1")
def test_workers_are_child_processes_on_pipes(bus):
    pools = [bus.pool("a", 2), bus.pool("b", 1)]
    d = bus.start(pools=pools, wait_workers=False)
    with checking("SB-3.1-1"):  # every pool of the file is served: each starts a worker
        for p in pools:
            bus.worker_log(p["id"]).wait_count(lambda r: r.kind == "start", 1,
                                               what=f"a worker of pool {p['id']!r} of the configuration file")
    with checking("SB-3.1-2"):  # `instances` processes per pool, each running its pool's command
        for p in pools:
            bus.worker_log(p["id"]).wait_count(lambda r: r.kind == "start", p["instances"],
                                               what=f"{p['instances']} worker(s) of pool {p['id']!r}")
        counts = {p["id"]: len(bus.worker_pids(p["id"])) for p in pools}
        assert counts == {"a": 2, "b": 1}, f"workers per pool: {counts}, configured: a 2, b 1"
    started = {pid: p for p in pools for pid in bus.worker_pids(p["id"])}
    assert len(started) == 3
    daemon_pipes = {f.key for f in procinfo.open_files(d.pid).values() if f.kind == "pipe"}
    seen = set()
    for pid, p in started.items():
        assert procinfo.ppid(pid) == d.pid, f"worker {pid} is not a child of the daemon"
        assert procinfo.cmdline(pid)[1:] == p["args"]
        # the pipes are SB-3.3-1's: a daemon giving its workers socket pairs is found there only
        ins, outs = pipe_of(pid, 0), pipe_of(pid, 1)
        check("SB-3.3-1", ins and outs and ins != outs,
              f"worker {pid}: stdin {procinfo.open_file(pid, 0)}, stdout {procinfo.open_file(pid, 1)}: "
              "not two pipes")
        check("SB-3.3-1", {ins, outs} <= daemon_pipes, f"worker {pid}'s stdin/stdout pipes do not lead to the daemon")
        check("SB-3.3-1", not {ins, outs} & seen, f"worker {pid} shares a pipe with another worker")
        seen |= {ins, outs}
    assert sorted(procinfo.live_children(d.pid)) == sorted(started)


@pytest.mark.clause("SB-3.1-2", "SB-B-2", "SB-B-4", "SB-7.1.1-2")
def test_exited_worker_is_reaped_and_routed_around(bus):
    d = bus.start({"limits": {"max_restarts": 0}}, instances=3)
    c = bus.client()
    victim = bus.worker_pids()[1]
    os.kill(victim, signal.SIGKILL)
    wait_reaped(victim)  # the daemon watched for the exit and reaped it
    # a runtime that reaps in one step and handles the exit in another may route a request to
    # it meanwhile (discarded by 7.1.2, every reading allows it: a busy JVM did): from the
    # first time both workers left have answered in a row, nothing goes to the dead one
    request_after_exit(c, streak=2)
    answered = [pid_of(c.request()) for _ in range(6)]
    answered += [pid_of(c.request(session=f"new-{i}")) for i in range(3)]
    assert victim not in answered
    assert set(answered) == set(bus.worker_pids()) - {victim}
    assert len(procinfo.live_children(d.pid)) == 2, "with max_restarts 0 the worker stays STOPPED"


@pytest.mark.stands_on("burst")
@pytest.mark.stands_on("full-pipe")  # it writes to a worker faster than the worker reads
@pytest.mark.clause("SB-3.1-5", "SB-I-50")
def test_one_thread_while_busy(bus):
    d = bus.start(instances=2)
    first = bus.client()
    first.request(session="warm-up")  # a runtime starts its helper threads by now
    alone = procinfo.thread_count(d.pid)
    clients = [first] if bus.mode == "stdio" else [first] + [bus.client() for _ in range(7)]
    for n, c in enumerate(clients):
        for i in range(40):
            c.send_json({"jsonrpc": "2.0", "id": f"c{n}-{i}", "method": "echo",
                         "sessionId": f"s{n}-{i % 3}", "params": {"pad": "x" * 2000}})
    counts = []
    for n, c in enumerate(clients):
        for i in range(40):
            c.recv_response(f"c{n}-{i}")
            if i % 8 == 0:
                counts.append(procinfo.thread_count(d.pid))
    # every reading of "a single thread": none per client or per peer (SB-3.1-5)
    assert max(counts) <= alone, \
        f"{len(clients)} busy clients: thread counts {counts}, {alone} with one client and no traffic"
    check("SB-I-50", set(counts) | {alone} == {1}, f"thread counts while busy: {counts}")


@pytest.mark.clause("SB-3.1-5")
def test_stalled_worker_does_not_delay_other_traffic(bus):
    bus.start(instances=2)
    c = bus.client()
    other = c if bus.mode == "stdio" else bus.client()
    # the worker of "stuck" stops reading its stdin after answering this
    stuck = pid_of(c.request(session="stuck", params={"mock": {"stall": "read"}}))
    free = None
    for i in range(4):
        free = f"free-{i}"
        if pid_of(other.request(session=free)) != stuck:
            break
    else:
        raise AssertionError("every new session went to the stalled worker")
    # far more than a pipe holds (64 KiB), far less than max_output_queue (4 MiB)
    pad = "y" * 16000
    for i in range(40):
        c.notify("fill", params={"pad": pad, "i": i}, session="stuck")
    t0 = time.monotonic()
    for i in range(5):
        assert other.request(session=free)["sessionId"] == free
    took = time.monotonic() - t0
    assert took < 5 * pace().bound("answer", 0.4), f"5 answers took {took:.2f} s"


@pytest.mark.modes("unix", "tcp")
@pytest.mark.stands_on("big-line")
@pytest.mark.stands_on("slow-reader")
@pytest.mark.clause("SB-3.1-5")
def test_client_that_stops_reading_does_not_delay_others(bus):
    d = bus.start({"limits": {"max_input_buffer": 8 << 20}}, instances=2)
    family = socket.AF_UNIX if bus.mode == "unix" else socket.AF_INET
    slow = socket.socket(family, socket.SOCK_STREAM)
    slow.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    slow.settimeout(wait_timeout())
    slow.connect(d.address)
    try:
        slow.sendall(b'{"jsonrpc":"2.0","id":"hi","method":"echo","sessionId":"slow"}\n')
        line = b""
        while not line.endswith(b"\n"):
            try:
                chunk = slow.recv(65536)
            except socket.timeout:
                raise DaemonTimeout("the slow client got no answer within 5 s") from None
            assert chunk, "the daemon closed the slow client"
            line += chunk
        slow_pid = pid_of(json.loads(line))
        fast = bus.client()
        for i in range(4):
            session = f"fast-{i}"
            if pid_of(fast.request(session=session)) != slow_pid:
                break
        else:
            raise AssertionError("every new session went to the slow client's worker")
        # a 3 MB answer the slow client never reads: more than the socket buffers,
        # less than max_output_queue
        slow.sendall(b'{"jsonrpc":"2.0","id":"big","method":"echo","sessionId":"slow",'
                     b'"params":{"mock":{"big":3000000}}}\n')
        bus.worker_log().wait_sent(b'"id":"big"')
        t0 = time.monotonic()
        for i in range(5):
            fast.request(session=session)
        took = time.monotonic() - t0
        assert took < 5 * pace().bound("answer", 0.4), f"5 answers took {took:.2f} s"
    finally:
        slow.close()


@pytest.mark.clause("SB-I-38", "SB-3.1-1")
def test_client_may_write_as_soon_as_the_daemon_is_ready(bus):
    bus.start(instances=2, wait_workers=False)
    c = bus.client()
    # the first message arrives before anyone waited for the workers
    c.send_json({"jsonrpc": "2.0", "id": "first", "method": "echo", "sessionId": "early"})
    c.send_json({"jsonrpc": "2.0", "id": "second", "method": "echo"})
    assert c.recv_response("first")["sessionId"] == "early"
    c.recv_response("second")


@pytest.mark.requires("restart_backoff")
@pytest.mark.clause("SB-I-38")
def test_worker_whose_exec_fails_counts_as_exited(bus):
    # A script whose interpreter does not exist yet: exec fails with ENOENT
    # (also for a daemon that uses execvp). Once the interpreter exists, the
    # restart policy's next attempt starts it.
    interp = bus.workdir / "interp"
    script = bus.workdir / "late-worker"
    script.write_text(f"#!{interp}\n")
    script.chmod(0o755)
    late = {"id": "q", "command": str(script), "instances": 1}
    bus.start({"limits": {"restart_backoff_ms": 20, "restart_backoff_max_ms": 100, "max_restarts": 50}},
              pools=[bus.pool("p", 1), late])
    c = bus.client()
    # the daemon started and serves with the worker that did start
    assert pid_of(c.request(session="s")) == bus.worker_pids("p")[0]
    interp.write_text(f"#!/bin/sh\nexec {bus.pool()['command']} --log {bus.workdir / 'q.log'}\n")
    interp.chmod(0o755)
    bus.worker_log("q").wait_count(lambda r: r.kind == "start", 1, what="'start' of the late worker")
    answered = {pid_of(c.request(session=f"n{i}")) for i in range(4)}
    assert bus.worker_pids("q")[0] in answered


# -- 3.2 clients, 3.4 sessions, 3.5 requests ------------------------------------------------
@pytest.mark.clause("SB-3.2-3", "SB-3.5-3", "SB-6.3.2-2")
def test_client_may_own_several_sessions(bus):
    bus.start(instances=3)
    c = bus.client()
    workers = {}
    for s in ("s0", "s1", "s2"):
        resp = c.request(session=s, params={"mock": {"notify": 2}})
        workers[s] = pid_of(resp)
    for s in workers:
        assert pid_of(c.request(session=s)) == workers[s], f"session {s} moved"
        c.sync(session=s)  # every notification of that worker has been routed
    notes = [json.loads(line) for line in c.received if b"notifications/progress" in line]
    for s in workers:
        check("SB-6.3.2-2", sum(n.get("sessionId") == s for n in notes) == 2, f"notifications of {s}: {notes}")


@pytest.mark.clause("SB-3.4-1", "SB-3.4-2", "SB-3.1-4", "SB-6.1.2-1")
def test_sessions_are_told_apart_by_their_string(bus):
    bus.start(instances=3)
    c = bus.client()
    ids = ["A", "a", "A ", ""]  # case and spacing matter; "" is a sessionId too (SB-I-2)
    first = {s: pid_of(c.request(session=s)) for s in ids}
    assert len({first[s] for s in ids[:3]}) == 3, f"'A', 'a' and 'A ' did not make three sessions: {first}"
    for _ in range(3):
        c.request()  # moves the round-robin cursor
        for s in ids:
            assert pid_of(c.request(session=s)) == first[s], f"session {s!r} moved"
    for s in ids:
        needle = b'"sessionId":' + json.dumps(s).encode()
        got = {r.pid for r in bus.worker_log().select("in") if needle + b"}" in r.raw or needle + b"," in r.raw}
        assert got == {first[s]}, f"lines of session {s!r} reached workers {got}"


@pytest.mark.modes("unix", "tcp")
@pytest.mark.clause("SB-3.4-3", "SB-6.1.1-3", "SB-I-4")
def test_session_has_one_owner(bus):
    # Seed 6.1.2 routes a message with a known sessionId to the session's
    # worker whoever sends it, and 6.3.1 answers its sender; keeping the
    # intruder out is our reading (SB-I-4). What every reading forces: the
    # session keeps its one owner, who alone gets its notifications.
    bus.start(instances=2)
    # a bystander connects first: a daemon that records some other client
    # (the first connection) as the owner is not taken for right
    bystander = bus.client()
    bystander.request()
    owner, intruder = bus.client(), bus.client()
    # the worker writes the notifications before its answer, so they have
    # been routed by the time the answer is in
    worker = pid_of(owner.request(session="mine", params={"mock": {"notify": 2}}))
    created = [line for line in owner.received if b"notifications/progress" in line]
    check("SB-6.1.1-3", len(created) == 2,
          lambda: f"the client whose message created the session got {len(created)} of its 2 notifications: "
                  f"{created}; the first connection got "
                  f"{[x for x in bystander.sync() + bystander.received if b'notifications/progress' in x]}")
    since_created = len(owner.received)
    intruder.send_json({"jsonrpc": "2.0", "id": "intrude", "method": "x", "sessionId": "mine",
                        "params": {"mock": {"notify": 2}}})
    intruder.sync()  # the daemon has read the intruder's line (routed it or not)
    # the owner's request follows it to the session's worker, which answers in
    # order: once the owner has its answer, the worker has written anything
    # it had for the intruder's line, and the daemon has routed it
    assert pid_of(owner.request(session="mine", params={"mock": {"notify": 2}})) == worker
    owner.sync(session="mine")
    notes = [line for line in owner.received[since_created:] if b"notifications/progress" in line]
    assert len(notes) >= 2, f"the owner got {len(notes)} of its session's notifications: {notes}"
    stray = [line for line in intruder.sync() + intruder.received if b"notifications/progress" in line]
    assert stray == [], f"a client that does not own the session received its notifications: {stray}"
    with checking("SB-I-4"):  # the intruder's line is discarded: no answer, nothing reaches the worker
        assert not any(b'"intrude"' in line for line in intruder.received), \
            "the intruder got an answer in a session it does not own"
        assert len(notes) == 2, notes
        assert not any(b'"intrude"' in line for line in bus.worker_log().received()), \
            "the intruder's message reached the session's worker"


@pytest.mark.clause("SB-3.4-4", "SB-7.1.2-3", "SB-I-12", "SB-6.1.1-1")
def test_session_ends_when_its_worker_exits(bus):
    bus.start({"limits": {"max_restarts": 0}}, instances=2)
    c = bus.client()
    gone = pid_of(c.request(session="s"))
    # the probes go through a session of the other worker: a message without one may go, by
    # round robin, to the worker that exited before the daemon has seen it exit, and be lost
    # there (a sync that never comes back is the daemon's pace, not a defect)
    check("SB-6.1.1-1", pid_of(c.request(session="probe")) != gone,
          f"two new sessions in a row both went to worker {gone} (round robin, 6.1.1)")
    exit_worker(c, "s")
    wait_reaped(gone)
    # the surviving worker writes a notification for "s": no session, so discarded. Reaped is
    # not yet handled for every daemon (a runtime that reaps in one step and calls back in
    # another): until the wait's end, once the daemon has handled the exit
    def ended(k=iter(range(1 << 30))):
        n = next(k)
        stale = '{"jsonrpc":"2.0","method":"mock/stale","sessionId":"s","params":{"k":%d}}\n' % n
        c.send_json({"jsonrpc": "2.0", "id": f"emit-{n}", "method": "x", "sessionId": "probe",
                     "params": {"mock": {"emit": stale}}})
        bus.worker_log().wait_sent(b'"k":%d}' % n)  # the mock answers no emit
        # the survivor answers the sync after it wrote the line: once the answer is here, the
        # line was routed or discarded
        return not any(b"mock/stale" in line for line in c.sync(session="probe"))
    wait_until(ended, wait_timeout(), "the dead worker's session ended (a notification for it no longer delivered)")
    # "s" is unknown now: it starts anew on a running worker
    with checking("SB-I-12"):
        assert pid_of(c.request(session="s")) != gone


@pytest.mark.modes("unix", "tcp")
@pytest.mark.clause("SB-I-12")
def test_a_message_no_worker_can_take_is_discarded_and_its_client_kept(bus):
    # The only worker exits and is never restarted: each message of the client is discarded
    # with a line of the daemon's (in any words), and the client stays: its next message is
    # read and discarded in turn. A client closed for the first would leave no line for the
    # second, and the wait ends as soon as it is closed.
    d = bus.start({"limits": {"max_restarts": 0}}, instances=1)
    c = bus.client()
    gone = pid_of(c.request(session="last"))
    exit_worker(c, "last")
    wait_reaped(gone)

    def kept():
        if c.closed_by_daemon:
            raise NeverComes("the daemon closed the client")
    for n in range(2):
        mark = d.stderr_mark()
        c.send_json({"jsonrpc": "2.0", "id": f"nobody-{n}", "method": "m"})
        d.wait_stderr_line(lambda line: "mock_worker[" not in line and line, since=mark,
                           what=f"about message {n + 1}, which no worker can take", bound=kept)
    assert not c.closed_by_daemon, "the client was closed for a message no worker could take"


@pytest.mark.modes("unix", "tcp")
@pytest.mark.clause("SB-3.4-5", "SB-7.2-1")
def test_session_ends_when_its_owner_disconnects(bus):
    bus.start(instances=2)
    a = bus.client()
    a.request(session="s")
    # b is served before a leaves: it is another connection than a's, never a
    # reuse of whatever a daemon kept of a's
    b = bus.client()
    b.request()
    a.close()
    # Two connections are not ordered: b's claim may reach the daemon before
    # a's close. A claim made too early is discarded (SB-I-4): claim again.
    deadline = time.monotonic() + wait_timeout()
    k = 0
    while True:
        k += 1
        b.send_json({"jsonrpc": "2.0", "id": f"claim-{k}", "method": "x", "sessionId": "s"})
        try:
            b.recv_response(f"claim-{k}", timeout=pace().bound("answer", 0.2))
            break
        except DaemonTimeout:
            if time.monotonic() > deadline:
                raise AssertionError("the session still belongs to a client that disconnected")
    resp = b.request(session="s", params={"mock": {"notify": 1}})
    b.sync(session="s")
    assert any(b"notifications/progress" in line for line in b.received), \
        "the new owner did not receive the session's notifications"
    # and they come from the worker b's session is bound to now
    sent = [r.line for r in bus.worker_log().select("out", pid_of(resp)) if b"notifications/progress" in r.raw]
    assert any(line in b.received for line in sent), \
        f"b's notifications did not come from worker {pid_of(resp)}, which answered b in session s"


@pytest.mark.clause("SB-5.1.1-3", "SB-3.5-4")
def test_params_are_forwarded_untouched(bus):
    bus.start(instances=1)
    c = bus.client()
    line = (b'{"jsonrpc":"2.0","id":"p1","method":"echo","params":{"id":{"x":[1,2]},'
            b'"sessionId":7,"result":null,"method":[],"deep":{"a":{"b":{"c":"\\u0000\\n"}}},'
            b'"big":-1.5E+300,"s":"   "}}\n')
    c.send(line)
    assert c.recv_response("p1")["result"]["method"] == "echo"
    assert bus.worker_log().wait_received(b'"id":"p1"').line == line


@pytest.mark.clause("SB-I-35", "SB-6.1.2-2")
def test_sessions_do_not_expire_and_no_message_ends_them(bus):
    bus.start(instances=3)
    c = bus.client()
    home = pid_of(c.request(session="keep"))
    closers = [
        {"jsonrpc": "2.0", "method": "session/close", "sessionId": "keep"},
        {"jsonrpc": "2.0", "method": "notifications/cancelled", "sessionId": "keep",
         "params": {"requestId": 1}},
        {"jsonrpc": "2.0", "id": "bye", "method": "shutdown", "sessionId": "keep"},
        {"jsonrpc": "2.0", "method": "exit", "sessionId": "keep"},
    ]
    for msg in closers:
        c.send_json(msg)
        if "id" in msg:
            c.recv_response(msg["id"])
        c.request()  # moves the round-robin cursor: a re-created session would move
        assert pid_of(c.request(session="keep")) == home, f"the session moved after {msg}"
    c.expect_silence(0.5)  # idle for a while (bounded: the suite must stay fast)
    c.request()
    assert pid_of(c.request(session="keep")) == home


# -- Appendix B: worker states -----------------------------------------------------------------
@pytest.mark.clause("SB-B-3", "SB-B-2", "SB-I-29")
def test_worker_being_terminated_gets_no_new_message(bus):
    # the failed worker must outlive nine round trips (the subject's pace) and then exit by itself
    linger = max(0.6, 2 * 9 * pace().answer)
    slow_exit = bus.pool("p", 3, args=["--term-delay-ms", str(round(linger * 1000)), "--on-eof", "stay"])
    bus.start({"limits": {"drain_timeout_sec": int(2 * linger) + 2}}, pools=[slow_exit])
    c = bus.client()
    bad = pid_of(c.request(session="bad"))
    # malformed output: the daemon sends SIGTERM; the worker takes 600 ms to go
    c.send_json({"jsonrpc": "2.0", "id": "boom", "method": "x", "sessionId": "bad",
                 "params": {"mock": {"emit": "this is not json\n"}}})
    log = bus.worker_log()
    term = log.wait_for(lambda r: r.kind == "signal" and r.pid == bad, what="SIGTERM of the failed worker")
    # round-robin and new sessions pick RUNNING workers only (B-2): one picking the
    # STOPPING worker goes unanswered or is answered by it; that it gets nothing at
    # all, not even for its own sessions, is B-3's (below)
    with checking("SB-B-2"):
        answered = [pid_of(c.request()) for _ in range(6)]
        answered += [pid_of(c.request(session=f"new-{i}")) for i in range(3)]
        assert bad not in answered, f"the STOPPING worker {bad} was picked: {answered}"
    late = [r for r in log.select("in", bad) if r.t_ns > term.t_ns]
    assert late == [], f"the STOPPING worker received {late[0].raw[:100]!r}"
    if not procinfo.exists(bad):  # the machine was slower than the preflight's pace: not a defect
        pytest.skip("not judged: the failed worker exited before the requests were done, so they may "
                    "have met it STOPPED, not STOPPING (a busy machine); run it again")


@pytest.mark.requires("restart_backoff")
@pytest.mark.stands_on("restart-exit0")
@pytest.mark.clause("SB-B-4", "SB-B-2")
@pytest.mark.parametrize("exit_kind", ["plain", "pipes-held"])
def test_stopped_worker_gets_nothing_until_restarted(bus, exit_kind):
    # pipes-held: a helper keeps the worker's pipes open, so that only its exit
    # (SIGCHLD), not an EOF on its stdout, tells the daemon it is STOPPED
    pools = [bus.pool("p", 2) if exit_kind == "plain" else pipes_held_pool(bus, "p", 2)]
    # the restart comes after six round trips (the subject's pace): they all meet it STOPPED
    bus.start({"limits": {"restart_backoff_ms": max(300, round(2000 * 6 * pace().answer))}}, pools=pools,
              wait_workers=False)
    bus.worker_log().wait_count(lambda r: r.kind == "start", 2, what="'start' of the 2 workers")
    c = bus.client()
    gone = pid_of(c.request(session="s"))
    exit_worker(c, "s")
    wait_reaped(gone)
    # STOPPED, waiting for its restart: nothing is lost on it meanwhile
    answered = [pid_of(c.request()) for _ in range(6)]
    # by the other worker, or by the restarted one if the restart came first (a machine slower
    # than the preflight's pace): never by the STOPPED one
    assert gone not in answered and set(answered) <= set(bus.worker_log().pids()) - {gone}, answered
    log = bus.worker_log()
    log.wait_count(lambda r: r.kind == "start", 3, what="'start' of the restarted worker")
    reborn = log.pids()[2]
    answered = {pid_of(c.request()) for _ in range(4)}
    assert reborn in answered, "the restarted worker gets no traffic"


# -- worker identity (SB-I-13, SB-X-4, SB-X-5) -----------------------------------------------------
@pytest.mark.requires("worker_id_env")
@pytest.mark.clause("SB-X-4", "SB-I-13")
def test_worker_ids_are_slots_in_configuration_order(bus):
    d = bus.start(pools=[bus.pool("a", 2), bus.pool("b", 1)])
    # a worker without the variable logs "-" (None): sort as text, never compare None with str
    ids = {pool: sorted(str(r.worker) for r in bus.worker_log(pool).select("start")) for pool in ("a", "b")}
    assert ids == {"a": ["0", "1"], "b": ["2"]}, f"STDIO_BUS_WORKER_ID per pool: {ids}"
    c = bus.client()
    for _ in range(3):
        r = c.request()["result"]
        pool = "a" if r["pid"] in bus.worker_pids("a") else "b"
        assert str(r["worker"]) in ids[pool]
    text = d.stderr_text()
    for pid in bus.worker_pids("a") + bus.worker_pids("b"):
        check("SB-I-13", str(pid) in text, f"the spawn of worker pid {pid} is not logged with its pid")


@pytest.mark.requires("worker_id_env", "restart_backoff")
@pytest.mark.stands_on("restart-exit0")
@pytest.mark.clause("SB-X-4", "SB-I-13")
def test_restarted_worker_keeps_its_id(bus):
    bus.start({"limits": {"restart_backoff_ms": 10}}, instances=3)
    c = bus.client()
    r = c.request(session="s")["result"]
    exit_worker(c, "s")
    log = bus.worker_log()
    new = log.wait_count(lambda rec: rec.kind == "start", 4, what="'start' of the restarted worker")[3]
    assert new.pid != r["pid"] and new.worker == r["worker"], \
        f"worker {r['worker']} came back as {new.worker}"


@pytest.mark.requires("pool_id_env")
@pytest.mark.clause("SB-X-5")
def test_pool_id_is_in_the_worker_environment(bus):
    bus.start(pools=[bus.pool("alpha", 1), bus.pool("beta", 2)])
    c = bus.client()
    for _ in range(6):
        r = c.request()["result"]
        pool = "alpha" if r["pid"] in bus.worker_pids("alpha") else "beta"
        assert r["pool"] == pool, f"worker {r['pid']} of pool {pool} has STDIO_BUS_POOL_ID={r['pool']!r}"


# -- Appendix C: logs -----------------------------------------------------------------------------
@pytest.mark.modes("stdio")
@pytest.mark.clause("SB-C-1")
def test_logs_never_reach_stdout_from_start_to_exit(bus):
    d = bus.start(instances=2)
    c = bus.client()
    c.request(session="s")
    # things a daemon logs: an unknown response id, an unroutable line, a client
    # response nobody asked for, a worker exit, partial input at end of stdin
    c.send_json({"jsonrpc": "2.0", "id": "u", "method": "x", "sessionId": "s",
                 "params": {"mock": {"reply_id": "nobody"}}})
    c.send_json({"jsonrpc": "2.0", "id": "v", "method": "x", "sessionId": "s",
                 "params": {"mock": {"emit": '{"jsonrpc":"2.0","method":"lost"}\n'}}})
    c.send(b'{"jsonrpc":"2.0","id":"w","result":{}}\n')
    c.sync(session="s")
    exit_worker(c, "s")
    c.send(b'{"jsonrpc":"2.0","method":"unfinished"')
    c.close()
    d.wait_exit()  # its status after a partial last line is SB-I-5's and SB-I-25's
    c.expect_closed()
    assert len(d.stderr_lines()) > 5, "the daemon logged almost nothing: this test proves little"
    forwarded = set(bus.worker_log().sent())
    stray = [line for line in c.received if line not in forwarded]
    assert stray == [], f"stdout carried lines no worker wrote: {stray[:3]}"


LOG_LINE = re.compile(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3})Z (DEBUG|INFO|WARN|ERROR) (?:\[([^\]]+)\] )?\S")


@pytest.mark.requires("log_format")
@pytest.mark.clause("SB-X-9")
def test_log_lines_have_utc_time_level_and_context(bus):
    # a zone far from UTC: local time in the log would be hours off
    bus.profile = dataclasses.replace(bus.profile, env=dict(bus.profile.env, TZ="Asia/Kathmandu"))
    d = bus.start(instances=2)
    c = bus.client()
    c.request(session="s")
    c.send_json({"jsonrpc": "2.0", "id": "u", "method": "x", "sessionId": "s",
                 "params": {"mock": {"reply_id": "nobody"}}})
    c.sync(session="s")
    d.signal(signal.SIGTERM)
    assert d.wait_exit() == 0
    now = datetime.datetime.now(datetime.timezone.utc)
    contexts = []
    for line in d.stderr_lines():
        m = LOG_LINE.match(line)
        assert m, f"log line not '<time> <LEVEL> [<context>] <message>': {line!r}"
        t = datetime.datetime.strptime(m.group(1), "%Y-%m-%dT%H:%M:%S.%f").replace(tzinfo=datetime.timezone.utc)
        assert abs((now - t).total_seconds()) < 120, f"time {m.group(1)} is not UTC now ({now:%H:%M:%S})"
        contexts.append(m.group(3) or "")
    for pid in bus.worker_pids():
        assert any(str(pid) in ctx for ctx in contexts), f"no log line names worker {pid} in its context"
