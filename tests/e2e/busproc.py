"""A daemon under test and its clients, with deadlines on every wait."""
import json
import os
import resource
import selectors
import shlex
import signal
import socket
import subprocess
import time


# Under valgrind (ctest -L valgrind) the daemon runs tens of times slower:
# every deadline stretches by this factor. Waits stay event-driven.
SCALE = float(os.environ.get("SB_TIMEOUT_SCALE", "1"))
# A command to run the daemon under, e.g. "valgrind --log-file=... ".
WRAPPER = shlex.split(os.environ.get("SB_DAEMON_WRAPPER", ""))


class Timeout(AssertionError):
    pass


class LineReader:
    """Reads newline-terminated lines from a non-blocking fd with deadlines."""

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


class Daemon:
    """build/stdio_bus started with a config, stderr captured to a file."""

    def __init__(self, binary, config_path, tmp_path, mode="stdio", args=(), wrap=(),
                 nofile=None, stderr_pipe=False):
        """wrap: a command to run the daemon under (outside SB_DAEMON_WRAPPER),
        e.g. strace. nofile: (soft, hard) RLIMIT_NOFILE to start it with.
        stderr_pipe: stderr goes to a pipe that nobody reads until the test
        does (read_stderr_pipe); stderr() and wait_stderr() do not work then."""
        self.mode = mode
        self.stderr_path = tmp_path / f"daemon-{time.monotonic_ns()}.stderr"
        argv = list(wrap) + WRAPPER + [binary, "--config", config_path]
        if mode == "unix":
            self.address = str(tmp_path / "bus.sock")
            argv += ["--unix", self.address]
        elif mode == "tcp":
            port = free_port()
            self.address = ("127.0.0.1", port)
            argv += ["--tcp", f"127.0.0.1:{port}"]
        argv += list(args)
        self.stderr_file = subprocess.PIPE if stderr_pipe else open(self.stderr_path, "wb")
        def limit():
            if nofile:
                resource.setrlimit(resource.RLIMIT_NOFILE, nofile)
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self.stderr_file, preexec_fn=limit if nofile else None)
        self.stdout = LineReader(self.proc.stdout.fileno())
        if stderr_pipe:
            os.set_blocking(self.proc.stderr.fileno(), False)

    def read_stderr_pipe(self):
        """What the daemon wrote to its stderr pipe since the last call."""
        data = b""
        while True:
            try:
                chunk = os.read(self.proc.stderr.fileno(), 1 << 20)
            except BlockingIOError:
                chunk = b""
            if not chunk:
                return data.decode(errors="replace")
            data += chunk

    @property
    def pid(self):
        return self.proc.pid

    def send(self, data):
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def send_json(self, obj):
        line = json.dumps(obj, separators=(",", ":")).encode() + b"\n"
        self.send(line)
        return line

    def close_stdin(self):
        self.proc.stdin.close()

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
                if self.proc.poll() is not None:
                    raise AssertionError(f"daemon exited {self.proc.returncode}: {self.stderr()}")
                if time.monotonic() > deadline:
                    raise Timeout("daemon never accepted a connection")
                time.sleep(0.01)

    def stderr(self):
        return self.stderr_path.read_text(errors="replace")

    def wait_stderr(self, needle, timeout=10.0, count=1):
        """Waits until needle occurs `count` times in the daemon's stderr."""
        deadline = time.monotonic() + timeout * SCALE
        while True:
            text = self.stderr()
            if text.count(needle) >= count:
                return text
            if time.monotonic() > deadline:
                raise Timeout(f"{needle!r} x{count} not in stderr:\n{text[-3000:]}")
            time.sleep(0.02)

    def wait(self, timeout=10.0):
        try:
            return self.proc.wait(timeout * SCALE)
        except subprocess.TimeoutExpired:
            raise Timeout(f"daemon still running after {timeout}s")

    def stop(self, sig=signal.SIGTERM, timeout=10.0):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        return self.wait(timeout)

    def kill(self):
        """Ends the daemon: SIGTERM first, so a memory checker still writes
        its exit report, then SIGKILL if it does not stop."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10 * SCALE)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.stderr_file is subprocess.PIPE:
            self.proc.stderr.close()
        else:
            self.stderr_file.close()


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


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def cpu_seconds(pid):
    """utime + stime of a process, from /proc/<pid>/stat."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks
