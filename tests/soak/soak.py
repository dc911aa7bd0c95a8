#!/usr/bin/env python3
"""Soak test: a long run of traffic through the daemon, with churn and kills.

    /usr/bin/python3 tests/soak/soak.py --build-dir build [--messages 1000000]

Starts <build>/stdio_bus on a Unix socket with 4 echo workers
(<build>/mock_workers/mock_worker), `orphan_policy: "error"`, a 50 ms restart
backoff and a restart budget that never runs out. Then:

  - 8 long-lived clients each keep 64 requests in flight (ids 1, 2, ... in
    every client, so the ids overlap across clients: SB-I-3), half of them in
    one of 4 sessions of their own;
  - short-lived clients connect, send 1 to 8 requests (ids of their own,
    or 1, 2, ... with --reuse-ids), and either wait for every answer or
    leave with requests in flight (SB-7.2, SB-I-23);
  - every 10,000 messages one worker is killed with SIGKILL, its pid taken
    from a recent answer's `result.pid` (SB-7.1, SB-I-8).

Every request carries its client's number in `params`, which the echo worker
returns, so an answer delivered to the wrong client is caught even when the
two clients used the same id. Checked on the way: each answer is for a request
of this client that is still waiting; a session stays on its worker until that
worker is killed (SB-6.1.2-2); errors are only "worker exited" (SB-X-8).

At the start (after a warm-up with the long-lived clients only) and at the end
(same clients connected, all workers running again) it reads the daemon's RSS
(VmRSS in /proc/<pid>/status) and open fds (/proc/<pid>/fd). It fails if RSS
grew by more than 10% + 1 MiB or the fd count differs, if any request of a
client that stayed was never answered although no worker was killed while it
was in flight (with "error" orphans every request should get an answer; one in
flight on a killed worker may be lost per the spec, so it is only counted),
or on any check above. It stops by itself (every wait has a deadline), prints
one summary line and exits 0 on success, 1 on failure, 2 on a setup error.
"""
import argparse
import collections
import json
import os
import random
import selectors
import signal
import socket
import subprocess
import sys
import tempfile
import time

WORKERS = 4
LONG_CLIENTS = 8
IN_FLIGHT = 64
SHORT_CLIENTS = 4            # short-lived clients at a time
KILL_EVERY = 10_000          # messages between two kills
SESSIONS_PER_CLIENT = 4
STALL_SECONDS = 30.0         # no answer at all for this long: the run failed
DRAIN_SECONDS = 20.0         # at the end, for the last answers
SETTLE_SECONDS = 15.0        # at the end, for fds and workers to be back
ORPHAN_MESSAGE = "stdio_bus: worker exited"


def read_rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for pid {pid}")


def count_fds(pid):
    return len(os.listdir(f"/proc/{pid}/fd"))


def parent_of(pid):
    """The ppid of pid, or None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except OSError:
        return None
    # The command name may hold spaces and parentheses: split after the last ')'.
    return int(stat[stat.rindex(")") + 2:].split()[1])


def children_of(pid):
    kids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and parent_of(int(entry)) == pid:
            kids.append(int(entry))
    return kids


class Violation(Exception):
    pass


class Client:
    """One connection. `outstanding` maps request id -> (sent_at, sessionId)."""

    def __init__(self, soak, uid, long_lived, quota=0, leave_early=False):
        self.soak = soak
        self.uid = uid
        self.long_lived = long_lived
        self.quota = quota              # short-lived: requests to send
        self.leave_early = leave_early  # short-lived: close with requests in flight
        self.sent = 0
        self.next_id = 1
        self.outstanding = {}
        self.session_pid = {}
        self.rbuf = b""
        self.wbuf = bytearray()
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(soak.socket_path)
        self.sock.setblocking(False)
        self.closed = False

    def queue_request(self):
        n = self.next_id
        self.next_id += 1
        # Long-lived clients all count 1, 2, 3...: the same ids in flight
        # from several clients (SB-I-3). Short-lived ones use ids no other
        # client uses, unless --reuse-ids: then a late answer to one that
        # left meets a newcomer that reused its id (SB-I-23).
        if self.long_lived or self.soak.args.reuse_ids:
            rid = n
        else:
            rid = f"t{self.uid}-{n}"
        session = None
        if self.long_lived and n % 2 == 0:
            session = f'"c{self.uid}-s{(n // 2) % SESSIONS_PER_CLIENT}"'
        elif not self.long_lived and n == 1:
            session = f'"t{self.uid}"'
        tail = f',"sessionId":{session}' if session else ""
        self.wbuf += (f'{{"jsonrpc":"2.0","id":{json.dumps(rid)},"method":"soak/echo",'
                      f'"params":{{"c":{self.uid},"n":{n}}}{tail}}}\n').encode()
        self.outstanding[rid] = (time.monotonic(), session, n)
        self.sent += 1
        self.soak.sent += 1

    def flush(self):
        while self.wbuf:
            try:
                n = self.sock.send(self.wbuf)
            except BlockingIOError:
                return
            del self.wbuf[:n]

    def read(self):
        """Reads what is there; returns the complete lines, b"" entries never."""
        try:
            chunk = self.sock.recv(1 << 18)
        except BlockingIOError:
            return []
        except ConnectionResetError:
            chunk = b""
        if not chunk:
            raise Violation(f"client {self.uid}: the daemon closed the connection")
        self.rbuf += chunk
        *lines, self.rbuf = self.rbuf.split(b"\n")
        return lines

    def close(self):
        if not self.closed:
            self.closed = True
            self.sock.close()


class Soak:
    def __init__(self, args, workdir):
        self.args = args
        self.workdir = workdir
        self.socket_path = os.path.join(workdir, "bus.sock")
        self.daemon = None
        self.sel = selectors.DefaultSelector()
        self.clients = []
        self.next_uid = 0
        self.sent = 0
        self.answered = 0
        self.orphaned = 0
        self.left_in_flight = 0       # requests abandoned by short-lived clients
        self.short_done = 0
        self.other_errors = collections.Counter()
        self.killed = set()
        self.kill_times = []
        self.recent_pids = collections.OrderedDict()  # pid -> None, most recent last
        self.last_answer = time.monotonic()
        self.unanswered_excused = 0
        self.lost = 0

    # -- the daemon ---------------------------------------------------------

    def start_daemon(self):
        build = self.args.build_dir
        binary = os.path.join(build, "stdio_bus")
        worker = os.path.join(build, "mock_workers", "mock_worker")
        for path in (binary, worker):
            if not os.access(path, os.X_OK):
                raise FileNotFoundError(f"{path}: not built")
        config = {
            "pools": [{"id": "echo", "command": os.path.abspath(worker), "instances": WORKERS}],
            "limits": {"restart_backoff_ms": 50, "restart_backoff_max_ms": 50,
                       "max_restarts": 10000, "restart_window_sec": 1},
            "orphan_policy": "error",
        }
        config_path = os.path.join(self.workdir, "config.json")
        with open(config_path, "w") as f:
            json.dump(config, f)
        self.stderr_path = os.path.join(self.workdir, "daemon.stderr")
        self.stderr_file = open(self.stderr_path, "wb")
        self.daemon = subprocess.Popen(
            [binary, "--config", config_path, "--unix", self.socket_path,
             "--log-level", "warn"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=self.stderr_file)
        # Ready once the socket accepts and every worker is running.
        deadline = time.monotonic() + 10
        while True:
            if self.daemon.poll() is not None:
                raise Violation(f"daemon exited at start with {self.daemon.returncode}")
            if os.path.exists(self.socket_path) and len(children_of(self.daemon.pid)) == WORKERS:
                try:
                    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                    probe.connect(self.socket_path)
                    probe.close()
                    return
                except OSError:
                    pass
            if time.monotonic() > deadline:
                raise Violation("daemon not ready within 10 s")
            time.sleep(0.02)  # polling /proc: there is no event to wait on

    def stop_daemon(self):
        if self.daemon is None or self.daemon.poll() is not None:
            return self.daemon.returncode if self.daemon else None
        self.daemon.send_signal(signal.SIGTERM)
        try:
            return self.daemon.wait(timeout=40)
        except subprocess.TimeoutExpired:
            self.daemon.kill()
            self.daemon.wait()
            return None

    def check_daemon_alive(self):
        if self.daemon.poll() is not None:
            raise Violation(f"daemon exited with {self.daemon.returncode} during the run")

    # -- clients ----------------------------------------------------------------

    def add_client(self, **kw):
        client = Client(self, self.next_uid, **kw)
        self.next_uid += 1
        self.clients.append(client)
        self.sel.register(client.sock, selectors.EVENT_READ, client)
        return client

    def drop_client(self, client):
        if not client.closed:
            self.sel.unregister(client.sock)
            client.close()
        self.clients.remove(client)

    def update_interest(self, client):
        if client.closed:
            return
        events = selectors.EVENT_READ | (selectors.EVENT_WRITE if client.wbuf else 0)
        self.sel.modify(client.sock, events, client)

    def on_line(self, client, line):
        try:
            msg = json.loads(line)
        except ValueError:
            raise Violation(f"client {client.uid}: not JSON: {line[:200]!r}")
        rid = msg.get("id")
        if rid not in client.outstanding:
            raise Violation(f"client {client.uid}: answer for no request of ours: {line[:300]!r}")
        _, session, n = client.outstanding.pop(rid)
        self.answered += 1
        self.last_answer = time.monotonic()
        got_session = json.dumps(msg["sessionId"]) if "sessionId" in msg else None
        if got_session != session:
            raise Violation(f"client {client.uid}: sessionId {got_session} for a request in "
                            f"{session}: {line[:300]!r}")
        if "error" in msg:
            message = msg["error"].get("message")
            if message == ORPHAN_MESSAGE:
                self.orphaned += 1
            else:
                self.other_errors[message] += 1
                raise Violation(f"client {client.uid}: unexpected error reply: {line[:300]!r}")
            return
        result = msg["result"]
        params = result.get("params") or {}
        if params.get("c") != client.uid or params.get("n") != n:
            raise Violation(f"client {client.uid}: answer to another client's request "
                            f"(params {params}): {line[:300]!r}")
        pid = result["pid"]
        if pid not in self.killed:
            self.recent_pids.pop(pid, None)
            self.recent_pids[pid] = None
            if len(self.recent_pids) > 64:
                self.recent_pids.popitem(last=False)
        if session is not None:
            before = client.session_pid.get(session)
            # SB-6.1.2-2: a session moves only when its worker is gone.
            if before is not None and before != pid and before not in self.killed:
                raise Violation(f"client {client.uid}: session {session} moved from worker "
                                f"pid {before} (never killed) to pid {pid}")
            client.session_pid[session] = pid

    def pump(self, timeout):
        """One round of I/O. Returns False if nothing happened."""
        events = self.sel.select(timeout)
        for key, mask in events:
            client = key.data
            if client.closed:
                continue
            if mask & selectors.EVENT_WRITE:
                client.flush()
            if mask & selectors.EVENT_READ:
                for line in client.read():
                    self.on_line(client, line)
            self.update_interest(client)
        return bool(events)

    def top_up(self, sending):
        """Long-lived clients refill to IN_FLIGHT; short-lived ones come and go."""
        for client in list(self.clients):
            if client.long_lived:
                while sending and len(client.outstanding) < IN_FLIGHT and self.sent < self.goal:
                    client.queue_request()
                    self.maybe_kill()
            else:
                if client.sent < client.quota and sending and self.sent < self.goal:
                    while client.sent < client.quota and self.sent < self.goal:
                        client.queue_request()
                        self.maybe_kill()
                    if client.leave_early:
                        client.flush()  # the requests reach the daemon, the answers will not
                elif client.leave_early and not client.wbuf:
                    self.left_in_flight += len(client.outstanding)
                    self.short_done += 1
                    self.drop_client(client)
                    continue
                elif not client.outstanding and not client.wbuf:
                    self.short_done += 1
                    self.drop_client(client)
                    continue
            client.flush()
            self.update_interest(client)
        if sending and self.churn:
            shorts = sum(1 for c in self.clients if not c.long_lived)
            for _ in range(SHORT_CLIENTS - shorts):
                if self.sent >= self.goal:
                    break
                self.add_client(long_lived=False, quota=self.rng.randint(1, 8),
                                leave_early=self.rng.random() < 0.3)

    def maybe_kill(self):
        if not self.kills_on or self.sent % KILL_EVERY:
            return
        for pid in reversed(self.recent_pids):
            if pid in self.killed:
                continue
            # Only ever a worker of ours: the pid's parent must be the daemon.
            if parent_of(pid) != self.daemon.pid:
                continue
            os.kill(pid, signal.SIGKILL)
            self.killed.add(pid)
            self.kill_times.append(time.monotonic())
            del self.recent_pids[pid]
            return
        print(f"soak: no live worker pid known at message {self.sent}; no kill", file=sys.stderr)

    def run_until(self, done, sending, deadline_s, what, give_up_ok=None):
        """Runs the traffic until done(). On a stall or at the deadline it
        fails, unless give_up_ok() says what is missing may be missing."""
        deadline = time.monotonic() + deadline_s
        while not done():
            self.top_up(sending)
            if done():
                break
            if not self.pump(0.5):
                self.check_daemon_alive()
            outstanding = sum(len(c.outstanding) for c in self.clients)
            stalled = outstanding and time.monotonic() - self.last_answer > STALL_SECONDS
            if (stalled or time.monotonic() > deadline) and give_up_ok and give_up_ok():
                return
            if stalled:
                raise Violation(f"{what}: no answer for {STALL_SECONDS:.0f} s with "
                                f"{outstanding} request(s) waiting")
            if time.monotonic() > deadline:
                raise Violation(f"{what}: not done within {deadline_s:.0f} s")
            if self.progress_every and self.sent >= self.next_progress:
                rate = self.sent / max(time.monotonic() - self.t0, 1e-6)
                print(f"soak: {self.sent} sent, {self.answered} answered, "
                      f"{len(self.killed)} kill(s), {rate:,.0f} msg/s", file=sys.stderr)
                self.next_progress += self.progress_every

    def wait_settled(self, fds_expected):
        """Waits until every worker runs again and the fd count is back."""
        deadline = time.monotonic() + SETTLE_SECONDS
        while True:
            self.check_daemon_alive()
            kids = children_of(self.daemon.pid)
            fds = count_fds(self.daemon.pid)
            if len(kids) == WORKERS and fds == fds_expected:
                return fds
            if time.monotonic() > deadline:
                return fds  # judged by the caller
            self.pump(0.05)  # keeps reading answers; polling /proc has no event

    def run(self):
        args = self.args
        self.goal = args.messages
        self.rng = random.Random(args.seed)
        self.churn = False
        self.kills_on = False
        self.progress_every = max(args.messages // 10, 1)
        self.next_progress = self.progress_every
        self.t0 = time.monotonic()
        self.start_daemon()
        for _ in range(LONG_CLIENTS):
            self.add_client(long_lived=True)

        # Warm-up: long-lived clients only, until every answer is in.
        warmup = min(20_000, max(args.messages // 10, IN_FLIGHT * LONG_CLIENTS))
        self.goal = warmup
        self.run_until(lambda: self.sent >= self.goal, True, args.timeout, "warm-up")
        self.run_until(lambda: self.outstanding_long() == 0, False, DRAIN_SECONDS, "warm-up drain")
        rss_start = read_rss_kib(self.daemon.pid)
        fds_start = count_fds(self.daemon.pid)

        # The soak proper.
        self.goal = args.messages
        self.churn = True
        self.kills_on = True
        remaining = args.timeout - (time.monotonic() - self.t0)
        self.run_until(lambda: self.sent >= self.goal, True, remaining, "soak")

        # Drain: long-lived clients get their last answers; short-lived ones
        # finish as they planned.
        self.run_until(lambda: all(not c.outstanding for c in self.clients if c.long_lived)
                       and not any(not c.long_lived for c in self.clients),
                       False, DRAIN_SECONDS + STALL_SECONDS, "drain",
                       give_up_ok=lambda: self.unanswered()[1] == 0)
        elapsed = time.monotonic() - self.t0
        fds_end = self.wait_settled(fds_start)
        rss_end = read_rss_kib(self.daemon.pid)
        return rss_start, rss_end, fds_start, fds_end, elapsed

    def outstanding_long(self):
        return sum(len(c.outstanding) for c in self.clients if c.long_lived)

    def unanswered(self):
        """(excused, lost): requests of clients that stay, still unanswered;
        excused if a worker was killed while they were in flight."""
        excused = lost = 0
        for client in self.clients:
            if not client.long_lived and client.leave_early:
                continue
            for sent_at, _, _ in client.outstanding.values():
                if any(t >= sent_at for t in self.kill_times):
                    excused += 1
                else:
                    lost += 1
        return excused, lost

    def account_unanswered(self):
        self.unanswered_excused, self.lost = self.unanswered()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--build-dir", default="build")
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--timeout", type=float, default=1800.0,
                        help="seconds for the whole run (default 1800)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--reuse-ids", action="store_true",
                        help="short-lived clients number their ids 1, 2, ... like "
                             "long-lived ones (checks SB-I-23 under id reuse)")
    args = parser.parse_args()
    if args.messages < 1:
        parser.error("--messages must be >= 1")

    workdir = tempfile.mkdtemp(prefix="sb-soak-")
    soak = Soak(args, workdir)
    failures = []
    figures = None
    try:
        figures = soak.run()
    except FileNotFoundError as e:
        print(f"soak: {e}", file=sys.stderr)
        return 2
    except Violation as e:
        failures.append(str(e))
    finally:
        soak.account_unanswered()
        for client in list(soak.clients):
            soak.drop_client(client)
        exit_code = soak.stop_daemon()

    if figures and soak.lost:  # an aborted run leaves requests waiting anyway
        failures.append(f"{soak.lost} request(s) never answered though no worker died "
                        "while they were in flight")
    if figures:
        rss_start, rss_end, fds_start, fds_end, elapsed = figures
        if rss_end > rss_start * 1.10 + 1024:
            failures.append(f"RSS grew from {rss_start} KiB to {rss_end} KiB")
        if fds_end != fds_start:
            failures.append(f"open fds {fds_start} at the start, {fds_end} at the end")
    if exit_code != 0:
        failures.append(f"daemon exit status {exit_code} after SIGTERM")
    if failures:
        try:
            with open(soak.stderr_path, "rb") as f:
                tail = f.read()[-3000:].decode(errors="replace")
            print(f"soak: daemon stderr (last lines):\n{tail}", file=sys.stderr)
        except (OSError, AttributeError):
            pass

    lost = (f"lost={soak.lost} unanswered_excused={soak.unanswered_excused}" if figures
            else "lost=n/a")  # an aborted run leaves requests waiting anyway
    summary = (f"messages={soak.sent} answered={soak.answered} orphaned={soak.orphaned} "
               f"{lost} "
               f"abandoned={soak.left_in_flight} kills={len(soak.killed)} "
               f"clients={soak.next_uid} short_lived_done={soak.short_done}")
    if figures:
        rss_start, rss_end, fds_start, fds_end, elapsed = figures
        summary += (f" rss_start={rss_start}KiB rss_end={rss_end}KiB "
                    f"rss_delta={rss_end - rss_start:+d}KiB "
                    f"({(rss_end - rss_start) * 100.0 / rss_start:+.1f}%) "
                    f"fds_start={fds_start} fds_end={fds_end} fds_delta={fds_end - fds_start:+d} "
                    f"elapsed={elapsed:.1f}s rate={soak.sent / elapsed:,.0f}msg/s")
    for failure in failures:
        print(f"soak: FAIL: {failure}", file=sys.stderr)
    print(f"soak: {'FAIL' if failures else 'PASS'} {summary}")
    if not failures:
        import shutil
        shutil.rmtree(workdir, ignore_errors=True)
    else:
        print(f"soak: kept {workdir} (config, daemon.stderr)", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
