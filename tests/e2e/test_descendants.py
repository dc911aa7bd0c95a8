"""A connection's worker takes what it started with it, and a worker slow to
leave does not keep a new client out (issue 32, items 5 and 7; SPEC.md
SB-X-18, SB-X-22, SB-X-23). The mock worker's --spawn-child starts a helper
that leaves the worker's process group (setsid), and with double-fork also
its parentage, as a daemonizing helper does, or (group) one that stays in
it; it logs the helper's pid. Every way a worker ends is tried: at its
client's end, by itself, and at shutdown (issue 34 item 4)."""
import contextlib
import os
import time

import pytest

from busproc import SCALE, Daemon
from test_stdio_mode import read_worker_log

KINDS = {"per_connection": {"spawn": "per_connection"}, "affinity": {"affinity": "connection"}}


def helper_pool(mock_bin, log, kind, how, instances=2):
    return {"id": "pc", "command": mock_bin, "args": ["--log", str(log), "--spawn-child", how],
            "instances": instances, **KINDS[kind]}


def helpers_of(log, workers=None):
    """Helper pids the workers logged (`child <pid>`), of these worker pids only if given."""
    return [int(line) for _, pid, _, direction, line in read_worker_log(log)
            if direction == "child" and (workers is None or pid in workers)]


def exited_workers(log):
    return {pid for _, pid, _, direction, _ in read_worker_log(log) if direction == "exit"}


def alive(pid, log):
    """Whether the helper still runs: not a zombie, and the pid not reused
    (its command line still names this test's log)."""
    try:
        cmdline = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")
        state = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return str(log).encode() in cmdline and state != "Z"


def wait_gone(pids, log, what):
    deadline = time.monotonic() + 10 * SCALE
    while True:
        left = [p for p in pids if alive(p, log)]
        if not left:
            return
        assert time.monotonic() < deadline, f"{len(left)} of {len(pids)} {what} still alive: {left}"
        time.sleep(0.05)  # poll interval


def ping(c, i):
    c.send_json({"jsonrpc": "2.0", "id": i, "method": "ping"})
    return c.line()


def kill_helpers(log):
    for pid in helpers_of(log):
        if alive(pid, log):
            os.kill(pid, 9)


HOW = ["setsid", "double-fork", "group"]


@pytest.mark.parametrize("how", HOW)
@pytest.mark.parametrize("kind", ["per_connection", "affinity"])
def test_what_a_worker_starts_outside_its_group_ends_with_it(
        daemon_bin, mock_bin, write_config, tmp_path, kind, how):
    # Before: each connection left its worker's helper running after the
    # worker exited, and after the daemon exited (13 from 12 connections).
    log = tmp_path / "w.log"
    cfg = {"pools": [helper_pool(mock_bin, log, kind, how)], "limits": {"drain_timeout_sec": 2}}
    d = Daemon(daemon_bin, write_config(cfg), tmp_path, mode="unix")
    try:
        for i in range(4):
            c = d.connect()
            assert ping(c, i) is not None, f"connection {i} was not served; the daemon's stderr:\n{d.stderr()[-3000:]}"
            c.close()
            d.wait_stderr("its client ended: closing its stdin", count=i + 1)  # SB-X-19
        d.wait_stderr("exited with status 0", count=4)  # the mock exits at the end of its input
        ended = exited_workers(log)
        assert len(ended) == 4, ended
        wait_gone(helpers_of(log, ended), log, f"helper(s) ({how}) of exited workers")
        assert d.stop() == 0
        wait_gone(helpers_of(log), log, f"helper(s) ({how}) after the daemon exited")
    finally:
        d.kill()
        kill_helpers(log)


@contextlib.contextmanager
def one_client_served(daemon_bin, mock_bin, write_config, tmp_path, kind, how):
    """A daemon whose one client is served by a worker that has started its
    helper: yields (daemon, client, worker log); kills what is left after."""
    log = tmp_path / "w.log"
    cfg = {"pools": [helper_pool(mock_bin, log, kind, how)], "limits": {"drain_timeout_sec": 2}}
    d = Daemon(daemon_bin, write_config(cfg), tmp_path, mode="unix")
    try:
        c = d.connect()
        assert ping(c, 1) is not None
        assert helpers_of(log), "the worker logged no helper"
        yield d, c, log
    finally:
        d.kill()
        kill_helpers(log)


@pytest.mark.parametrize("how", HOW)
@pytest.mark.parametrize("kind", ["per_connection", "affinity"])
def test_what_a_worker_that_exits_by_itself_started_ends_with_it(
        daemon_bin, mock_bin, write_config, tmp_path, kind, how):
    # The worker exits on its own while its client is connected (SB-X-14
    # then closes the client): what it started ends all the same.
    with one_client_served(daemon_bin, mock_bin, write_config, tmp_path, kind, how) as (d, c, log):
        c.send_json({"jsonrpc": "2.0", "method": "bye", "params": {"mock": {"emit": "", "then": "exit"}}})
        d.wait_stderr("exited with status 0")
        ended = exited_workers(log)
        assert len(ended) == 1, ended
        wait_gone(helpers_of(log, ended), log, f"helper(s) ({how}) of the worker that exited")
        assert d.stop() == 0
        wait_gone(helpers_of(log), log, f"helper(s) ({how}) after the daemon exited")


@pytest.mark.parametrize("how", HOW)
@pytest.mark.parametrize("kind", ["per_connection", "affinity"])
def test_helpers_of_workers_stopped_at_shutdown_end_with_the_daemon(
        daemon_bin, mock_bin, write_config, tmp_path, kind, how):
    # The worker is stopped by the shutdown (10.2) while its client is
    # connected: its helper outlived the daemon.
    with one_client_served(daemon_bin, mock_bin, write_config, tmp_path, kind, how) as (d, _, log):
        assert d.stop() == 0
        wait_gone(helpers_of(log), log, "helper(s) after the daemon exited")


def test_stubborn_retiring_workers_do_not_lock_new_clients_out(
        daemon_bin, mock_bin, write_config, tmp_path):
    # Workers that ignore the end of their input and SIGTERM keep their slot
    # for stop_grace_ms + drain_timeout_sec after their client left (SB-X-19):
    # after 2 x instances connections every slot held one, and a new client
    # read stdio_bus/refused while no worker served anyone.
    log = tmp_path / "w.log"
    instances = 2
    cfg = {"pools": [{"id": "pc", "command": mock_bin,
                      "args": ["--log", str(log), "--ignore-sigterm", "--on-eof", "stay"],
                      "instances": instances, "spawn": "per_connection"}],
           "limits": {"stop_grace_ms": 20000, "drain_timeout_sec": 2}}
    d = Daemon(daemon_bin, write_config(cfg), tmp_path, mode="unix")
    try:
        for i in range(3 * instances):
            c = d.connect()
            answer = ping(c, i)
            assert answer is not None and b'"result"' in answer and b"refused" not in answer, \
                f"connection {i} with no client served: {answer!r}"
            c.close()
            d.wait_stderr("its client ended: closing its stdin", count=i + 1)  # SB-X-19
        err = d.stderr()
        # each connection from the 5th on made room by killing the oldest retiring worker
        assert err.count("to make room for a new client") == instances, err[-3000:]
        assert "refused" not in err
    finally:
        d.kill()


def test_a_child_the_daemon_had_before_it_started_is_no_stray(
        daemon_bin, mock_bin, write_config, tmp_path):
    # A shell that starts a job and then execs the daemon hands the job to
    # it as its child: no worker started it, so SB-X-22 leaves it alone, and
    # shutdown does not wait for it.
    token = f"{300 + os.getpid() % 1000}.{time.monotonic_ns() % 10**6:06d}"
    log = tmp_path / "w.log"
    cfg = {"pools": [helper_pool(mock_bin, log, "per_connection", "setsid")],
           "limits": {"drain_timeout_sec": 2}}
    d = Daemon(daemon_bin, write_config(cfg), tmp_path, mode="unix",
               wrap=["sh", "-c", f'sleep {token} & exec "$@"', "sh"])
    job = None
    try:
        d.wait_stderr("child process(es) from before start")
        job = next(int(p) for p in open(f"/proc/{d.pid}/task/{d.pid}/children").read().split())
        c = d.connect()
        assert ping(c, 1) is not None
        c.close()
        d.wait_stderr("exited with status 0")
        wait_gone(helpers_of(log), log, "helper(s) of the exited worker")  # strays were looked at
        assert token.encode() in open(f"/proc/{job}/cmdline", "rb").read(), "the job was killed"
        assert d.stop() == 0
    finally:
        d.kill()
        if job:
            with contextlib.suppress(ProcessLookupError):
                os.kill(job, 9)
