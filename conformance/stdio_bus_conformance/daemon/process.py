"""Launching the daemon under test in one mode and waiting until it is ready.

Readiness (from the profile): "connect" (unix/tcp: the address accepts a
connection; retried with a short backoff until the startup deadline),
"stderr-regex" (a stderr line matches ready_regex), "none" (at once; stdio
mode is always ready at once). The daemon runs in its own session; what it
leaves behind is found and killed by the bus (contain.py).

Whatever the daemon does, the harness stays bounded and notices at once:

* a watcher thread waits for the daemon's exit (waitid) and wakes every wait
  of the test. A death by a signal the harness did not send is a crash
  (DaemonCrashed, naming the signal) at the next wait, or at teardown when
  the test did not wait again; an exit the test did not expect ends every
  wait with DaemonExited; a stream wait (a stderr line) ends as soon as the
  stream is over.
* stderr is kept as its last STDERR_KEEP bytes (whole lines) with the total
  byte count; stdout in socket modes as its first STDOUT_KEEP bytes.
"""

from __future__ import annotations

import collections
import contextlib
import fcntl
import os
import re
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path

from ..common import procinfo
from ..common.reader import start_reader
from .client import DEFAULT_TIMEOUT, SocketClient, StdioClient
from ..common.errors import DaemonCrashed, DaemonExited, DaemonTimeout, HarnessError, NeverComes
from . import config, evidence, logwords
from .profile import Profile
from ..common.transcript import Recorder

STDERR_KEEP = 1 << 20     # bytes of daemon stderr kept (the last ones)
STDOUT_KEEP = 1 << 20     # bytes of daemon stdout kept in socket modes (the first ones)
PROBE_KEEP = 1 << 20     # bytes read from a readiness probe before the harness stops waiting for its close
SETTLE = 2.0              # s to wait for the exit status of a daemon seen dying
LATE_LINE = 0.25          # s a log wait ended by evidence still waits: a line written before it may be in the pipe
STDERR_AFTER_EXIT = 5.0   # s an exited daemon's stderr may stay open (held by a process it left)
EXIT_POLL = 0.05          # s between two looks at a daemon asked to exit (its children come from /proc)
SHUTDOWN_SIGNALS = (signal.SIGTERM, signal.SIGINT)  # 10.1: the seed's shutdown triggers
STDERR_PIPE = 1 << 20     # bytes the daemon's stderr pipe holds: a daemon that never blocks on its log
                          # drops lines while the pipe is full, and load can slow the reader for seconds
_LEVEL = {"WARN": r"\bWARN(?:ING)?\b", "ERROR": r"\bERROR\b"}  # SB-I-34


def has_level(line: str, level: str) -> bool:
    """True when a log line carries the level word SB-I-34 asks for."""
    return re.search(_LEVEL[level], line, re.I) is not None


def mentions(line: str, about) -> bool:
    """True when `line` mentions one of `about`: a compiled regex (searched),
    or anything else as its text (an int or a pool name as a whole token).
    Empty `about`: every line."""
    if not about:
        return True
    for a in about:
        if isinstance(a, re.Pattern):
            if a.search(line):
                return True
        elif re.search(r"(?<![\w.-])%s(?![\w-])" % re.escape(str(a)), line):
            return True
    return False


def describe_context(about) -> str:
    return " or ".join(a.pattern if isinstance(a, re.Pattern) else repr(str(a)) for a in about)


def worker_context(pid=None, pool=None, index=None) -> list:
    """What identifies one worker in a log line, in any form a daemon may
    choose (seed 5.3 "with Worker context", 3.3 "Worker ID (integer)"): its
    pid, its pool's id, or its integer id in any common spelling
    (`[worker=0]`, `worker 0`, `worker=0`, `worker #0`, `worker_id: 0`,
    `worker[0]`, `w0`). `index` is its position over all pools in
    configuration order; a daemon may count from 0 or from 1, so both are
    accepted. `index` may also be a collection of the positions the worker
    may have (a test that does not know which of a pool's workers it is)."""
    about = []
    if pid is not None:
        about.append(int(pid))
    if pool is not None:
        about.append(str(pool))
    if index is not None:
        positions = [index] if isinstance(index, int) else list(index)
        for n in sorted({int(i) + k for i in positions for k in (0, 1)}):
            about.append(re.compile(r"(?i)\bworker(?:[ _-]?(?:id|no|number|index|idx))?[\"']?\s*[=:#\[( ]?\s*#?%d\b"
                                    r"|\bw#?%d\b" % (n, n)))
    return about


def connection_context(fd=None, port=None, path=None) -> list:
    """What identifies a client connection in a log line (seed 7.3.2 "with
    connection context"): the daemon's fd for it, its peer's TCP port or the
    socket path, or any connection, client, fd or peer number (a daemon may
    number its clients its own way), or stdin/stdio in stdio mode."""
    # a line announcing a new connection (the harness's own probes make
    # some) is never the one about this connection's event
    about = [re.compile(r"(?i)^(?!.*\b(?:connected|accepted|new (?:client|connection))\b)"
                        r"(?=.*\b(?:conn(?:ection)?|client|fd|peer|socket|sock)(?:[ _-]?(?:id|no|number|fd))?[\"']?"
                        r"\s*[=:#\[( ]?\s*#?\d+\b)"),
             re.compile(r"(?i)\bstd(?:in|io)\b")]
    if fd is not None:
        about.append(re.compile(r"(?i)\bfd\s*[=:#\[( ]?\s*%d\b" % int(fd)))
    if port is not None:
        about.append(int(port))
    if path is not None:
        about.append(str(path))
    return about


# What a daemon's line about a client line whose routing fields it could not
# extract says (seed 4.3 "log a warning and close"), in any daemon's words.
MALFORMED_INPUT = re.compile(r"(?i)malformed|\binvalid\b|routing|wrong type|not an? (?:json )?(?:object|string|number)"
                             r"|too long|longer than|exceed|pars(?:e|ing)|reject|extract|bad (?:input|line|message|field)")

# What a daemon's error about a line over max_input_buffer says (seed 7.3.2
# "log an error with connection context"), in any daemon's words: the line
# about the overflow, as opposed to, say, a later line about the disconnect.
INPUT_OVERFLOW = re.compile(r"(?i)too long|longer than|exceed|overflow|max_input_buffer|input buffer|\blimit\b|\btoo (?:big|large)|oversized?\b|\b(?:line|message) size\b|\bmaximum\b")


def free_tcp_port(host: str) -> int:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def _port_in_use(host: str, port: int) -> bool:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        try:
            s.bind((host, port))
        except OSError:
            return True
    return False


def signame(sig: int) -> str:
    try:
        return signal.Signals(sig).name
    except ValueError:
        return f"signal {sig}"


def describe_status(rc: int | None) -> str:
    if rc is None:
        return "still running"
    if rc < 0:
        return f"died of {signame(-rc)}"
    return f"exited with status {rc}"


class Daemon:
    """One running daemon process. Created and started by Bus.start()."""

    def __init__(self, *, profile: Profile, daemon_path: str, mode: str, workdir: Path,
                 config_path: Path, recorder: Recorder, timeout: float = DEFAULT_TIMEOUT,
                 env: dict | None = None):
        self.profile = profile
        self.daemon_path = daemon_path
        self.mode = mode
        self.workdir = Path(workdir)
        self.config_path = Path(config_path)
        self.recorder = recorder
        self.timeout = timeout
        self.extra_env = dict(env or {})
        self.socket_path = str(self.workdir / "bus.sock") if mode == "unix" else None
        self.host = profile.host if mode == "tcp" else None
        self.port: int | None = None
        self.argv: list[str] = []
        self.proc: subprocess.Popen | None = None
        self.returncode: int | None = None
        self.killed = False             # the harness had to SIGKILL it at teardown
        self.tmpdir: Path | None = None  # its private TMPDIR (the bus sets it), looked at after it exits
        self.exit_expected = False      # the test made it exit (signal, end of stdin, wait_exit)
        self.sent_signals: set[int] = set()
        self.ignored_signals: set[int] = set()  # sent while SIG_IGN: discarded by the kernel
        self.crash: str | None = None   # name of the signal it died of, when the harness sent none
        self.crash_phase: str | None = None   # "test" or "teardown"
        self.teardown = False
        self.term_signal = signal.SIGTERM   # what asks it to shut down at teardown (the bus may say SIGINT)
        self.drain_timeout = config.DEFAULT_DRAIN   # its config's drain_timeout_sec (the bus sets it)
        self._shutdown_at: float | None = None  # when the harness last asked it to shut down
        self._signalled_at: float | None = None  # when the harness last sent it a signal
        self._exited = threading.Event()
        self._exit_time = 0.0
        self.cpu_at_exit: float | None = None  # CPU seconds it had used when it exited
        # stderr: whole lines, the last STDERR_KEEP bytes of them, numbered from the first
        self._err_lines: collections.deque[str] = collections.deque()     # decoded
        self._err_raw: collections.deque[bytes] = collections.deque()     # as written
        self._err_kept = 0
        self._err_first = 0             # absolute number of the first kept line
        self._err_total = 0             # bytes written to stderr in all
        self._err_partial = b""
        self._err_eof = False
        self._stdout = bytearray()
        self._stdout_total = 0
        self._cond = threading.Condition()
        self._threads: list[threading.Thread] = []
        self._stdio_client: StdioClient | None = None
        self._clients: list = []
        self._nclients = 0
        self.on_signal = None       # called with a signal before the harness sends it (preflight blocking)
        self.on_stdin_close = None  # called before the harness closes the stdio client's stdin

    # -- start ---------------------------------------------------------------
    def start(self) -> "Daemon":
        for attempt in range(3):
            if self.mode == "tcp":
                self.port = free_tcp_port(self.host)
            self._launch()
            try:
                self._wait_ready()
                return self
            except DaemonCrashed:
                raise
            except DaemonExited:
                # The port we picked may have been taken by a parallel test
                # between our probe and the daemon's bind: retry on another.
                if self.mode == "tcp" and attempt < 2 and _port_in_use(self.host, self.port):
                    self.recorder.note(f"port {self.port} was taken by someone else; retrying")
                    self._reset_streams()
                    continue
                self.exit_expected = True  # the test learns of the exit from this exception
                raise
        raise AssertionError("unreachable")

    def _reset_streams(self):
        for t in self._threads:
            t.join(2)
        if self._stdio_client is not None:
            self._stdio_client.close()
            self._stdio_client.join_reader()
        self._close_pipes(self.proc)
        self._threads.clear()
        with self._cond:
            self._err_lines.clear()
            self._err_raw.clear()
            self._err_kept = self._err_first = self._err_total = 0
            self._err_partial = b""
            self._err_eof = False
            self._stdout.clear()
            self._stdout_total = 0
        self._exited = threading.Event()
        self.crash = self.crash_phase = None
        self.sent_signals.clear()

    def _launch(self) -> None:
        self.argv = self.profile.argv(self.mode, daemon=self.daemon_path, config=self.config_path,
                                      socket=self.socket_path or "", host=self.host or "",
                                      port=self.port or "")
        env = dict(os.environ)
        env.update(self.profile.env)
        env.update(self.extra_env)
        self.recorder.note("start: " + " ".join(self.argv))
        try:
            self.proc = subprocess.Popen(
                self.argv, cwd=self.workdir, env=env, start_new_session=True,
                stdin=subprocess.PIPE if self.mode == "stdio" else subprocess.DEVNULL,
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, bufsize=0)
        except OSError as exc:
            raise HarnessError(f"cannot execute the daemon {self.argv[0]!r}: {exc}") from None
        self.returncode = None
        with contextlib.suppress(OSError):  # above the system's pipe-max-size: the default pipe
            fcntl.fcntl(self.proc.stderr.fileno(), getattr(fcntl, "F_SETPIPE_SZ", 1031), STDERR_PIPE)
        self._spawn_reader(self.proc.stderr.fileno(), self._on_stderr, "stderr")
        if self.mode == "stdio":
            self._stdio_client = StdioClient("client#1", self.recorder, self.proc.stdin,
                                             self.proc.stdout, self.timeout, watch=self._client_watch)
            self._stdio_client.on_close = self._stdin_closing  # end of stdin ends stdio mode (SB-I-5)
            self._clients.append(self._stdio_client)
        else:
            self._spawn_reader(self.proc.stdout.fileno(), self._on_stdout, "stdout")
        t = threading.Thread(target=self._watch_exit, args=(self.proc, self._exited),
                             name="sb-daemon-exit", daemon=True)
        t.start()

    def _spawn_reader(self, fd, sink, what):
        self._threads.append(start_reader(fd, sink, f"sb-daemon-{what}"))

    # -- the exit watcher ------------------------------------------------------
    def _watch_exit(self, proc: subprocess.Popen, exited: threading.Event) -> None:
        """Waits for the daemon's exit without reaping it, then records the
        status and wakes every waiter."""
        try:
            os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOWAIT)
        except ChildProcessError:
            pass  # already reaped by a wait in the test thread
        except OSError:
            return
        with contextlib.suppress(OSError):  # a zombie's stat still holds the CPU it used
            self.cpu_at_exit = procinfo.cpu_time(proc.pid)
        rc = proc.wait()
        if proc is not self.proc:
            return
        self._exit_time = time.monotonic()
        self.returncode = rc
        if rc < 0 and -rc not in self.sent_signals:
            self.crash = signame(-rc)
            self.crash_phase = "teardown" if self.teardown else "test"
            self.recorder.note(f"the daemon died of {self.crash} (a signal the harness did not send)")
        else:
            self.recorder.note(f"daemon {describe_status(rc)}")
        exited.set()
        self._wake_all()

    def _wake_all(self) -> None:
        with self._cond:
            self._cond.notify_all()
        for c in list(self._clients):
            c.wake()

    def _settle(self) -> None:
        """When the daemon is dying (seen from /proc), waits for its status."""
        if not self._exited.is_set() and self.proc is not None and procinfo.exiting(self.proc.pid):
            self._exited.wait(SETTLE)

    @property
    def exited(self) -> bool:
        return self._exited.is_set()

    def check(self, when: str = "") -> None:
        """The watch every wait runs: DaemonCrashed if the daemon died of a
        signal the harness did not send, DaemonExited if it exited and the
        test did not make it exit. `when` completes the message."""
        if not self._exited.is_set():
            return
        when = f" {when}" if when else ""
        if self.crash:
            raise DaemonCrashed(f"the daemon died of {self.crash}{when}{self._stderr_tail()}", self.crash)
        if not self.exit_expected:
            raise DaemonExited(f"the daemon {describe_status(self.returncode)}{when} "
                               f"(the test did not ask it to exit){self._stderr_tail()}")

    def _stderr_tail(self) -> str:
        tail = self.stderr_text()[-300:]
        return f"; stderr ends {tail!r}" if tail else ""

    def _client_watch(self, client, at_eof: bool, closing: bool) -> None:
        """Called by a client on every wake of a wait, and at end of stream.
        closing: the client is waiting for the daemon to close it."""
        if at_eof:
            self._settle()  # an end of stream from a dying daemon is its death, not a close
        if not self._exited.is_set():
            return
        if not at_eof and not self.crash and time.monotonic() - self._exit_time < SETTLE:
            return  # what it wrote before it exited is still on its way: let the reader drain it
        if (closing or at_eof) and self.mode == "stdio" and not self.crash:
            self.exit_expected = True  # in stdio mode closing the one client ends the daemon
        self.check(f"while {client.name} waited")

    def _wait_ready(self) -> None:
        how = self.profile.readiness.get(self.mode, "none")
        deadline = time.monotonic() + self.profile.startup_timeout
        if how == "connect" and self.mode in ("unix", "tcp"):
            delay = 0.001
            while True:
                self._check_alive("before it accepted connections")
                try:
                    with self._raw_socket() as s:
                        s.settimeout(max(0.05, deadline - time.monotonic()))
                        s.connect(self.address)
                        self._wait_probe_closed(s)
                    self.recorder.note(f"ready: {self.address} accepts connections")
                    return
                except OSError:
                    pass
                if time.monotonic() >= deadline:
                    raise DaemonTimeout(f"the daemon did not accept connections on {self.address} "
                                        f"within {self.profile.startup_timeout:g} s")
                self._exited.wait(delay)  # connect retry backoff, bounded by the deadline; ends at an exit
                delay = min(delay * 2, 0.05)
        elif how == "stderr-regex":
            rx = re.compile(self.profile.ready_regex)
            seen = 0
            with self._cond:
                while True:
                    lines, seen = self._lines_since(seen)
                    if any(rx.search(line) for line in lines):
                        return
                    self._check_alive("before printing its ready line")
                    left = deadline - time.monotonic()
                    if left <= 0:
                        raise DaemonTimeout(f"no stderr line matched {self.profile.ready_regex!r} "
                                            f"within {self.profile.startup_timeout:g} s")
                    self._cond.wait(left)  # the exit watcher notifies too

    @staticmethod
    def _wait_probe_closed(s, limit: float = 2.0) -> None:
        """Ends the readiness probe and waits (at most `limit` s) for the daemon
        to close its side, so that the probe no longer counts as a connected
        client when the test starts: a test that opens MAX_CONNECTIONS
        connections at once otherwise races the daemon's noticing the probe's
        EOF. A daemon that keeps a half-closed connection open is not at fault
        here; the wait just ends."""
        s.shutdown(socket.SHUT_WR)
        end = time.monotonic() + limit  # one deadline for the whole drain: a daemon that
        taken = 0                       # floods the probe never closes it
        with contextlib.suppress(OSError):  # the deadline, or a reset: go on
            while taken < PROBE_KEEP:
                left = end - time.monotonic()
                if left <= 0:
                    break
                s.settimeout(left)
                data = s.recv(65536)
                if not data:
                    break
                taken += len(data)

    def _check_alive(self, when: str) -> None:
        if self.proc.poll() is not None or self._exited.is_set():
            self._exited.wait(SETTLE)
            rc = self.proc.returncode
            self.returncode = rc
            for t in self._threads:
                t.join(1)
            if self.crash:
                raise DaemonCrashed(f"the daemon died of {self.crash} {when}{self._stderr_tail()}", self.crash)
            raise DaemonExited(f"the daemon {describe_status(rc)} {when}; "
                               f"stderr: {self.stderr_text()[-1000:]!r}")

    # -- addresses and clients ----------------------------------------------
    @property
    def address(self):
        if self.mode == "unix":
            return self.socket_path
        if self.mode == "tcp":
            return (self.host, self.port)
        return None

    def _raw_socket(self) -> socket.socket:
        if self.mode == "unix":
            return socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        return socket.socket(socket.AF_INET6 if ":" in self.host else socket.AF_INET,
                             socket.SOCK_STREAM)

    def client(self):
        """stdio: the one client (the same object each time); socket modes: a
        new connection."""
        if self.mode == "stdio":
            return self._stdio_client
        self.check("before a client could connect")
        self._nclients += 1
        family = socket.AF_UNIX if self.mode == "unix" else \
            (socket.AF_INET6 if ":" in self.host else socket.AF_INET)
        try:
            c = SocketClient.connect(f"client#{self._nclients}", self.recorder, family,
                                     self.address, self.timeout, watch=self._client_watch)
        except DaemonExited:
            raise
        except Exception:
            self._settle()
            self.check(f"when client#{self._nclients} connected")
            raise
        self._clients.append(c)  # closed at teardown: a long run must not leak fds
        return c

    # -- process -------------------------------------------------------------
    @property
    def pid(self) -> int:
        return self.proc.pid

    def cpu_time(self) -> float:
        """CPU seconds the daemon has used so far (all of them, once it exited)."""
        try:
            return procinfo.cpu_time(self.proc.pid)
        except ProcessLookupError:
            if self.cpu_at_exit is None:
                raise
            return self.cpu_at_exit

    def clients(self) -> list:
        """Every client the harness opened on this daemon (the stdio one too)."""
        return list(self._clients)

    @property
    def running(self) -> bool:
        return self.proc is not None and not self._exited.is_set() and self.proc.poll() is None

    def _stdin_closing(self) -> None:
        if self.on_stdin_close is not None and not self.teardown:
            self.on_stdin_close()
        self.exit_expected = True
        self._shutdown_at = time.monotonic()

    def _draining(self, grace: float) -> bool:
        """True while the daemon may still be inside the shutdown the seed
        grants it (10.2: it waits up to drain_timeout_sec for its workers):
        it was asked to shut down less than drain_timeout_sec + grace ago
        and it still has a child. The harness never kills a daemon then."""
        if self._shutdown_at is None or time.monotonic() >= self._shutdown_at + self.drain_timeout + grace:
            return False
        try:
            return bool(procinfo.live_children(self.proc.pid))
        except OSError:
            return False

    def _await_exit(self, grace: float, bound=None) -> bool:
        """Waits for the exit: grace s, or longer while _draining. bound as
        in wait_exit. True once it exited."""
        deadline = time.monotonic() + grace
        while not self._exited.wait(EXIT_POLL):
            if self._draining(grace):  # its last worker may go only now: grace counts from then
                deadline = max(deadline, time.monotonic() + grace)
            elif time.monotonic() >= deadline:
                return False
            try:
                evidence.run(bound)
            except NeverComes as exc:
                if not self._exited.wait(LATE_LINE):
                    raise NeverComes(f"the daemon will not exit: {exc}") from None
        return True

    def expect_exit(self) -> None:
        """The test is about to make the daemon exit in a way the harness
        cannot see (e.g. a configuration it must reject): its exit is no
        longer a surprise to the waits."""
        self.exit_expected = True

    def signal(self, sig: int) -> None:
        if self.on_signal is not None:
            sig = self.on_signal(sig) or sig  # the bus may send the other shutdown trigger (10.1)
        self.recorder.note(f"harness sends {signame(sig)} to the daemon")
        if sig not in (0, signal.SIGSTOP, signal.SIGCONT, signal.SIGCHLD):
            self.sent_signals.add(int(sig))
            self.exit_expected = True
        self._signalled_at = time.monotonic()
        if sig in SHUTDOWN_SIGNALS:
            self._shutdown_at = self._signalled_at
        self.check("before the harness sent it " + signame(sig))
        try:
            ignored = sig in procinfo.ignored_signals(self.proc.pid)
        except OSError:
            ignored = False
        try:
            os.kill(self.proc.pid, sig)
        except ProcessLookupError:
            raise DaemonExited("the daemon had already exited") from None
        try:  # ignored before and after: the kernel discarded it (evidence.signal_ignored)
            if ignored and sig in procinfo.ignored_signals(self.proc.pid):
                self.ignored_signals.add(int(sig))
                self.recorder.note(f"the daemon ignores {signame(sig)} (SIG_IGN): the kernel discarded it")
        except OSError:
            pass

    def wait_exit(self, timeout: float | None = None, bound=None) -> int:
        """Waits for the daemon to exit; returns its status (negative: killed
        by a signal the harness sent). A death by any other signal is a crash:
        DaemonCrashed. bound (see evidence.py, e.g. signal_ignored) ends the
        wait with NeverComes once the exit cannot come."""
        timeout = self.profile.shutdown_timeout if timeout is None else timeout
        self.exit_expected = True
        if self._shutdown_at is None and self._signalled_at is not None:
            # an exit awaited after another signal (SIGQUIT, SB-I-48) is a shutdown too: the
            # daemon is granted drain_timeout_sec for its workers as after SIGTERM (10.2)
            self._shutdown_at = self._signalled_at
        if not self._await_exit(timeout, bound):
            raise DaemonTimeout(f"the daemon did not exit within {timeout:g} s"
                                + (" (nor within drain_timeout_sec of the shutdown with workers left)"
                                   if self._shutdown_at is not None else ""))
        self._await_stderr_end()
        if self.crash:
            raise DaemonCrashed(f"the daemon died of {self.crash}{self._stderr_tail()}", self.crash)
        return self.returncode

    def _await_stderr_end(self) -> None:
        """After the exit, what the daemon wrote to stderr is read before a test
        looks at it: its stderr ends with it (the event), unless a process it
        left holds the pipe, then STDERR_AFTER_EXIT at most. Under load the
        reader got a dead daemon's last lines seconds after its exit."""
        with self._cond:
            self._cond.wait_for(self._stderr_over, timeout=STDERR_AFTER_EXIT)

    def stop(self, grace: float | None = None) -> dict:
        """Teardown: SIGTERM, wait up to `grace` (default: the profile's
        shutdown_timeout), then SIGKILL. Returns what happened: {status,
        killed, crash, crash_phase, crashed_before_teardown}."""
        if self.proc is None:
            return {}
        grace = self.profile.shutdown_timeout if grace is None else grace
        self._settle()  # a daemon already dying died during the test, not of our SIGTERM
        crashed_before = self.crash
        self.teardown = True
        if not self._exited.is_set() and self.proc.poll() is None:
            self.recorder.note(f"teardown: {signame(self.term_signal)} to the daemon")
            self.sent_signals.add(self.term_signal)
            self.exit_expected = True
            try:
                os.kill(self.proc.pid, self.term_signal)
            except ProcessLookupError:
                pass
            self._shutdown_at = time.monotonic()
            # a daemon still waiting for its workers (10.2) is inside the time the seed grants it
            if not self._await_exit(grace):
                self.recorder.note(f"teardown: daemon still running after {grace:g} s"
                                   + f" (or drain_timeout_sec, {self.drain_timeout:g} s, with workers left)"
                                   + ", SIGKILL")
                self.killed = True
                self.sent_signals.add(signal.SIGKILL)
                with contextlib.suppress(ProcessLookupError):
                    os.kill(self.proc.pid, signal.SIGKILL)
                self._exited.wait(10)
        else:
            self._exited.wait(SETTLE)
        self.returncode = self.proc.poll() if self.returncode is None else self.returncode
        # what it left behind (its workers, if it did not stop them) is the
        # bus's to find and kill (contain.py), then finish() closes the streams
        return {"status": self.returncode, "killed": self.killed, "crash": self.crash,
                "crash_phase": self.crash_phase if self.crash else None,
                "crashed_before_teardown": crashed_before}

    def finish(self) -> None:
        """After stop() and the kill of what the daemon left (which may hold
        its pipes): closes the clients and the pipes, ends the readers."""
        if self.proc is None:
            return
        for c in self._clients:
            c.close()
        for t in self._threads:
            t.join(1)
        if self._stdio_client is not None:
            self._stdio_client.join_reader(1)
        self._close_pipes(self.proc)

    @staticmethod
    def _close_pipes(proc) -> None:
        for f in (proc.stdin, proc.stdout, proc.stderr):
            if f is not None:
                try:
                    f.close()
                except OSError:
                    pass

    # -- output --------------------------------------------------------------
    def _on_stderr(self, data: bytes) -> None:
        if data:
            self.recorder.add("daemon stderr", data)
        with self._cond:
            self._err_total += len(data)
            buf = self._err_partial + data
            if data:
                *lines, self._err_partial = buf.split(b"\n")
                if len(self._err_partial) > STDERR_KEEP:  # a line without end: keep its tail
                    self._err_partial = self._err_partial[-STDERR_KEEP:]
            else:  # EOF: a last unterminated line still counts
                lines, self._err_partial = ([buf] if buf else []), b""
                self._err_eof = True
            for raw in lines:
                self._err_lines.append(raw.decode("utf-8", "backslashreplace"))
                self._err_raw.append(raw)
                self._err_kept += len(raw) + 1
            while self._err_kept > STDERR_KEEP and len(self._err_lines) > 1:
                self._err_lines.popleft()
                self._err_kept -= len(self._err_raw.popleft()) + 1
                self._err_first += 1
            self._cond.notify_all()

    def _on_stdout(self, data: bytes) -> None:
        if data:
            with self._cond:
                self._stdout_total += len(data)
                room = STDOUT_KEEP - len(self._stdout)
                if room > 0:
                    self._stdout += data[:room]
            self.recorder.add("daemon stdout (socket mode)", data)

    def _lines_since(self, mark: int) -> tuple[list[str], int]:
        """(kept lines numbered mark and up, the next mark). Caller holds _cond."""
        start = max(mark, self._err_first) - self._err_first
        lines = list(self._err_lines)[start:] if start else list(self._err_lines)
        return lines, self._err_first + len(self._err_lines)

    @property
    def stderr_total(self) -> int:
        """Bytes the daemon has written to stderr so far (kept or not)."""
        with self._cond:
            return self._err_total

    @property
    def stderr_truncated(self) -> bool:
        with self._cond:
            return self._err_first > 0 or self._err_total > self._err_kept + len(self._err_partial)

    def stderr_mark(self) -> int:
        """The number of the next stderr line: pass it as `since` to see only
        the lines written after this call."""
        with self._cond:
            return self._err_first + len(self._err_lines)

    def stderr_bytes(self) -> bytes:
        """The kept stderr (the last STDERR_KEEP bytes, whole lines)."""
        with self._cond:
            return b"".join(raw + b"\n" for raw in self._err_raw) + self._err_partial

    def stderr_text(self) -> str:
        return self.stderr_bytes().decode("utf-8", "backslashreplace")

    def stderr_lines(self, since: int = 0) -> list[str]:
        """Kept stderr lines; since: a stderr_mark() (absolute line number)."""
        with self._cond:
            return self._lines_since(since)[0]

    def stdout_bytes(self) -> bytes:
        """What the daemon wrote to its stdout in socket modes (should be
        nothing; the first STDOUT_KEEP bytes are kept)."""
        with self._cond:
            return bytes(self._stdout)

    def _stderr_over(self) -> bool:
        """True once no stderr line can come any more. Caller holds _cond."""
        return self._err_eof or (self._exited.is_set() and not any(t.is_alive() for t in self._threads
                                                                    if t.name == "sb-daemon-stderr"))

    def wait_stderr(self, pattern: str, timeout: float | None = None, since: int = 0) -> re.Match:
        """Waits for a stderr line matching the regex pattern (from line
        `since`, a stderr_mark()). Ends with DaemonTimeout at the deadline or
        as soon as the daemon's stderr is closed without a match."""
        rx = re.compile(pattern)
        found = self.wait_stderr_line(lambda line: rx.search(line), timeout, since, f"matched {pattern!r}")
        return found

    def wait_stderr_line(self, predicate, timeout: float | None = None, since: int = 0,
                         what: str = "matched", bound=None):
        """Waits for a stderr line for which predicate is true; returns the
        predicate's value. It ends without one at the deadline, once the
        daemon exited and its stderr is drained, or when bound (see
        evidence.py), run on every look, raises NeverComes: the daemon showed
        that the event the line would report did not happen."""
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        mark = since
        ended = None  # the NeverComes the bound raised: then only LATE_LINE more
        exited_at = None
        with self._cond:
            while True:
                lines, mark = self._lines_since(mark)
                for line in lines:
                    value = predicate(line)
                    if value:
                        return value
                # an exit is judged once its stderr is read to the end: the
                # line may be written just before the exit and read just after
                # (STDERR_AFTER_EXIT at most, if a process it left holds the pipe)
                if self._exited.is_set() and exited_at is None:
                    exited_at = time.monotonic()
                if exited_at is not None and (self._stderr_over() or
                                              time.monotonic() - exited_at >= STDERR_AFTER_EXIT):
                    self.check("while the harness waited for a stderr line")  # _cond is reentrant
                    raise NeverComes(f"no daemon stderr line {what}; the daemon "
                                     f"{describe_status(self.returncode)}")
                if ended is None:
                    try:
                        evidence.run(bound)
                    except NeverComes as exc:
                        # a line the daemon wrote before the evidence may still be in the pipe
                        ended = exc
                        deadline = min(deadline, time.monotonic() + LATE_LINE)
                if ended is not None and time.monotonic() >= deadline:
                    raise NeverComes(f"no daemon stderr line {what}: {ended}")
                left = deadline - time.monotonic()
                if left <= 0:
                    raise DaemonTimeout(f"no daemon stderr line {what} within "
                                        f"{self.timeout if timeout is None else timeout:g} s")
                self._cond.wait(min(left, 0.1) if self._exited.is_set() or bound is not None else left)

    def log_lines(self, level: str, since: int = 0, any_of=()) -> list[str]:
        """The daemon's stderr lines at `level` ("WARN" or "ERROR", as SB-I-34
        defines them), from stderr_mark() `since` on, that name one of any_of.
        Worker stderr the daemon relays (the mock's diagnostics start with
        'mock_worker[') is not the daemon's own log."""
        rx = re.compile(_LEVEL[level], re.I)
        return [line for line in self.stderr_lines(since)
                if rx.search(line) and "mock_worker[" not in line and mentions(line, any_of)]

    def in_its_words(self, about) -> list:
        """`about` (see `mentions`) and the identifiers the daemon itself has
        used so far in lines that mention it (logwords.aliases: its own
        number for a worker's pipe or a client's connection)."""
        if not about:
            return list(about)
        return list(about) + logwords.aliases(self.stderr_lines(), lambda line: mentions(line, about))

    def logged_lines(self, about=(), since: int = 0) -> list[str]:
        """The daemon's own stderr lines from stderr_mark() `since` on that
        mention one of `about` (see `mentions`, and `in_its_words`); every
        such line when `about` is empty. No level word is required: a MUST
        "log a warning/error" is met by any line the check can tie to its
        event, and the level word is SB-I-34's alone (see `has_level`)."""
        about = self.in_its_words(about)
        return [line for line in self.stderr_lines(since)
                if "mock_worker[" not in line and mentions(line, about)]

    def wait_logged(self, about=(), since: int = 0, timeout: float | None = None, what: str = "",
                    bound=None, saying: re.Pattern | None = None) -> str:
        """Waits for a daemon stderr line (not relayed worker stderr) that
        mentions one of `about` (any line when empty), and that `saying`
        matches when given (what the event is, e.g. INPUT_OVERFLOW); returns it.
        A line naming it in the daemon's own terms counts (in_its_words)."""
        words = self.in_its_words(about)

        def match(line):
            return line if ("mock_worker[" not in line and mentions(line, words)
                            and (saying is None or saying.search(line))) else None
        desc = what or ("mentioning " + describe_context(about) if about else "at all")
        return self.wait_stderr_line(match, timeout, since, desc, bound)

    def wait_caused(self, control: int, since: int, about=(), timeout: float | None = None,
                    what: str = "") -> str:
        """Waits for a daemon stderr line the event caused, in any words
        (logwords.caused): written from mark `since` on (taken before the
        event, which a sync follows), either mentioning one of `about` or of
        a shape no line had from mark `control` to `since` (the same sync
        alone, before). Returns it."""
        with self._cond:
            lines, _ = self._lines_since(control)
        before = lines[:max(0, since - max(control, self._err_first))]

        def match(line):
            if "mock_worker[" in line:
                return None
            return line if (about and mentions(line, about)) or logwords.caused([line], before) else None
        return self.wait_stderr_line(match, timeout, since, what or "caused by the event, in any words")

    def wait_log(self, level: str, any_of=(), since: int = 0, timeout: float | None = None,
                 bound=None) -> str:
        """Waits for a daemon stderr line at `level` (SB-I-34) mentioning one
        of any_of (see `mentions`); returns it. Only for checks judged by an
        interpretation: a spec clause's "log a warning/error" is
        `wait_logged`, without a level word."""
        rx = re.compile(_LEVEL[level], re.I)

        def match(line):
            return line if (rx.search(line) and "mock_worker[" not in line and mentions(line, any_of)) else None
        what = f"at level {level}" + (f" mentioning {describe_context(any_of)}" if any_of else "")
        return self.wait_stderr_line(match, timeout, since, what, bound)
