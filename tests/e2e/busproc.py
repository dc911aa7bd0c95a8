"""Our daemon in an e2e test, with deadlines on every wait.

The daemon is launched and watched by the conformance harness's launcher
(stdio_bus_conformance.daemon.process.Daemon: the command from a profile,
stderr kept by a reader thread, an exit watcher that names a crash, SIGTERM
then SIGKILL at the end); this module adds the small interface these tests
use: lines with deadlines, socket clients that read only when asked (so a
test can leave the daemon's output unread), and options the conformance
suite has no use for (a wrapper command, RLIMIT_NOFILE, a stderr nobody
reads)."""
import json
import os
import selectors
import shlex
import signal
import socket
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "conformance"))

from stdio_bus_conformance import ConnectionClosed, DaemonCrashed, DaemonTimeout  # noqa: E402
from stdio_bus_conformance.common.transcript import Recorder  # noqa: E402
from stdio_bus_conformance.daemon.process import Daemon as Launcher  # noqa: E402
from stdio_bus_conformance.daemon.profile import Profile  # noqa: E402

# Under valgrind (ctest -L valgrind) the daemon runs tens of times slower:
# every deadline stretches by this factor. Waits stay event-driven.
SCALE = float(os.environ.get("SB_TIMEOUT_SCALE", "1"))
# A command to run the daemon under, e.g. "valgrind --log-file=... ".
WRAPPER = shlex.split(os.environ.get("SB_DAEMON_WRAPPER", ""))
POLL = 0.02  # poll interval of wait_stderr's deadline loop


class Timeout(AssertionError):
    pass


class LineReader:
    """Reads newline-terminated lines from a non-blocking fd with deadlines,
    only when asked (what the test does not read stays in the socket)."""

    def __init__(self, fd):
        self.fd = fd
        os.set_blocking(fd, False)
        self.buf = b""
        self.eof = False

    def _fill(self, deadline):
        sel = selectors.DefaultSelector()
        sel.register(self.fd, selectors.EVENT_READ)
        try:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not sel.select(remaining):
                return False
        finally:
            sel.close()
        try:
            chunk = os.read(self.fd, 1 << 20)
        except BlockingIOError:
            return True
        except ConnectionResetError:
            chunk = b""
        if not chunk:
            self.eof = True
        self.buf += chunk
        return True

    def line(self, timeout=10.0):
        """Next line with its newline; None at EOF; Timeout past the deadline."""
        deadline = time.monotonic() + timeout * SCALE
        while b"\n" not in self.buf:
            if self.eof:
                return None
            if not self._fill(deadline):
                raise Timeout(f"no line within {timeout}s (partial: {self.buf[:200]!r})")
        line, self.buf = self.buf.split(b"\n", 1)
        return line + b"\n"

    def wait_eof(self, timeout=10.0):
        """Reads until EOF; returns everything read. Timeout if still open."""
        deadline = time.monotonic() + timeout * SCALE
        while not self.eof:
            if not self._fill(deadline):
                raise Timeout(f"still open after {timeout}s")
        data, self.buf = self.buf, b""
        return data


class StdioOut:
    """The daemon's stdout in stdio mode, read by the launcher's client."""

    def __init__(self, client):
        self.client = client

    def line(self, timeout=10.0):
        """Next line with its newline; None at EOF; Timeout past the deadline."""
        try:
            return self.client.recv_line(timeout * SCALE)
        except ConnectionClosed:
            return None
        except DaemonTimeout as exc:
            raise Timeout(str(exc)) from None

    def wait_eof(self, timeout=10.0):
        """Waits for EOF; returns the lines not read before it."""
        try:
            return b"".join(self.client.expect_closed(timeout * SCALE))
        except DaemonTimeout as exc:
            raise Timeout(str(exc)) from None


class Daemon:
    """build/stdio_bus started with a config, in a mode, by the harness's launcher."""

    def __init__(self, binary, config_path, tmp_path, mode="stdio", args=(), wrap=(),
                 nofile=None, stderr_pipe=False, stderr_file=False):
        """wrap: a command to run the daemon under (outside SB_DAEMON_WRAPPER),
        e.g. strace. nofile: (soft, hard) RLIMIT_NOFILE to start it with.
        stderr_pipe: stderr goes to a pipe that nobody reads until the test
        does (read_stderr_pipe); stderr() and wait_stderr() do not work then.
        stderr_file: stderr goes to a regular file, which always takes what
        is written: for a test that floods the log and waits for one line of
        it (on a pipe, a reader slowed by load lets the daemon drop lines)."""
        self.mode = mode
        prefix = list(wrap) + WRAPPER
        if nofile:
            prefix = ["prlimit", f"--nofile={nofile[0]}:{nofile[1]}", "--"] + prefix
        self._err_fd = self._err_file = None
        if stderr_pipe or stderr_file:
            target = Path(tmp_path) / f"daemon-{time.monotonic_ns()}.stderr"
            if stderr_pipe:
                # a FIFO the test opens first (without blocking), so the
                # daemon's stderr is a pipe only the test reads
                os.mkfifo(target)
                self._err_fd = os.open(target, os.O_RDONLY | os.O_NONBLOCK)
            else:
                self._err_file = target
            prefix = ["sh", "-c", 'exec "$@" 2>"$0"', str(target)] + prefix
        profile = Profile(name="e2e", command=prefix + ["{daemon}", "--config", "{config}", "{mode_flag}"],
                          extra_args=list(args),
                          mode_flags={"stdio": [], "unix": ["--unix", "{socket}"],
                                      "tcp": ["--tcp", "{host}:{port}"]},
                          readiness={"stdio": "none", "unix": "none", "tcp": "none"},  # connect() retries
                          startup_timeout=10 * SCALE, shutdown_timeout=10 * SCALE)
        self.launcher = Launcher(profile=profile, daemon_path=binary, mode=mode, workdir=Path(tmp_path),
                                 config_path=Path(config_path), recorder=Recorder(), timeout=10 * SCALE)
        self.launcher.start()
        self.address = self.launcher.address
        self.stdout = StdioOut(self.launcher.client()) if mode == "stdio" else None

    @property
    def pid(self):
        return self.launcher.pid

    def cpu_seconds(self):
        """utime + stime of the daemon so far (at its exit, once it exited)."""
        return self.launcher.cpu_time()

    def send(self, data):
        self.launcher.client().send(data)

    def send_json(self, obj):
        line = json.dumps(obj, separators=(",", ":")).encode() + b"\n"
        self.send(line)
        return line

    def close_stdin(self):
        self.launcher.client().close()

    def connect(self, timeout=10.0):
        """A socket client; retries until the daemon accepts (readiness)."""
        deadline = time.monotonic() + timeout * SCALE
        family = socket.AF_UNIX if self.mode == "unix" else socket.AF_INET
        while True:
            s = socket.socket(family, socket.SOCK_STREAM)
            try:
                s.connect(self.address)
                return SocketClient(s)
            except (FileNotFoundError, ConnectionRefusedError):
                s.close()
                self.launcher.check("before it accepted a connection")
                if time.monotonic() > deadline:
                    raise Timeout("daemon never accepted a connection")
                time.sleep(0.01)

    def stderr(self):
        if self._err_file:
            try:
                return self._err_file.read_bytes().decode(errors="replace")
            except FileNotFoundError:
                return ""
        return self.launcher.streams.stderr_text()

    def wait_stderr(self, needle, timeout=10.0, count=1):
        """Waits until needle occurs `count` times in the daemon's stderr."""
        deadline = time.monotonic() + timeout * SCALE
        while True:
            text = self.stderr()
            if text.count(needle) >= count:
                return text
            if time.monotonic() > deadline:
                raise Timeout(f"{needle!r} x{count} not in stderr:\n{text[-3000:]}")
            time.sleep(POLL)

    def read_stderr_pipe(self):
        """What the daemon wrote to its stderr pipe since the last call."""
        data = b""
        while True:
            try:
                chunk = os.read(self._err_fd, 1 << 20)
            except BlockingIOError:
                chunk = b""
            if not chunk:
                return data.decode(errors="replace")
            data += chunk

    def wait(self, timeout=10.0):
        """Its exit status; Timeout while it runs on, DaemonCrashed when it
        died of a signal the test did not send."""
        try:
            return self.launcher.wait_exit(timeout * SCALE)
        except DaemonTimeout:
            raise Timeout(f"daemon still running after {timeout}s") from None

    def stop(self, sig=signal.SIGTERM, timeout=10.0):
        if self.launcher.running:
            self.launcher.signal(sig)
        return self.wait(timeout)

    def kill(self):
        """Ends the daemon: SIGTERM first, so a memory checker still writes
        its exit report, then SIGKILL if it does not stop."""
        try:
            ended = self.launcher.stop()
        finally:
            self.launcher.finish()
            if self._err_fd is not None:
                os.close(self._err_fd)
                self._err_fd = None
        if ended.get("crash"):  # a crash is a finding, at teardown too
            raise DaemonCrashed(f"the daemon died of {ended['crash']} ({ended['crash_phase']}); "
                                f"stderr: {self.stderr()[-1000:]!r}", ended["crash"])


class SocketClient:
    def __init__(self, sock):
        self.sock = sock
        self.reader = LineReader(sock.fileno())

    def send(self, data):
        self.sock.setblocking(True)
        self.sock.sendall(data)
        self.sock.setblocking(False)

    def send_json(self, obj):
        line = json.dumps(obj, separators=(",", ":")).encode() + b"\n"
        self.send(line)
        return line

    def line(self, timeout=10.0):
        return self.reader.line(timeout)

    def close(self):
        self.sock.close()
