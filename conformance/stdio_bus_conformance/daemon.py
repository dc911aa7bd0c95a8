"""Launching the daemon under test in one mode and waiting until it is ready.

Readiness (from the profile): "connect" (unix/tcp: the address accepts a
connection; retried with a short backoff until the startup deadline),
"stderr-regex" (a stderr line matches ready_regex), "none" (at once; stdio
mode is always ready at once). The daemon runs in its own process group so
workers it leaks can be killed at teardown.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path

from .client import DEFAULT_TIMEOUT, SocketClient, StdioClient
from .errors import DaemonExited, DaemonTimeout, HarnessError
from .profile import Profile
from .transcript import Recorder


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


class Daemon:
    """One running daemon process. Created and started by Bus.start()."""

    def __init__(self, *, profile: Profile, daemon_path: str, mode: str, workdir: Path,
                 config_path: Path, recorder: Recorder, timeout: float = DEFAULT_TIMEOUT):
        self.profile = profile
        self.daemon_path = daemon_path
        self.mode = mode
        self.workdir = Path(workdir)
        self.config_path = Path(config_path)
        self.recorder = recorder
        self.timeout = timeout
        self.socket_path = str(self.workdir / "bus.sock") if mode == "unix" else None
        self.host = profile.host if mode == "tcp" else None
        self.port: int | None = None
        self.argv: list[str] = []
        self.proc: subprocess.Popen | None = None
        self.returncode: int | None = None
        self.killed = False
        self._stderr = bytearray()
        self._stderr_lines: list[str] = []
        self._stderr_partial = b""
        self._stdout = bytearray()
        self._cond = threading.Condition()
        self._threads: list[threading.Thread] = []
        self._stdio_client: StdioClient | None = None
        self._clients: list[SocketClient] = []
        self._nclients = 0

    # -- start ---------------------------------------------------------------
    def start(self) -> "Daemon":
        for attempt in range(3):
            if self.mode == "tcp":
                self.port = free_tcp_port(self.host)
            self._launch()
            try:
                self._wait_ready()
                return self
            except DaemonExited:
                # The port we picked may have been taken by a parallel test
                # between our probe and the daemon's bind: retry on another.
                if self.mode == "tcp" and attempt < 2 and _port_in_use(self.host, self.port):
                    self.recorder.note(f"port {self.port} was taken by someone else; retrying")
                    self._reset_streams()
                    continue
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
        self._stderr.clear()
        self._stderr_lines.clear()
        self._stderr_partial = b""
        self._stdout.clear()

    def _launch(self) -> None:
        self.argv = self.profile.argv(self.mode, daemon=self.daemon_path, config=self.config_path,
                                      socket=self.socket_path or "", host=self.host or "",
                                      port=self.port or "")
        env = dict(os.environ)
        env.update(self.profile.env)
        self.recorder.note("start: " + " ".join(self.argv))
        try:
            self.proc = subprocess.Popen(
                self.argv, cwd=self.workdir, env=env, start_new_session=True,
                stdin=subprocess.PIPE if self.mode == "stdio" else subprocess.DEVNULL,
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, bufsize=0)
        except OSError as exc:
            raise HarnessError(f"cannot execute the daemon {self.argv[0]!r}: {exc}") from None
        self.returncode = None
        self._spawn_reader(self.proc.stderr.fileno(), self._on_stderr, "stderr")
        if self.mode == "stdio":
            self._stdio_client = StdioClient("client#1", self.recorder, self.proc.stdin,
                                             self.proc.stdout, self.timeout)
        else:
            self._spawn_reader(self.proc.stdout.fileno(), self._on_stdout, "stdout")

    def _spawn_reader(self, fd, sink, what):
        def loop():
            while True:
                try:
                    data = os.read(fd, 65536)
                except OSError:
                    data = b""
                sink(data)
                if not data:
                    return
        t = threading.Thread(target=loop, name=f"sb-daemon-{what}", daemon=True)
        t.start()
        self._threads.append(t)

    def _on_stderr(self, data: bytes) -> None:
        with self._cond:
            self._stderr += data
            buf = self._stderr_partial + data
            if data:
                *lines, self._stderr_partial = buf.split(b"\n")
            else:  # EOF: a last unterminated line still counts
                lines, self._stderr_partial = ([buf] if buf else []), b""
            for raw in lines:
                self._stderr_lines.append(raw.decode("utf-8", "backslashreplace"))
                self.recorder.add("daemon stderr", raw + b"\n")
            self._cond.notify_all()

    def _on_stdout(self, data: bytes) -> None:
        if data:
            with self._cond:
                self._stdout += data
            self.recorder.add("daemon stdout (socket mode)", data)

    @staticmethod
    def _wait_probe_closed(s, limit: float = 2.0) -> None:
        """Ends the readiness probe and waits (at most `limit` s) for the daemon
        to close its side, so that the probe no longer counts as a connected
        client when the test starts: a test that opens MAX_CONNECTIONS
        connections at once otherwise races the daemon's noticing the probe's
        EOF. A daemon that keeps a half-closed connection open is not at fault
        here; the wait just ends."""
        s.shutdown(socket.SHUT_WR)
        s.settimeout(limit)
        with contextlib.suppress(OSError):  # the deadline, or a reset: go on
            data = s.recv(4096)
            while data:
                data = s.recv(4096)

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
                time.sleep(delay)  # connect retry backoff, bounded by the deadline
                delay = min(delay * 2, 0.05)
        elif how == "stderr-regex":
            rx = re.compile(self.profile.ready_regex)
            with self._cond:
                while not any(rx.search(l) for l in self._stderr_lines):
                    self._check_alive("before printing its ready line")
                    left = deadline - time.monotonic()
                    if left <= 0:
                        raise DaemonTimeout(f"no stderr line matched {self.profile.ready_regex!r} "
                                            f"within {self.profile.startup_timeout:g} s")
                    # a process exit does not notify the condition: bound each wait
                    self._cond.wait(min(left, 0.05))

    def _check_alive(self, when: str) -> None:
        if self.proc.poll() is not None:
            self.returncode = self.proc.returncode
            for t in self._threads:
                t.join(1)
            raise DaemonExited(f"the daemon exited with status {self.proc.returncode} {when}; "
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
        self._nclients += 1
        family = socket.AF_UNIX if self.mode == "unix" else \
            (socket.AF_INET6 if ":" in self.host else socket.AF_INET)
        c = SocketClient.connect(f"client#{self._nclients}", self.recorder, family,
                                 self.address, self.timeout)
        self._clients.append(c)  # closed at teardown: a long run must not leak fds
        return c

    # -- process -------------------------------------------------------------
    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def signal(self, sig: int) -> None:
        self.recorder.note(f"harness sends {signal.Signals(sig).name} to the daemon")
        try:
            os.kill(self.proc.pid, sig)
        except ProcessLookupError:
            raise DaemonExited("the daemon had already exited") from None

    def wait_exit(self, timeout: float | None = None) -> int:
        """Waits for the daemon to exit; returns its status (negative: signal)."""
        timeout = self.profile.shutdown_timeout if timeout is None else timeout
        try:
            self.returncode = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            raise DaemonTimeout(f"the daemon did not exit within {timeout:g} s") from None
        self.recorder.note(f"daemon exited with status {self.returncode}")
        return self.returncode

    def stop(self) -> int | None:
        """Teardown: SIGTERM, wait up to the profile's shutdown_timeout, then
        SIGKILL; then kill whatever is left in the daemon's process group."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.recorder.note("teardown: SIGTERM to the daemon")
            try:
                os.kill(self.proc.pid, signal.SIGTERM)
                self.returncode = self.proc.wait(self.profile.shutdown_timeout)
            except subprocess.TimeoutExpired:
                self.recorder.note("teardown: daemon still running, SIGKILL")
                self.killed = True
                self.proc.kill()
                self.returncode = self.proc.wait()
            except ProcessLookupError:
                self.returncode = self.proc.wait()
        else:
            self.returncode = self.proc.returncode
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)  # our own group: leftover workers
        except (ProcessLookupError, PermissionError):
            pass
        for t in self._threads:
            t.join(2)
        for c in self._clients:
            c.close()
        if self._stdio_client is not None:
            self._stdio_client.close()
            self._stdio_client.join_reader()
        self._close_pipes(self.proc)
        return self.returncode

    @staticmethod
    def _close_pipes(proc) -> None:
        for f in (proc.stdin, proc.stdout, proc.stderr):
            if f is not None:
                try:
                    f.close()
                except OSError:
                    pass

    # -- output --------------------------------------------------------------
    def stderr_bytes(self) -> bytes:
        with self._cond:
            return bytes(self._stderr)

    def stderr_text(self) -> str:
        return self.stderr_bytes().decode("utf-8", "backslashreplace")

    def stderr_lines(self) -> list[str]:
        with self._cond:
            return list(self._stderr_lines)

    def stdout_bytes(self) -> bytes:
        """What the daemon wrote to its stdout in socket modes (should be nothing)."""
        with self._cond:
            return bytes(self._stdout)

    def wait_stderr(self, pattern: str, timeout: float | None = None) -> re.Match:
        """Waits for a stderr line matching the regex pattern."""
        rx = re.compile(pattern)
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        with self._cond:
            seen = 0
            while True:
                for line in self._stderr_lines[seen:]:
                    m = rx.search(line)
                    if m:
                        return m
                seen = len(self._stderr_lines)
                left = deadline - time.monotonic()
                if left <= 0:
                    raise DaemonTimeout(f"no daemon stderr line matched {pattern!r}")
                self._cond.wait(left)
