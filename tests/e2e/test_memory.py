"""Memory after load (issue 27, item 3): the daemon's RSS returns near its
start once a load of many clients, large lines, slowloris and stalled
readers has gone, and the optional client-buffer budget
(limits.max_client_memory, SB-X-17) closes first those that hold bytes
they do not move the longest, never before them a client that reads.

The soak lasts SB_SOAK_SECONDS (default 20); the 6-minute figure of the
issue comes from one run by hand with SB_SOAK_SECONDS=360."""
import fcntl
import json
import os
import random
import socket
import struct
import termios
import threading
import time

import pytest

from busproc import SCALE, WRAPPER, Daemon

SOAK_SECONDS = float(os.environ.get("SB_SOAK_SECONDS", "20"))


def rss_kib(pid):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


def line_of(obj):
    return json.dumps(obj, separators=(",", ":")).encode() + b"\n"


def unix_socket(address):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(address)
    return s


def recv_lines(s, n, deadline):
    """Reads until n lines arrived (or the connection ended, or the deadline)."""
    buf, got = b"", 0
    s.settimeout(0.5)
    while got < n and time.monotonic() < deadline:
        try:
            chunk = s.recv(1 << 20)
        except socket.timeout:
            continue
        if not chunk:
            break
        buf += chunk
        got += chunk.count(b"\n")
        buf = buf[buf.rfind(b"\n") + 1:]
    return got


def churn(address, until, seed, stats):
    """Clients that come, send large lines, read their answers, and go."""
    rng = random.Random(seed)
    while time.monotonic() < until:
        try:
            s = unix_socket(address)
        except OSError:
            time.sleep(0.05)  # every per_connection slot in use: try again
            continue
        try:
            n = rng.randint(1, 4)
            size = rng.choice([100, 10_000, 200_000, 900_000])
            s.sendall(b"".join(line_of({"jsonrpc": "2.0", "id": i, "method": "big",
                                        "params": {"pad": "p" * size,
                                                   "mock": {"big": rng.choice([100, 300_000, 900_000])}}})
                               for i in range(n)))
            stats["answers"] += recv_lines(s, n, time.monotonic() + 10 * SCALE)
            stats["clients"] += 1
        except OSError:
            pass
        finally:
            s.close()


def stalled(address, until, seed, stats):
    """Clients that ask for large answers and never read them (the daemon's
    output queue to them fills), or that send most of a line and stop
    (slowloris: the input buffer fills); each goes after a while."""
    rng = random.Random(seed)
    while time.monotonic() < until:
        try:
            s = unix_socket(address)
        except OSError:
            time.sleep(0.05)
            continue
        try:
            if rng.random() < 0.5:
                s.sendall(b"".join(line_of({"jsonrpc": "2.0", "id": i, "method": "big",
                                            "params": {"mock": {"big": 900_000}}}) for i in range(8)))
            else:
                s.sendall(b'{"jsonrpc":"2.0","id":1,"method":"slow","params":"' + b"s" * 900_000)
            stats["stalled"] += 1
            time.sleep(min(rng.uniform(1.0, 3.0), max(0.0, until - time.monotonic())))
        except OSError:
            pass
        finally:
            s.close()


def soak(d, seconds, churners=8, stallers=8):
    stats = {"answers": 0, "clients": 0, "stalled": 0}
    until = time.monotonic() + seconds
    threads = [threading.Thread(target=churn, args=(d.address, until, i, stats), daemon=True)
               for i in range(churners)]
    threads += [threading.Thread(target=stalled, args=(d.address, until, 100 + i, stats), daemon=True)
                for i in range(stallers)]
    for t in threads:
        t.start()
    peak = 0
    while any(t.is_alive() for t in threads):
        peak = max(peak, rss_kib(d.pid))
        time.sleep(0.2)  # sampling interval of the peak, not a wait
    return stats, peak


def sockets(pid):
    n = 0
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            n += os.readlink(f"/proc/{pid}/fd/{fd}").startswith("socket:")
        except FileNotFoundError:  # closed meanwhile
            pass
    return n


def wait_idle(d, timeout=20.0):
    """Until no client is connected (only the listening socket is left) and
    every per_connection worker is reaped."""
    deadline = time.monotonic() + timeout * SCALE
    while True:
        clients = sockets(d.pid) - 1
        children = open(f"/proc/{d.pid}/task/{d.pid}/children").read().split()
        if not clients and not children:
            return
        assert time.monotonic() < deadline, \
            f"{clients} client(s) still connected, {len(children)} worker(s) alive"
        time.sleep(0.1)  # poll interval


def sanitized(binary):
    """A build with AddressSanitizer: its allocator keeps freed memory in
    quarantine, so RSS says nothing about ours."""
    with open(binary, "rb") as f:
        return b"__asan_init" in f.read()


@pytest.mark.skipif(bool(WRAPPER), reason="RSS under a memory checker says nothing about ours")
def test_rss_returns_within_2x_of_its_start_after_a_soak(daemon_bin, mock_bin, write_config, tmp_path):
    if sanitized(daemon_bin):
        pytest.skip("RSS of a sanitizer's allocator says nothing about ours")
    cfg = {"pools": [{"id": "big", "command": mock_bin, "args": [], "instances": 24,
                      "spawn": "per_connection"}],
           "limits": {"backpressure_timeout_sec": 2, "drain_timeout_sec": 2}}
    d = Daemon(daemon_bin, write_config(cfg), tmp_path, mode="unix")
    try:
        c = d.connect()  # served once, so whatever the first client costs counts in the start
        c.send_json({"jsonrpc": "2.0", "id": 0, "method": "warm"})
        assert c.line() is not None
        c.close()
        wait_idle(d)
        start = rss_kib(d.pid)
        stats, peak = soak(d, SOAK_SECONDS * SCALE)
        wait_idle(d, timeout=30)
        time.sleep(1.5)  # one idle sweep (SB_IDLE_SWEEP_MS) after the last client
        end = rss_kib(d.pid)
        print(f"soak {SOAK_SECONDS:.0f} s: {stats}; RSS start {start} KiB, peak {peak} KiB, "
              f"end {end} KiB")
        assert stats["answers"] > 0 and stats["stalled"] > 0, stats
        assert end <= 2 * start, f"RSS {end} KiB after the load, {start} KiB at start (peak {peak} KiB)"
    finally:
        d.kill()


def read_by_the_daemon(s, timeout=10.0):
    """Until the daemon has read everything sent on s: a unix socket's send
    queue (SIOCOUTQ) holds the bytes its peer has not read yet."""
    deadline = time.monotonic() + timeout * SCALE
    while True:
        left = struct.unpack("i", fcntl.ioctl(s.sock.fileno(), termios.TIOCOUTQ, b"\0" * 4))[0]
        if left == 0:
            return
        assert time.monotonic() < deadline, f"the daemon left {left} bytes unread"
        time.sleep(0.02)  # poll interval


def slowloris(d, n, size=900_000):
    """n connections that send most of a line and then nothing, read by the daemon."""
    conns = [d.connect() for _ in range(n)]
    for s in conns:
        s.send(b'{"jsonrpc":"2.0","id":1,"method":"slow","params":"' + b"s" * size)
    for s in conns:
        read_by_the_daemon(s)
    return conns


def test_client_memory_budget_closes_the_longest_holders_first(daemon_bin, mock_bin, write_config, tmp_path):
    # SB-X-17: 6 MiB for all clients' buffers together; slowloris connections
    # (unfinished lines), then readers that stall (output never read): those
    # that hold bytes they do not move the longest go first; a client within
    # its means is not closed
    budget = 6 << 20
    cfg = {"pools": [{"id": "big", "command": mock_bin, "args": [], "instances": 16,
                      "spawn": "per_connection"}],
           "limits": {"max_client_memory": budget, "max_output_queue": 1 << 20}}
    d = Daemon(daemon_bin, write_config(cfg), tmp_path, mode="unix")
    try:
        good = d.connect()
        good.send_json({"jsonrpc": "2.0", "id": 0, "method": "ping"})
        assert good.line() is not None
        held = slowloris(d, 3)  # 3 x 1 MiB of input buffers, within the budget (kept open)
        assert "max_client_memory" not in d.stderr()
        stalled = []
        for _ in range(2):  # ask for large answers and read none: their queues stall
            c = d.connect()
            c.send(b"".join(line_of({"jsonrpc": "2.0", "id": i, "method": "big",
                                     "params": {"mock": {"big": 900_000}}}) for i in range(8)))
            stalled.append(c)
        err = d.wait_stderr("over limits.max_client_memory")
        first = next(l for l in err.splitlines() if "max_client_memory" in l)
        assert "an unfinished line" in first, f"the oldest holder (a slowloris) was not closed first: {first}"
        good.send_json({"jsonrpc": "2.0", "id": 1, "method": "ping"})
        assert good.line() is not None, "a client within its means was closed"
        assert "its output stalled" not in d.stderr().split(first)[0]
    finally:
        d.kill()


def test_client_memory_budget_spares_a_client_that_reads_and_drains(daemon_bin, mock_bin, write_config, tmp_path):
    # issue 32 item 5, SB-X-17: 20 slowloris connections hold about 1 MiB of
    # unfinished line each; a client with 4 answers of 1 MB in flight is the
    # largest, and was closed for them after 2 of 20 answers. It reads and
    # drains: every slowloris holds for longer.
    # The budget is reached at any pace because the client reads nothing until
    # it is: the slowloris buffers take 20 MiB (buffers grow by doubling:
    # 900 kB -> 1 MiB), its unread answers at least 2 MiB more. Reading at full
    # speed from the start proved nothing on a slow daemon: a reader that keeps
    # up takes each answer whole from the socket and nothing is queued
    # (valgrind.e2e in ci-fresh8 and ci-fresh31, 21 and 22 MiB alike).
    cfg = {"pools": [{"id": "big", "command": mock_bin, "args": [], "instances": 4}],
           "limits": {"max_client_memory": 21 << 20}}
    d = Daemon(daemon_bin, write_config(cfg), tmp_path, mode="unix")
    try:
        held = slowloris(d, 20)
        innocent = d.connect()
        ask = lambda i: innocent.send_json({"jsonrpc": "2.0", "id": i, "method": "big",
                                            "params": {"mock": {"big": 1_000_000}}})
        for i in range(4):
            ask(i)
        d.wait_stderr("over limits.max_client_memory")
        answers = 0
        while answers < 20:
            line = innocent.line()
            assert line is not None, f"the client that reads was closed after {answers} of 20 answers"
            answers += 1
            if answers + 3 < 20:
                ask(answers + 3)
        closings = [l for l in d.stderr().splitlines() if "over limits.max_client_memory" in l]
        assert all("an unfinished line" in l for l in closings), "\n".join(closings)
        assert len(closings) < len(held), d.stderr()[-3000:]
    finally:
        d.kill()
