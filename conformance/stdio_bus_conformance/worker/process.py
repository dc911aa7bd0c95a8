"""One worker under test, spawned the way a daemon (or an MCP client
transport) spawns it: command, arguments, environment, stdin and stdout
pipes, stderr captured.

A reader thread splits stdout into lines (bytes, newline kept, each with its
arrival time); another drains stderr, so a worker that logs a lot never
blocks on it. Every wait has a deadline. The suite plays the worker's
client: it writes stdin, reads answers, closes stdin, sends signals.

Blame: everything the worker does wrong raises WorkerError (a DaemonError:
"the implementation under test misbehaved", so a test citing a MUST clause
fails); the suite's own problems raise HarnessError.
"""

from __future__ import annotations

import collections
import contextlib
import fcntl
import functools
import os
import select
import signal
import struct
import subprocess
import termios
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from ..common import procinfo
from ..common.reader import start_reader
from . import rawjson as wj
from ..common.errors import DaemonError, DaemonTimeout, HarnessError
from ..common.transcript import Recorder


class WorkerError(DaemonError):
    """The worker under test misbehaved."""


class WorkerTimeout(WorkerError, DaemonTimeout):
    """The worker did not do something before the deadline."""


@dataclass(frozen=True)
class Line:
    """One line the worker wrote (newline included, unless it was the
    unterminated tail at end of output)."""
    data: bytes
    t: float  # time.monotonic() of arrival
    seq: int  # its place among all the lines of its worker

    @property
    def complete(self) -> bool:
        return self.data.endswith(b"\n")

    @functools.cached_property
    def obj(self):
        """The JSON value, or None when the line is not JSON."""
        return wj.parse(self.data)

    @property
    def kind(self) -> str:
        return wj.kind(self.obj)

    def raw(self, key: str) -> bytes | None:
        return wj.raw(self.data, key)

    @property
    def id_key(self):
        obj = self.obj
        return wj.key_of(obj.get("id")) if isinstance(obj, dict) and "id" in obj else None

    def is_response_to(self, key) -> bool:
        return self.kind == "response" and self.id_key == key

    def __repr__(self):
        return f"Line({self.data[:300]!r})"


class WorkerProc:
    """A running worker. Created by WorkerRun.spawn()."""

    def __init__(self, argv: list[str], env: dict, cwd: Path, recorder: Recorder, name: str,
                 timeout: float, first_timeout: float = 0.0):
        self.argv = list(argv)
        self.name = name
        self.recorder = recorder
        self.timeout = timeout
        self.first_timeout = first_timeout   # the wait for its first line: a server may load slowly
        self._loading_since = 0              # lines it had written when it was last sent `initialize`
        self._loading = False
        self.returncode: int | None = None
        self.killed = False
        self.lines: list[Line] = []          # every line, in arrival order
        self.settled = -1                    # seq of the last line of the MCP handshake (-1: none)
        self.request_keys: set = set()       # id keys of every request the suite wrote
        self._asked: dict = {}               # id key -> (when it was sent, its kind of event: Pace's)
        self.timed: set = set()              # the methods whose round trips the preflight timed
        self.round_trips: list[tuple[str, float]] = []  # (kind, s) of each request answered
        self.stdout = bytearray()            # every byte, exactly
        self._stderr = bytearray()
        self._queue: collections.deque[Line] = collections.deque()
        self._partial = b""
        self._eof = False
        self._cond = threading.Condition()
        self._stdin_closed = False
        # auto_reply(proc, line): answers a request the worker sent, called from
        # the waits (take) of the test's own thread; None: the test answers them
        self.auto_reply = None
        # before_signal(sig): may refuse (skip) a signal the test would send
        self.before_signal = None
        # before_send(data): may refuse (skip) input the test would write
        self.before_send = None
        self._sent_tail = b""  # what was sent after the last newline (a line in pieces)
        recorder.note(f"{name}: start: {' '.join(self.argv)}")
        try:
            self.proc = subprocess.Popen(self.argv, cwd=cwd, env=env, start_new_session=True,
                                         stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         stderr=subprocess.PIPE, bufsize=0)
        except OSError as exc:
            raise HarnessError(f"cannot execute the worker {self.argv[0]!r}: {exc}") from None
        self.pid = self.proc.pid
        self.recorder.note(f"{name}: pid {self.pid}")
        self._wfd = self.proc.stdin.fileno()
        self._stdout_ino = os.fstat(self.proc.stdout.fileno()).st_ino  # pipe_fds, after its reader closed it
        os.set_blocking(self._wfd, False)
        # the readers own (and close) stdout and stderr: common/reader.py says why
        self._threads = [start_reader(self.proc.stdout, self._on_stdout, f"sb-{name}-stdout"),
                         start_reader(self.proc.stderr, self._on_stderr, f"sb-{name}-stderr")]

    # -- what the readers hand over ------------------------------------------------
    def _on_stdout(self, data: bytes) -> None:
        with self._cond:
            now = time.monotonic()
            if data:
                self.stdout += data
                buf = self._partial + data
                *done, self._partial = buf.split(b"\n")
                for raw in done:
                    self._deliver(Line(raw + b"\n", now, len(self.lines)))
            else:
                if self._partial:
                    self._deliver(Line(self._partial, now, len(self.lines)))
                    self._partial = b""
                self._eof = True
                self.recorder.add(f"{self.name} -> suite", "[end of stdout]\n")
            self._cond.notify_all()

    def _deliver(self, line: Line) -> None:
        if line.kind == "response" and line.id_key in self._asked:  # its pace, for slow notes
            sent, kind = self._asked.pop(line.id_key)
            self.round_trips.append((kind, line.t - sent))
        self.lines.append(line)
        self._queue.append(line)
        self.recorder.add(f"{self.name} -> suite", line.data)

    def _on_stderr(self, data: bytes) -> None:
        if data:
            with self._cond:
                self._stderr += data
            self.recorder.add(f"{self.name} stderr", data)

    # -- writing -----------------------------------------------------------------
    def send(self, data: bytes, timeout: float | None = None) -> None:
        """Writes data exactly as given. WorkerTimeout when the worker does
        not read it in time; WorkerError when its stdin is closed."""
        if not isinstance(data, (bytes, bytearray)):
            raise HarnessError(f"{self.name}.send() takes bytes, not {type(data).__name__}")
        if self._stdin_closed:
            raise HarnessError(f"{self.name}: send() after close_stdin()")
        if self.before_send is not None:  # it judges whole lines: the start of this one may be sent already
            self.before_send(self._sent_tail + bytes(data))
        self._sent_tail = (self._sent_tail + bytes(data)).rpartition(b"\n")[2]
        self.recorder.add(f"suite -> {self.name}", bytes(data))
        for line in bytes(data).split(b"\n"):
            obj = wj.parse(line) if b'"method"' in line else None
            if wj.kind(obj) == "request":
                self.request_keys.add(wj.key_of(obj["id"]))
                method = obj.get("method")
                if isinstance(method, str) and method in self.timed:
                    with self._cond:  # to a fresh worker (nothing written yet), the answer is its start-up
                        self._asked.setdefault(wj.key_of(obj["id"]),
                                               (time.monotonic(), "answer" if self.lines else "initialize"))
                if obj.get("method") == "initialize":  # a server may load before it answers it
                    self._loading, self._loading_since = True, len(self.lines)
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        view = memoryview(bytes(data))
        while view:
            try:
                n = os.write(self._wfd, view[:65536])
                view = view[n:]
            except BlockingIOError:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise WorkerTimeout(f"{self.name}: the worker did not read {len(view)} of "
                                        f"{len(data)} bytes in time") from None
                select.select([], [self._wfd], [], min(left, 0.1))
            except BrokenPipeError:
                raise WorkerError(f"{self.name}: the worker's stdin is closed (EPIPE) while "
                                  f"{len(view)} bytes were still to write") from None

    def send_lines(self, lines) -> None:
        """Several lines in one write."""
        self.send(b"".join(lines))

    def send_pieces(self, data: bytes, pieces: int, pause: float) -> None:
        """data in `pieces` writes. Before each next piece the worker has
        read the last one (wait_drained), so every read it makes ends inside
        the line; `pause` seconds then pass as well (a paced writer)."""
        step = max(1, -(-len(data) // pieces))
        for i in range(0, len(data), step):
            self.send(data[i:i + step])
            if i + step < len(data):
                self.wait_drained()
                time.sleep(pause)

    def wait_drained(self, limit: float = 2.0) -> bool:
        """Waits (at most `limit` s) until the worker has read everything
        written to its stdin, so the next write cannot join the last one in
        the pipe. True when it has; a worker that is not reading just makes
        the wait end. Linux answers FIONREAD on a pipe's write end."""
        deadline = time.monotonic() + limit
        while True:
            try:
                unread = struct.unpack("i", fcntl.ioctl(self._wfd, termios.FIONREAD, b"\0" * 4))[0]
            except OSError:
                return False
            if unread == 0:
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.001)  # poll interval inside the deadline loop

    def close_stdin(self) -> None:
        """End of input."""
        if not self._stdin_closed:
            self._stdin_closed = True
            self.recorder.note(f"{self.name}: suite closes the worker's stdin")
            try:
                self.proc.stdin.close()
            except OSError:
                pass

    # -- reading -----------------------------------------------------------------
    def _timeout(self, timeout):
        return self.patience(self.timeout if timeout is None else timeout)

    def patience(self, timeout: float) -> float:
        """A wait of `timeout` s for what this worker writes; until it has
        written its first line, at least first_timeout (the run's measured
        pace for a fresh worker's first answer, common/pace.py): a server
        that loads for seconds is still coming."""
        loading = not self.lines or (self._loading and len(self.lines) == self._loading_since)
        return max(timeout, self.first_timeout) if loading else timeout

    def take(self, pred, timeout: float | None = None, what: str = "a line") -> Line:
        """The first queued line satisfying pred, removed from the queue (the
        others stay, in order); waits for it until the deadline. Meanwhile,
        with auto_reply set, the requests the worker sends are answered (and
        leave the queue) unless pred wants them."""
        timeout = self._timeout(timeout)
        deadline = time.monotonic() + timeout
        while True:
            with self._cond:
                for i, line in enumerate(self._queue):
                    if pred(line):
                        del self._queue[i]
                        return line
                asks = [line for line in self._queue if line.kind == "request"] if self.auto_reply else []
                for line in asks:
                    self._queue.remove(line)
                if not asks:
                    if self._eof:
                        raise WorkerError(f"{self.name}: the worker closed its stdout before {what}"
                                          + self._exit_note())
                    left = deadline - time.monotonic()
                    if left <= 0:
                        raise WorkerTimeout(f"{self.name}: no {what} within {timeout:g} s"
                                            + self._queue_note())
                    self._cond.wait(left)
                    continue
            for line in asks:  # outside the lock: send() may wait for the worker to read
                if self._stdin_closed:
                    break  # end of input: no answer can reach it any more
                try:
                    self.auto_reply(self, line)
                except WorkerError:
                    pass  # its stdin is closed: it learns that by itself

    def recv_line(self, timeout: float | None = None) -> Line:
        return self.take(lambda line: True, timeout, "line")

    def recv_response(self, key, timeout: float | None = None) -> Line:
        """The response whose id is key (rawjson.key_of/id_key)."""
        return self.take(lambda line: line.is_response_to(key), timeout,
                         f"response with id {_show_key(key)}")

    def until(self, key, timeout: float | None = None) -> tuple[list[Line], Line]:
        """Waits for the response with id key; returns (the queued lines that
        the worker wrote before it, removed from the queue; the response)."""
        answer = self.recv_response(key, timeout)
        with self._cond:
            before = [line for line in self._queue if line.seq < answer.seq]
            for line in before:
                self._queue.remove(line)
        return before, answer

    def answer(self, key, timeout: float | None = None) -> dict:
        """The response to the request with id key, as an object."""
        return self.recv_response(key, timeout).obj

    def forget_before(self, line: Line) -> None:
        """Removes from the queue every line the worker wrote before `line`
        (they stay in self.lines for the tests that judge every line)."""
        with self._cond:
            for earlier in [x for x in self._queue if x.seq < line.seq]:
                self._queue.remove(earlier)

    def drain(self) -> list[Line]:
        """Removes and returns every queued line."""
        with self._cond:
            out = list(self._queue)
            self._queue.clear()
            return out

    def queued(self) -> list[Line]:
        with self._cond:
            return list(self._queue)

    def expect_silence(self, duration: float) -> None:
        """Asserts that the worker writes nothing for `duration` seconds
        (bounded: keep it under 1 s; prefer a later answer as proof)."""
        if duration > 1.0:
            raise HarnessError("expect_silence() is a bounded wait: keep it under 1 s")
        deadline = time.monotonic() + duration
        with self._cond:
            while True:
                if self._queue:
                    raise WorkerError(f"{self.name}: expected silence, the worker wrote "
                                      f"{self._queue[0].data[:200]!r}")
                left = deadline - time.monotonic()
                if left <= 0 or self._eof:
                    return
                self._cond.wait(left)

    def wait_eof(self, timeout: float | None = None) -> None:
        timeout = self._timeout(timeout)
        deadline = time.monotonic() + timeout
        with self._cond:
            while not self._eof:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise WorkerTimeout(f"{self.name}: stdout still open after {timeout:g} s")
                self._cond.wait(left)

    @property
    def eof(self) -> bool:
        with self._cond:
            return self._eof

    def _queue_note(self) -> str:
        q = self.queued()
        if not q:
            return " (nothing else arrived)" if not self.lines else ""
        return f" (other lines waiting: {', '.join(repr(line.data[:120]) for line in q[:3])})"

    def _exit_note(self) -> str:
        rc = self.proc.poll()
        return "" if rc is None else f" (it exited with status {rc})"

    # -- process -----------------------------------------------------------------
    @property
    def running(self) -> bool:
        return self.proc.poll() is None

    def signal(self, sig: int, guard: bool = True) -> None:
        """Sends sig. guard: let before_signal refuse it (a test blocked by
        a root cause the preflight found)."""
        if guard and self.before_signal is not None:
            self.before_signal(sig)
        self.recorder.note(f"{self.name}: suite sends {signal.Signals(sig).name}")
        try:
            os.kill(self.pid, sig)
        except ProcessLookupError:
            raise WorkerError(f"{self.name}: the worker had already exited{self._exit_note()}") from None

    def wait_exit(self, timeout: float | None = None, what: str = "") -> int:
        """Waits for the worker to exit; its status (negative: the signal that
        killed it). WorkerTimeout when it is still running at the deadline."""
        timeout = self._timeout(timeout)
        try:
            self.returncode = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            raise WorkerTimeout(f"{self.name}: the worker did not exit within {timeout:g} s"
                                + (f" {what}" if what else "")) from None
        self.recorder.note(f"{self.name}: exited with status {self.returncode}")
        for t in self._threads:
            t.join(2)
        return self.returncode

    def finish(self, eof_timeout: float | None = None, term_timeout: float | None = None) -> str:
        """Ends the worker for tests that only need all of its output, as an
        MCP client does (MCP lifecycle, Shutdown): end of input; if it does
        not exit, SIGTERM; then SIGKILL. Returns how it
        ended: "eof", "sigterm" or "killed" (a test that judges the ending
        itself uses close_stdin/signal/wait_exit instead)."""
        self.close_stdin()
        try:
            self.wait_exit(eof_timeout)
            return "eof"
        except WorkerTimeout:
            pass
        try:
            self.signal(signal.SIGTERM, guard=False)
            self.wait_exit(term_timeout)
            return "sigterm"
        except (WorkerTimeout, WorkerError):
            pass
        self.kill()
        return "killed"

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.recorder.note(f"{self.name}: suite sends SIGKILL")
            self.killed = True
            try:
                self.proc.kill()
            except ProcessLookupError:
                pass
        self.returncode = self.proc.wait()
        for t in self._threads:
            t.join(2)

    def stop(self) -> None:
        """Teardown: kill the worker and anything left in its process group
        (first: a launcher's child holding the pipes would keep the readers,
        and this wait, going), then close its stdin; the readers close stdout
        and stderr at their end (common/reader.py)."""
        if self.proc.poll() is None:
            self.recorder.note(f"{self.name}: suite sends SIGKILL")
            self.killed = True
        try:
            os.killpg(self.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            self.proc.kill()  # not its group's leader any more: the worker alone
        self.returncode = self.proc.wait()
        for t in self._threads:
            t.join(2)
        with contextlib.suppress(OSError):
            self.proc.stdin.close()

    def pipe_fds(self) -> dict:
        """Which of the worker's fds still point at the suite's stdin and
        stdout pipes: {"stdin": [fd...], "stdout": [fd...]} (from /proc)."""
        ours = {"stdin": os.fstat(self._wfd).st_ino if not self._stdin_closed else None,
                "stdout": self._stdout_ino}
        out = {"stdin": [], "stdout": []}
        for fd, target in procinfo.fds(self.pid).items():
            for which, ino in ours.items():
                if ino is not None and target == f"pipe:[{ino}]":
                    out[which].append(fd)
        return out

    def stderr_bytes(self) -> bytes:
        with self._cond:
            return bytes(self._stderr)


def _show_key(key) -> str:
    if key is None:
        return "?"
    if key[0] == "s":
        return repr(key[1])
    if key[0] == "n":
        return str(key[1])
    return "null"
