"""Client connections to the daemon: the stdio pipes or a unix/TCP socket.

Every client has a reader thread that splits what the daemon sends into
lines and queues them with their arrival time; every wait has a deadline.
Lines are bytes and keep their terminating b"\\n" so tests can compare bytes
exactly; a fragment left unterminated when the daemon closes the connection
is delivered without one.
"""

from __future__ import annotations

import collections
import contextlib
import errno
import itertools
import json
import os
import select
import socket
import threading
import time

from ..common import context
from ..common.errors import ConnectionClosed, DaemonError, DaemonTimeout, HarnessError, Lost, NeverComes
from ..common.transcript import Recorder
from . import evidence

DEFAULT_TIMEOUT = 5.0
RECEIVED_KEEP = 32 << 20  # bytes a client keeps of what the daemon sent it; more is a finding
LATE_LINE = 0.25          # s a wait ended by evidence still waits for a line already in transit
SLICE = 0.1               # s: waits re-check the daemon at least this often (an exit wakes them at once)
PIPE_CAPACITY = 64 << 10  # Linux's pipe size: more than this sent and not yet answered can fill a worker's stdin
_ids = itertools.count(1)


def next_id() -> int:
    """A request id unique within the test, for tests that need one."""
    return next(_ids)


def field(msg, *path):
    """msg[path[0]][path[1]]...: a member of a message the daemon delivered.
    A missing member means the daemon delivered some other message, so it is
    a DaemonError (a KeyError in test code would be blamed on the suite)."""
    value = msg
    for i, key in enumerate(path):
        try:
            value = value[key]
        except (KeyError, IndexError, TypeError):
            where = "".join(f"[{k!r}]" for k in path[:i + 1])
            raise DaemonError(f"the message has no {where}: {json.dumps(msg)[:300]}") from None
    return value


def parse_line(line: bytes, who: str = "client") -> dict:
    """A line the daemon delivered to `who`, as a JSON object: DaemonError if
    it is not terminated by a newline, not JSON, or not an object."""
    if not line.endswith(b"\n"):
        raise DaemonError(f"{who}: line from the daemon not terminated by \\n: {line[:200]!r}")
    try:
        obj = json.loads(line)
    except ValueError as exc:
        raise DaemonError(f"{who}: daemon sent a line that is not JSON ({exc}): {line[:200]!r}") from None
    if not isinstance(obj, dict):
        raise DaemonError(f"{who}: daemon sent JSON that is not an object: {line[:200]!r}")
    return obj


def reset_ids() -> None:
    """Each test starts again at 1, so a rerun with the same seed sends the
    same bytes whatever ran before it in the process."""
    global _ids
    _ids = itertools.count(1)



def _lost(req_id, waited: float) -> str | None:
    """Whether the answer to req_id is lost (evidence.answer_lost), judged
    on the running test's workers, while its daemons are alive."""
    bus = context.state.bus
    if bus is None or not all(d.running for d in bus.daemons):
        return None
    delivered = {line for d in bus.daemons for c in d.clients() for line in c.received}
    return evidence.answer_lost(bus.worker_logs(), req_id, min(waited, 1.0), delivered)

class Client:
    """Base class: line queue, reads with deadlines, JSON helpers."""

    kind = "client"

    def __init__(self, name: str, recorder: Recorder, timeout: float = DEFAULT_TIMEOUT, watch=None):
        """watch(client, at_eof, closing), when given, is called on every wake
        of a wait and at end of stream: it raises when the daemon behind the
        connection died or exited (so no wait outlives the daemon, and a
        crash never reads as a closed connection)."""
        self.name = name
        self.recorder = recorder
        self.timeout = timeout
        self._watch = watch
        self._received_bytes = 0
        self._overflow = False
        self.received: list[bytes] = []  # every line, in arrival order
        self.sent: list[bytes] = []      # every chunk passed to send()
        self._queue: collections.deque[bytes] = collections.deque()
        self._cond = threading.Condition()
        self._partial = b""
        self._eof = False
        self._eof_reason = ""
        self._closed_by_us = False
        self._thread: threading.Thread | None = None
        self._unanswered = 0          # bytes sent since this client's last response: a worker may not have read them
        self.before_flood = None      # called before a send takes _unanswered past PIPE_CAPACITY

    # -- reader side (runs on the reader thread) ---------------------------
    def _start_reader(self) -> None:
        self._thread = threading.Thread(target=self._reader_loop, name=f"sb-{self.name}", daemon=True)
        self._thread.start()

    def _read_chunk(self) -> bytes:
        raise NotImplementedError

    def _reader_ended(self) -> None:
        """The stream ended: what the reader owns is released."""

    def _reader_loop(self) -> None:
        reason = "end of stream"
        try:
            while True:
                data = self._read_chunk()
                if not data:
                    break
                self._feed(data)
        except OSError as exc:
            reason = f"{exc.__class__.__name__}: {exc}"
        with self._cond:
            if self._partial:
                self._deliver(self._partial)
                self._partial = b""
            self._eof = True
            self._eof_reason = reason
            self._cond.notify_all()
        self._reader_ended()
        self.recorder.add(f"daemon -> {self.name}", f"[connection closed: {reason}]\n")

    def _feed(self, data: bytes) -> None:
        with self._cond:
            buf = self._partial + data
            start = 0
            while True:
                nl = buf.find(b"\n", start)
                if nl < 0:
                    break
                self._deliver(buf[start:nl + 1])
                start = nl + 1
            self._partial = buf[start:]
            if len(self._partial) > RECEIVED_KEEP:  # a line without end: counted, not kept
                self._received_bytes += len(self._partial)
                self._partial = b""
                self._overflowed()
            self._cond.notify_all()

    def _deliver(self, line: bytes) -> None:
        self.recorder.add(f"daemon -> {self.name}", line)
        self._received_bytes += len(line)
        if self._received_bytes > RECEIVED_KEEP:
            self._overflowed()  # counted, not kept: the harness stays bounded
            return
        self.received.append(line)
        self._queue.append(line)

    def _overflowed(self) -> None:
        if not self._overflow:
            self._overflow = True
            self.recorder.note(f"{self.name}: the daemon sent more than {RECEIVED_KEEP >> 20} MiB; "
                               "what follows is counted, not kept")

    def wake(self) -> None:
        """Wakes the waits of this client (the daemon exited)."""
        with self._cond:
            self._cond.notify_all()

    def _check(self, at_eof: bool = False, closing: bool = False) -> None:
        """Caller holds _cond (reentrant). Raises when the daemon is gone, or
        sent more than the harness keeps."""
        if self._overflow:
            raise DaemonError(f"{self.name}: the daemon sent more than {RECEIVED_KEEP >> 20} MiB "
                              f"({self._received_bytes} bytes); the harness keeps no more")
        if self._watch is not None:
            self._watch(self, at_eof, closing)

    # -- test side ----------------------------------------------------------
    def _deadline(self, timeout):
        return time.monotonic() + (self.timeout if timeout is None else timeout)

    def recv_line(self, timeout: float | None = None, bound=None) -> bytes:
        """The next line from the daemon, b"\\n" included. Raises DaemonTimeout
        when none arrives in time, ConnectionClosed when the daemon closed.
        bound (see evidence.py), if given, runs on every look and raises
        NeverComes once the daemon has shown the line cannot come."""
        deadline = self._deadline(timeout)
        ended = None  # the NeverComes the bound raised: then LATE_LINE more for a line in transit
        with self._cond:
            while True:
                if self._queue:
                    return self._queue.popleft()
                self._check(at_eof=self._eof)
                if not self._eof and ended is None:
                    try:
                        evidence.run(bound)
                    except NeverComes as exc:
                        ended = exc
                        deadline = min(deadline, time.monotonic() + LATE_LINE)
                if ended is not None and not self._eof and time.monotonic() >= deadline:
                    raise NeverComes(f"{self.name}: no line from the daemon: {ended}")
                if self._eof:
                    raise ConnectionClosed(f"{self.name}: the daemon closed the connection "
                                           f"({self._eof_reason}) while a line was expected")
                left = deadline - time.monotonic()
                if left <= 0:
                    raise DaemonTimeout(f"{self.name}: no line from the daemon within "
                                        f"{self.timeout if timeout is None else timeout:g} s")
                self._cond.wait(min(left, SLICE))

    def recv_json(self, timeout: float | None = None) -> dict:
        """The next line parsed as a JSON object (DaemonError if it is not one,
        or if it is not terminated by a newline)."""
        line = self.recv_line(timeout)
        return self._parse(line)

    def _parse(self, line: bytes):
        return parse_line(line, self.name)

    def recv_response(self, req_id, timeout: float | None = None, bound=None) -> dict:
        """Waits for the response whose id equals req_id; other lines that
        arrive first stay queued, in order, for recv_line/recv_json. bound:
        as for recv_line (e.g. evidence.worker_exited for the worker that
        held the request)."""
        deadline = self._deadline(timeout)
        skipped = []
        try:
            while True:
                left = max(0.0, deadline - time.monotonic())
                try:
                    line = self.recv_line(left, bound)
                except NeverComes as exc:
                    raise NeverComes(f"{self.name}: no response with id {req_id!r}: {exc}") from None
                except DaemonTimeout:
                    waited = self.timeout if timeout is None else timeout
                    lost = _lost(req_id, waited)
                    if lost:  # SB-6.3.1-2: found in the pending table, routed to the client that asked
                        raise Lost("SB-6.3.1-2", f"{self.name}: {lost}") from None
                    raise DaemonTimeout(f"{self.name}: no response with id {req_id!r} within {waited:g} s"
                                        + (f" (got {len(skipped)} other lines)" if skipped else "")) from None
                try:
                    obj = json.loads(line)
                except ValueError:
                    obj = None
                if isinstance(obj, dict) and "id" in obj and obj["id"] == req_id and \
                        type(obj["id"]) is type(req_id) and ("result" in obj or "error" in obj):
                    self._unanswered = 0
                    return self._parse(line)
                skipped.append(line)
        finally:
            with self._cond:
                self._queue.extendleft(reversed(skipped))

    def request(self, method: str = "echo", params=None, session: str | None = None,
                id=None, timeout: float | None = None) -> dict:
        """Sends a JSON-RPC request and returns its response."""
        req_id = next_id() if id is None else id
        msg = {"jsonrpc": "2.0", "id": req_id, "method": method}
        if params is not None:
            msg["params"] = params
        if session is not None:
            msg["sessionId"] = session
        t0 = time.monotonic()
        self.send_json(msg)
        got = self.recv_response(req_id, timeout)
        if not (isinstance(params, dict) and "mock" in params):  # a mock told to delay is not the pace
            context.saw("answer", time.monotonic() - t0)
        return got

    def notify(self, method: str = "note", params=None, session: str | None = None) -> bytes:
        msg = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            msg["params"] = params
        if session is not None:
            msg["sessionId"] = session
        return self.send_json(msg)

    def sync(self, session: str | None = None, timeout: float | None = None) -> list[bytes]:
        """Sentinel round-trip: sends a request and waits for its response.
        Returns (and consumes) the lines that arrived before it. With a
        session, the sentinel goes to the same worker as earlier messages of
        that session, so anything that worker wrote before it has been routed."""
        req_id = f"sb-sync-{next_id()}"
        msg = {"jsonrpc": "2.0", "id": req_id, "method": "sb/sync"}
        if session is not None:
            msg["sessionId"] = session
        self.send_json(msg)
        self.recv_response(req_id, timeout)
        with self._cond:
            before = list(self._queue)
            self._queue.clear()
        return before

    def send_json(self, obj, timeout: float | None = None) -> bytes:
        """Sends obj as one compact NDJSON line; returns the bytes sent."""
        line = json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode() + b"\n"
        self.send(line, timeout)
        return line

    def send(self, data: bytes, timeout: float | None = None) -> None:
        """Writes data exactly as given. Raises DaemonTimeout when the daemon
        does not read it in time, ConnectionClosed when it closed the stream."""
        if not isinstance(data, (bytes, bytearray)):
            raise HarnessError(f"{self.name}.send() takes bytes, not {type(data).__name__}")
        if self._closed_by_us:
            raise HarnessError(f"{self.name}: send() after close()")
        if self.before_flood is not None and self._unanswered + len(data) > PIPE_CAPACITY:
            self.before_flood()  # the bus may block the test here (full-pipe)
        self._unanswered += len(data)
        self.recorder.add(f"{self.name} -> daemon", bytes(data))
        self.sent.append(bytes(data[:4096]) if len(data) > 4096 else bytes(data))
        deadline = self._deadline(timeout)
        view = memoryview(bytes(data))
        with self._cond:
            self._check()
        while view:
            try:
                n = self._write_some(view, deadline)
            except (BrokenPipeError, ConnectionResetError) as exc:
                with self._cond:
                    self._check(at_eof=True)
                raise ConnectionClosed(f"{self.name}: the daemon closed the connection while "
                                       f"we were sending ({exc.__class__.__name__})") from None
            if n is None:
                with self._cond:
                    self._check()
                raise DaemonTimeout(f"{self.name}: the daemon did not read {len(view)} of "
                                    f"{len(data)} bytes in time")
            view = view[n:]

    def _write_some(self, view, deadline):
        raise NotImplementedError

    @property
    def closed_by_daemon(self) -> bool:
        with self._cond:
            return self._eof

    def expect_closed(self, timeout: float | None = None, bound=None) -> list[bytes]:
        """Waits until the daemon closes this connection. Returns the lines
        that were still unread. Raises DaemonTimeout if it stays open.
        bound, if given (a callable or a list of them, see evidence.py:
        forwarded, answered...), runs on every look (holding the lock) and
        raises to end the wait when the close can no longer come; a close
        seen on the same look wins over the evidence."""
        deadline = self._deadline(timeout)
        with self._cond:
            while not self._eof:
                self._check(closing=True)
                try:
                    evidence.run(bound)
                except NeverComes as exc:
                    if self._eof:
                        break  # it closed after all: the close is the event awaited
                    raise NeverComes(f"{self.name}: the daemon will not close the connection: {exc}") from None
                left = deadline - time.monotonic()
                if left <= 0:
                    raise DaemonTimeout(f"{self.name}: the daemon did not close the connection within "
                                        f"{self.timeout if timeout is None else timeout:g} s")
                self._cond.wait(min(left, SLICE))
            self._check(at_eof=True, closing=True)  # a dying daemon does not "close the client"
            rest = list(self._queue)
            self._queue.clear()
            return rest

    def expect_closed_on(self, data: bytes, timeout: float | None = None, bound=None) -> list[bytes]:
        """Sends data, on which the daemon must close this connection, then a
        probe request. A daemon that answers the probe read past data and
        kept the connection, so the close can no longer come: the wait ends
        there (NeverComes), not at the deadline; so does any other bound
        given (e.g. evidence.forwarded of data). Returns what
        expect_closed() returns."""
        probe = f"sb-probe-{next_id()}"
        line = json.dumps({"jsonrpc": "2.0", "id": probe, "method": "sb/probe"}).encode() + b"\n"
        for chunk in (data, line):
            try:
                self.send(chunk, timeout)
            except ConnectionClosed:
                break

        served = evidence.answered(self, probe, "a request sent after the line it was to close it on")
        return self.expect_closed(timeout, [served, *(bound if isinstance(bound, (list, tuple)) else [bound])])

    def expect_silence(self, duration: float = 0.3) -> None:
        """Asserts that nothing arrives for `duration` seconds (keep it short;
        prefer sync() where a sentinel round-trip can prove the same)."""
        if duration > 1.0:
            raise HarnessError("expect_silence() is a bounded wait: keep it under 1 s, use sync()")
        deadline = time.monotonic() + duration
        with self._cond:
            while True:
                if self._queue:
                    raise AssertionError(f"{self.name}: expected silence, the daemon sent "
                                         f"{self._queue[0][:200]!r}")
                self._check(at_eof=self._eof)
                if self._eof:
                    raise ConnectionClosed(f"{self.name}: expected silence, the daemon closed "
                                           f"the connection ({self._eof_reason})")
                left = deadline - time.monotonic()
                if left <= 0:
                    return
                self._cond.wait(min(left, SLICE))

    def pending_lines(self) -> list[bytes]:
        with self._cond:
            return list(self._queue)

    def close(self) -> None:
        raise NotImplementedError

    def join_reader(self, timeout: float = 2.0) -> None:
        """Waits for the reader thread to see the end of the stream."""
        if self._thread is not None:
            self._thread.join(timeout)


class StdioClient(Client):
    """The one client of stdio mode: the daemon's stdin and stdout."""

    kind = "stdio"

    def __init__(self, name, recorder, stdin, stdout, timeout=DEFAULT_TIMEOUT, watch=None):
        """stdin, stdout: the daemon's pipes as unbuffered file objects; the
        client closes stdin; its reader closes stdout when the stream ends
        (common/reader.py says why nobody else may)."""
        super().__init__(name, recorder, timeout, watch)
        self.on_close = None  # called when the test closes stdin (the daemon may exit now)
        self._wfile = stdin
        self._rfile = stdout
        self._wfd = stdin.fileno()
        self._rfd = stdout.fileno()
        os.set_blocking(self._wfd, False)
        self._start_reader()

    def _read_chunk(self) -> bytes:
        return os.read(self._rfd, 65536)

    def _reader_ended(self) -> None:
        with contextlib.suppress(OSError):
            self._rfile.close()

    def _write_some(self, view, deadline):
        while True:
            try:
                return os.write(self._wfd, view[:65536])
            except BlockingIOError:
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                select.select([], [self._wfd], [], left)

    def close(self) -> None:
        """Closes the daemon's stdin (end of input for the one client)."""
        if not self._closed_by_us:
            if self.on_close is not None:
                self.on_close()  # may block the test (preflight stdin-eof broken): then nothing is closed
            self._closed_by_us = True
            self.recorder.note(f"{self.name}: harness closed the daemon's stdin")
            try:
                self._wfile.close()
            except OSError:
                pass

    close_write = close


class SocketClient(Client):
    """A unix-domain or TCP client connection."""

    kind = "socket"

    def __init__(self, name, recorder, sock: socket.socket, timeout=DEFAULT_TIMEOUT, watch=None):
        super().__init__(name, recorder, timeout, watch)
        self.sock = sock
        self._start_reader()

    @classmethod
    def connect(cls, name, recorder, family, address, timeout=DEFAULT_TIMEOUT, watch=None):
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.settimeout(timeout)
        try:
            sock.connect(address)
        except OSError as exc:
            sock.close()
            raise DaemonError(f"{name}: cannot connect to the daemon at {address}: {exc}") from None
        sock.settimeout(None)
        if family != socket.AF_UNIX:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        recorder.note(f"{name}: connected to {address}")
        return cls(name, recorder, sock, timeout, watch)

    def _read_chunk(self) -> bytes:
        return self.sock.recv(65536)

    def _write_some(self, view, deadline):
        while True:
            try:
                return self.sock.send(view[:262144], socket.MSG_DONTWAIT | socket.MSG_NOSIGNAL)
            except BlockingIOError:
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                select.select([], [self.sock], [], left)
            except OSError as exc:
                if exc.errno in (errno.EPIPE, errno.ECONNRESET, errno.ENOTCONN):
                    raise BrokenPipeError(str(exc)) from None
                raise

    def close_write(self) -> None:
        """Half-close: the daemon sees end of input, we can still read."""
        try:
            self.sock.shutdown(socket.SHUT_WR)
        except OSError:
            pass
        self.recorder.note(f"{self.name}: harness shut down its write side")

    def close(self) -> None:
        if self._closed_by_us:
            return
        self._closed_by_us = True
        self.recorder.note(f"{self.name}: harness closed the connection")
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()
