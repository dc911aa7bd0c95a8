"""Process lifecycle invariants, read from /proc while clients and workers
come and go: no zombie children, no leaked file descriptors (in the daemon,
or into its workers), one thread, and exit status 0 after a busy life."""

import os
import signal
import socket
import struct

import pytest

from stdio_bus_conformance import ConnectionClosed, DaemonTimeout, check, procinfo, wait_timeout, wait_until
from stdio_bus_conformance import pid_of, request_after_exit


# -- local helpers -------------------------------------------------------------------
def wait_reaped(pid, timeout=None):
    wait_until(lambda: procinfo.state(pid) is None, timeout,
               f"worker {pid} exited and reaped (state now {procinfo.state(pid)!r})")


def channels(pid):
    """fd -> identity of the pipes (anonymous or named FIFOs) and sockets pid
    holds, by file type."""
    return {fd: f.key for fd, f in procinfo.open_files(pid).items() if f.kind in ("pipe", "socket")}


def raw_client(d, session):
    """A plain socket (no reader thread) that has had one request answered."""
    family = socket.AF_UNIX if d.mode == "unix" else socket.AF_INET
    s = socket.socket(family, socket.SOCK_STREAM)
    s.settimeout(wait_timeout())
    s.connect(d.address)
    s.sendall(b'{"jsonrpc":"2.0","id":"raw","method":"echo","sessionId":"%s"}\n' % session.encode())
    data = b""
    while not data.endswith(b"\n"):
        try:
            chunk = s.recv(65536)
        except socket.timeout:
            raise DaemonTimeout(f"the raw client {session} got no answer within {wait_timeout():g} s") from None
        if not chunk:
            raise ConnectionClosed(f"the daemon closed the raw client {session}")
        data += chunk
    return s


def wait_fd_count_at_most(pid, limit, what):
    def ok():
        return procinfo.fd_count(pid) <= limit
    try:
        wait_until(ok, None, what)
    except DaemonTimeout:
        raise AssertionError(f"{what}: the daemon holds {procinfo.fd_count(pid)} fds, "
                             f"expected at most {limit}: {sorted(procinfo.fds(pid).items())}") from None


# -- zombies ------------------------------------------------------------------------------
@pytest.mark.clause("SB-7.1.1-2", "SB-3.1-2")
def test_no_zombie_whichever_way_a_worker_ends(bus):
    d = bus.start({"limits": {"max_restarts": 0}}, instances=4)
    c = bus.client()
    home = {s: pid_of(c.request(session=s)) for s in ("s0", "s1", "s2", "s3")}
    assert len(set(home.values())) == 4
    c.notify("bye", params={"mock": {"exit": 0}}, session="s0")         # exits by itself
    c.notify("bye", params={"mock": {"signal": "SEGV"}}, session="s1")  # dies of a signal
    os.kill(home["s2"], signal.SIGKILL)                                  # killed from outside
    for s in ("s0", "s1", "s2"):
        wait_reaped(home[s])
    assert procinfo.zombies(d.pid) == []
    assert procinfo.live_children(d.pid) == [home["s3"]]
    check("SB-3.1-2", pid_of(request_after_exit(c)) == home["s3"],
          "a request after three workers exited did not reach the one left")


# -- file descriptors ---------------------------------------------------------------------------
@pytest.mark.modes("unix", "tcp")
@pytest.mark.stands_on("malformed")
@pytest.mark.clause("SB-7.2-3", "SB-4.1.2-2")
def test_fds_of_departed_clients_are_closed(bus):
    d = bus.start(instances=2)
    first = bus.client()
    first.request()
    before = procinfo.fd_count(d.pid)
    groups = {"close": [], "malformed": [], "half-close": []}
    for kind in groups:
        for i in range(5):
            c = bus.client()
            c.request(session=f"{kind}-{i}")
            groups[kind].append(c)
    resets = [raw_client(d, f"reset-{i}") for i in range(5)]
    assert procinfo.fd_count(d.pid) >= before + 20 - 1
    for c in groups["close"]:
        c.close()
    for c in groups["malformed"]:
        c.send(b"{nope\n")
        c.expect_closed()
    for c in groups["half-close"]:
        c.close_write()
        c.expect_closed()
    for s in resets:  # close with SO_LINGER 0: the daemon gets ECONNRESET (TCP)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        s.close()
    wait_fd_count_at_most(d.pid, before, "20 clients have left")
    assert first.request()["result"]["method"] == "echo"


@pytest.mark.requires("restart_backoff")
@pytest.mark.stands_on("restart-exit0")
@pytest.mark.clause("SB-7.1.2-2", "SB-3.1-2")
def test_fds_of_exited_workers_are_closed(bus):
    d = bus.start({"limits": {"restart_backoff_ms": 5}}, instances=2)
    c = bus.client()
    c.request()
    before = procinfo.fd_count(d.pid)
    log = bus.worker_log()
    for n in range(4):
        c.request(session=f"s{n}")
        c.notify("bye", params={"mock": {"exit": 0}}, session=f"s{n}")
        log.wait_count(lambda r: r.kind == "start", 3 + n, what=f"'start' after exit #{n + 1}")
    wait_fd_count_at_most(d.pid, before, "4 workers exited and were restarted")
    assert len(procinfo.live_children(d.pid)) == 2


@pytest.mark.requires("restart_backoff")
@pytest.mark.stands_on("restart-exit0")
@pytest.mark.clause("SB-3.3-1")
def test_workers_inherit_no_descriptor_of_the_daemon(bus):
    d = bus.start({"limits": {"restart_backoff_ms": 5}}, instances=3)
    c = bus.client()
    others = [bus.client() for _ in range(2)] if bus.mode != "stdio" else []
    for o in others:
        o.request()
    # a worker spawned while clients are connected: restart one
    c.request(session="x")
    c.notify("bye", params={"mock": {"exit": 0}}, session="x")
    bus.worker_log().wait_count(lambda r: r.kind == "start", 4, what="'start' of the restarted worker")
    c.request()
    daemon_channels = set(channels(d.pid).values())
    workers = procinfo.live_children(d.pid)
    assert len(workers) == 3
    for pid in workers:
        fds = procinfo.fds(pid)
        leaked = {fd: fds.get(fd) for fd, key in channels(pid).items() if fd > 2 and key in daemon_channels}
        assert leaked == {}, f"worker {pid} holds descriptors of the daemon: {leaked}"


# -- threads and exit status -----------------------------------------------------------------------
@pytest.mark.clause("SB-I-50")
def test_one_thread_from_start_to_drain(bus):
    d = bus.start(pools=[bus.pool("p", 2, args=["--term-delay-ms", "300", "--on-eof", "stay"])])
    counts = [procinfo.thread_count(d.pid)]
    c = bus.client()
    for i in range(20):
        c.send_json({"jsonrpc": "2.0", "id": i, "method": "echo", "sessionId": f"s{i % 4}"})
    for i in range(20):
        c.recv_response(i)
    counts.append(procinfo.thread_count(d.pid))
    d.signal(signal.SIGTERM)
    bus.worker_log().wait_for(lambda r: r.kind == "signal", what="SIGTERM of a worker")
    if d.running:
        try:
            counts.append(procinfo.thread_count(d.pid))
        except (FileNotFoundError, OSError):
            pass  # it exited meanwhile
    d.wait_exit()  # its status is SB-10.2-6's
    assert set(counts) == {1}, f"thread counts: {counts}"


@pytest.mark.requires("restart_backoff")
@pytest.mark.clause("SB-10.2-6", "SB-I-21")
def test_exit_status_0_after_a_busy_life(bus):
    # clients connected, requests unanswered, a worker waiting for its restart
    d = bus.start({"limits": {"restart_backoff_ms": 3000, "drain_timeout_sec": 1}}, instances=2)
    clients = [bus.client()] if bus.mode == "stdio" else [bus.client() for _ in range(3)]
    for i, c in enumerate(clients):
        c.request(session=f"s{i}")
        c.send_json({"jsonrpc": "2.0", "id": f"open-{i}", "method": "x", "sessionId": f"s{i}",
                     "params": {"mock": {"delay_ms": 5000}}})
    gone = pid_of(clients[0].request(session="doomed"))
    clients[0].notify("bye", params={"mock": {"exit": 3}}, session="doomed")
    wait_reaped(gone)
    d.signal(signal.SIGTERM)
    assert d.wait_exit() == 0
    check("SB-I-21", len(bus.worker_pids()) == 2, "the exited worker was restarted during shutdown")
