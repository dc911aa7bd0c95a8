"""Fixtures for the mock_worker tests: the test plays the daemon.

Run: /usr/bin/python3 -m pytest tests/mocks --mock-worker PATH
(default PATH: build/mock_workers/mock_worker under the repository root).

Every wait has a deadline; nothing sleeps a fixed time. Reads use select()
on a non-blocking stdout, the log is re-read until a record shows up.
"""
import json
import os
import select
import signal
import subprocess
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DEFAULT_TIMEOUT = 5.0


def pytest_addoption(parser):
    parser.addoption(
        "--mock-worker",
        default=str(REPO / "build" / "mock_workers" / "mock_worker"),
        help="path to the mock_worker binary (default: build/mock_workers/mock_worker)",
    )


@pytest.fixture(scope="session")
def mock_path(request):
    path = Path(request.config.getoption("--mock-worker"))
    if not path.is_absolute():
        path = (Path.cwd() / path).resolve()
    if not os.access(path, os.X_OK):
        pytest.fail(f"mock_worker not found at {path}: build it or pass --mock-worker PATH")
    return path


class LogRecord:
    """One --log record: `<ns> <pid> <worker> <dir> <data>`."""

    def __init__(self, raw: bytes):
        parts = raw.split(b" ", 4)
        assert len(parts) >= 4, f"malformed log record {raw!r}"
        self.ns = int(parts[0])
        self.pid = int(parts[1])
        self.worker = parts[2].decode()
        self.dir = parts[3].decode()
        self.data = parts[4] if len(parts) == 5 else b""

    def __repr__(self):
        return f"<{self.pid} {self.worker} {self.dir} {self.data[:60]!r}>"


def read_log(path: Path, writers_done=True):
    """Records of a --log file. While writers run, a read can catch a record
    that is being appended: it is left out (writers_done=False)."""
    if not path.exists():
        return []
    raw = path.read_bytes()
    if writers_done:
        assert raw == b"" or raw.endswith(b"\n"), "log ends with a partial record"
    return [LogRecord(line) for line in raw.split(b"\n")[:-1]]


class Mock:
    """A running mock_worker with its stdin/stdout pipes."""

    def __init__(self, path, args, tmp_path, env=None, log=True, name="mock"):
        self.log_path = tmp_path / f"{name}.log"
        self.err_path = tmp_path / f"{name}.stderr"
        self.args = [str(path), *args]
        if log:
            self.args += ["--log", str(self.log_path)]
        full_env = {k: v for k, v in os.environ.items() if not k.startswith("STDIO_BUS_")}
        full_env.update(env or {})
        self._err = open(self.err_path, "wb")
        self.proc = subprocess.Popen(
            self.args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._err,
            env=full_env,
        )
        self.pid = self.proc.pid
        self.out_fd = self.proc.stdout.fileno()
        os.set_blocking(self.out_fd, False)
        self.buf = b""
        self.eof = False

    # -- input ---------------------------------------------------------
    def send_raw(self, data: bytes):
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def send(self, *msgs):
        data = b""
        for m in msgs:
            if isinstance(m, (bytes, bytearray)):
                data += bytes(m) + b"\n"
            else:
                data += json.dumps(m, separators=(",", ":")).encode() + b"\n"
        self.send_raw(data)

    def close_stdin(self):
        self.proc.stdin.close()

    # -- output --------------------------------------------------------
    def _fill(self, deadline) -> bool:
        """Reads what is available before deadline. False on timeout."""
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        r, _, _ = select.select([self.out_fd], [], [], left)
        if not r:
            return False
        chunk = os.read(self.out_fd, 1 << 20)
        if not chunk:
            self.eof = True
        self.buf += chunk
        return True

    def read_chunk(self, timeout=DEFAULT_TIMEOUT) -> bytes:
        """The bytes of the next read() on stdout (b"" at EOF)."""
        if self.buf:
            data, self.buf = self.buf, b""
            return data
        deadline = time.monotonic() + timeout
        if not self._fill(deadline):
            raise AssertionError(f"no output within {timeout}s")
        data, self.buf = self.buf, b""
        return data

    def read_line(self, timeout=DEFAULT_TIMEOUT) -> bytes:
        deadline = time.monotonic() + timeout
        while b"\n" not in self.buf:
            if self.eof:
                raise AssertionError(f"EOF before a full line; have {self.buf[:200]!r}")
            if not self._fill(deadline):
                raise AssertionError(f"no line within {timeout}s; have {self.buf[:200]!r}")
        line, self.buf = self.buf.split(b"\n", 1)
        return line

    def read_json(self, timeout=DEFAULT_TIMEOUT):
        return json.loads(self.read_line(timeout))

    def read_to_eof(self, timeout=DEFAULT_TIMEOUT) -> bytes:
        deadline = time.monotonic() + timeout
        while not self.eof:
            if not self._fill(deadline):
                raise AssertionError(f"stdout not closed within {timeout}s")
        data, self.buf = self.buf, b""
        return data

    def assert_silent(self, within: float):
        """Nothing may arrive on stdout for `within` seconds (a bounded wait
        for an event that must not happen)."""
        assert not self.buf, f"unexpected output {self.buf[:200]!r}"
        deadline = time.monotonic() + within
        got = self._fill(deadline)
        assert not got or (self.eof and not self.buf), f"unexpected output {self.buf[:200]!r}"

    # -- process -------------------------------------------------------
    def wait(self, timeout=DEFAULT_TIMEOUT) -> int:
        return self.proc.wait(timeout=timeout)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self, sig=signal.SIGKILL):
        if self.alive():
            self.proc.send_signal(sig)

    def stderr(self) -> bytes:
        self._err.flush()
        return self.err_path.read_bytes()

    # -- log -----------------------------------------------------------
    def log(self, dir=None):
        recs = [r for r in read_log(self.log_path, writers_done=not self.alive())
                if r.pid == self.pid]
        return [r for r in recs if dir is None or r.dir == dir]

    def wait_log(self, pred, timeout=DEFAULT_TIMEOUT, what="log record"):
        """Re-reads the log until pred(records) is true."""
        deadline = time.monotonic() + timeout
        while True:
            recs = self.log()
            if pred(recs):
                return recs
            if time.monotonic() > deadline:
                raise AssertionError(f"{what} not seen within {timeout}s: {recs[-5:]}")
            time.sleep(0.005)

    def wait_stderr(self, needle: bytes, timeout=DEFAULT_TIMEOUT):
        deadline = time.monotonic() + timeout
        while needle not in self.stderr():
            if time.monotonic() > deadline:
                raise AssertionError(f"{needle!r} not on stderr within {timeout}s")
            time.sleep(0.005)

    def cleanup(self):
        self.kill()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        for f in (self.proc.stdin, self.proc.stdout):
            try:
                f.close()
            except (BrokenPipeError, OSError):
                pass
        self._err.close()


@pytest.fixture
def spawn(mock_path, tmp_path):
    """spawn(*args, env=None, log=True, name=...) -> Mock; killed at teardown."""
    mocks = []

    def _spawn(*args, env=None, log=True, name=None):
        m = Mock(mock_path, list(args), tmp_path, env=env, log=log,
                 name=name or f"mock{len(mocks)}")
        mocks.append(m)
        return m

    yield _spawn
    for m in mocks:
        m.cleanup()
