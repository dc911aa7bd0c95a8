"""Launching the daemon under test in one mode, waiting until it is ready,
and watching its exit; its clients. What it writes (stderr, socket-mode
stdout) and the log queries are streams.py's: a DaemonStreams, `d.streams`,
is a part of each Daemon.

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
  stream is over (streams.py).
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path

from ..common import procinfo
from .client import DEFAULT_TIMEOUT, SocketClient, StdioClient
from ..common.errors import DaemonCrashed, DaemonExited, DaemonTimeout, HarnessError, NeverComes
from . import config, evidence, ports
from .ports import PortLease
from .profile import Profile
from .streams import LATE_LINE, DaemonStreams
from ..common.transcript import Recorder

PROBE_KEEP = 1 << 20     # bytes read from a readiness probe before the harness stops waiting for its close
SETTLE = 2.0              # s to wait for the exit status of a daemon seen dying
EXIT_POLL = 0.05          # s between two looks at a daemon asked to exit (its children come from /proc)
SHUTDOWN_SIGNALS = (signal.SIGTERM, signal.SIGINT)  # 10.1: the seed's shutdown triggers


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


def _asked_of_streams(name: str) -> property:
    """A query of the daemon's streams that tests ask of the daemon itself
    (`d.wait_logged(...)`, `d.stderr_total`): the streams' own method or
    value, unchanged."""
    return property(lambda self: getattr(self.streams, name), doc=f"DaemonStreams.{name} (streams.py)")


class Daemon:
    """One running daemon process: its launch, readiness, clients, signals
    and exit. Created and started by Bus.start(). What it writes is
    `self.streams` (streams.py); the log queries tests use are asked of the
    daemon and answered by its streams (the end of the class)."""

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
        # what it writes; a stream wait ends on its exit (the event is replaced at a relaunch)
        self.streams = DaemonStreams(recorder=recorder, timeout=timeout, exited=lambda: self._exited.is_set(),
                                     check=self.check, status=lambda: describe_status(self.returncode))
        self._stdio_client: StdioClient | None = None
        self._port_lease: PortLease | None = None  # tcp mode: the port, ours until finish()
        self._clients: list = []
        self._nclients = 0
        self.on_signal = None       # called with a signal before the harness sends it (preflight blocking)
        self.on_stdin_close = None  # called before the harness closes the stdio client's stdin
        self.on_flood = None        # called before a client sends more than a pipe holds, unanswered

    # -- start ---------------------------------------------------------------
    def start(self) -> "Daemon":
        for attempt in range(3):
            if self.mode == "tcp":
                self._lease_port()
            self._launch()
            try:
                self._wait_ready()
                return self
            except DaemonCrashed:
                raise
            except DaemonExited:
                # The port we leased may have been taken between our probe and
                # the daemon's bind by something that does not lease (ports.py):
                # retry on another.
                if self.mode == "tcp" and attempt < 2 and not ports.bindable(self.host, self.port):
                    self.recorder.note(f"port {self.port} was taken by someone else; retrying")
                    self._reset_for_relaunch()
                    continue
                self.exit_expected = True  # the test learns of the exit from this exception
                raise
        raise AssertionError("unreachable")

    def _lease_port(self) -> None:
        if self._port_lease is not None:
            self._port_lease.release()
        self._port_lease = PortLease(self.host)
        self.port = self._port_lease.port

    def _reset_for_relaunch(self):
        """Forgets the launch that failed: its streams, its exit, its signals."""
        self.streams.join(2)
        if self._stdio_client is not None:
            self._stdio_client.close()
            self._stdio_client.join_reader()
        self._close_stdin(self.proc)
        self.streams.reset()
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
        self.streams.capture_stderr(self.proc.stderr)
        if self.mode == "stdio":
            self._stdio_client = StdioClient("client#1", self.recorder, self.proc.stdin,
                                             self.proc.stdout, self.timeout, watch=self._client_watch)
            self._stdio_client.on_close = self._stdin_closing  # end of stdin ends stdio mode (SB-I-5)
            self._stdio_client.before_flood = self._flooding
            self._clients.append(self._stdio_client)
        else:
            self.streams.capture_stdout(self.proc.stdout)
        t = threading.Thread(target=self._watch_exit, args=(self.proc, self._exited),
                             name="sb-daemon-exit", daemon=True)
        t.start()

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
        self.streams.wake()
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
            raise DaemonCrashed(f"the daemon died of {self.crash}{when}{self.streams.tail_note()}", self.crash)
        if not self.exit_expected:
            raise DaemonExited(f"the daemon {describe_status(self.returncode)}{when} "
                               f"(the test did not ask it to exit){self.streams.tail_note()}")

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
            self.streams.wait_ready_line(self.profile.ready_regex, deadline,
                                         lambda: self._check_alive("before printing its ready line"),
                                         self.profile.startup_timeout)

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
            self.streams.join(1)
            if self.crash:
                raise DaemonCrashed(f"the daemon died of {self.crash} {when}{self.streams.tail_note()}", self.crash)
            raise DaemonExited(f"the daemon {describe_status(rc)} {when}; "
                               f"stderr: {self.streams.stderr_text()[-1000:]!r}")

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
        c.before_flood = self._flooding
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

    def _flooding(self) -> None:
        if self.on_flood is not None:
            self.on_flood()

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
        self.streams.await_end()
        if self.crash:
            raise DaemonCrashed(f"the daemon died of {self.crash}{self.streams.tail_note()}", self.crash)
        return self.returncode

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
        self.streams.join(1)
        if self._stdio_client is not None:
            self._stdio_client.join_reader(1)
        self._close_stdin(self.proc)
        if self._port_lease is not None:
            self._port_lease.release()

    @staticmethod
    def _close_stdin(proc) -> None:
        """Closes the daemon's stdin; stdout and stderr are closed by their
        readers when they end (common/reader.py says why)."""
        if proc.stdin is not None:
            with contextlib.suppress(OSError):
                proc.stdin.close()

    # -- the log queries tests ask of the daemon (README: `Daemon`), answered by its streams --
    stderr_mark = _asked_of_streams("stderr_mark")
    stderr_lines = _asked_of_streams("stderr_lines")
    stderr_text = _asked_of_streams("stderr_text")
    stderr_total = _asked_of_streams("stderr_total")
    stdout_bytes = _asked_of_streams("stdout_bytes")
    log_lines = _asked_of_streams("log_lines")
    logged_lines = _asked_of_streams("logged_lines")
    wait_stderr = _asked_of_streams("wait_stderr")
    wait_stderr_line = _asked_of_streams("wait_stderr_line")
    wait_logged = _asked_of_streams("wait_logged")
    wait_caused = _asked_of_streams("wait_caused")
    wait_log = _asked_of_streams("wait_log")
