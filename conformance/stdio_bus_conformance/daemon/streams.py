"""What the daemon under test writes, captured and queried: its stderr (its
log) and, in socket modes, its stdout, each read by a thread of its own; one
DaemonStreams per Daemon (process.py, which launches the process and watches
its exit).

* stderr is kept as its last STDERR_KEEP bytes (whole lines) with the total
  byte count; stdout in socket modes as its first STDOUT_KEEP bytes.
* the log queries: a mark, the lines since one, a wait for a line (a regex,
  a level word, a mention of a worker or a connection in the daemon's own
  words), each bounded: a stream wait ends at its deadline, as soon as the
  stream is over after the exit, or on evidence (evidence.py) that the line
  cannot come.
* the words that tie a log line to its event, in any daemon's words:
  mentions, worker_context, connection_context, MALFORMED_INPUT,
  INPUT_OVERFLOW, has_level (SB-I-34).
"""

from __future__ import annotations

import collections
import contextlib
import fcntl
import re
import threading
import time

from ..common.errors import DaemonTimeout, NeverComes
from ..common.reader import start_reader
from ..common.transcript import Recorder
from . import evidence, logwords

STDERR_KEEP = 1 << 20     # bytes of daemon stderr kept (the last ones)
EVICTED_KEEP = 1 << 20    # bytes of the lines pushed out of them, a run of equal lines as one
STDOUT_KEEP = 1 << 20     # bytes of daemon stdout kept in socket modes (the first ones)
LATE_LINE = 0.25          # s a log wait ended by evidence still waits: a line written before it may be in the pipe
STDERR_AFTER_EXIT = 5.0   # s an exited daemon's stderr may stay open (held by a process it left)
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


class DaemonStreams:
    """The streams of one daemon process (a part of its Daemon). The Daemon
    tells it about the exit: exited() (the exit watcher saw it), check(when)
    (raises DaemonCrashed or DaemonExited, the watch of every wait) and
    status() (the exit status in words)."""

    def __init__(self, *, recorder: Recorder, timeout: float, exited, check, status):
        self.recorder = recorder
        self.timeout = timeout
        self._exited = exited
        self._check = check
        self._status = status
        # stderr: whole lines, the last STDERR_KEEP bytes of them, numbered from the first
        self._err_lines: collections.deque[str] = collections.deque()     # decoded
        self._err_raw: collections.deque[bytes] = collections.deque()     # as written
        self._err_kept = 0
        # lines pushed out of the kept window, a run of equal lines kept once: (number, text).
        # A flood of one line must not push out, before a loaded machine let the test look,
        # the one line the test waits for (seen: fbus's EOF flood and SB-4.3-2's warning)
        self._evicted: collections.deque[tuple[int, str, int]] = collections.deque()
        self._evicted_kept = 0
        self._err_first = 0             # absolute number of the first kept line
        self._err_total = 0             # bytes written to stderr in all
        self._err_partial = b""
        self._err_eof = False
        self._stdout = bytearray()
        self._stdout_total = 0
        self._cond = threading.Condition()
        self._threads: list[threading.Thread] = []
        self._err_reader = None  # the stderr pipe's PipeReader (stderr_mark catches up with it)

    # -- capture -------------------------------------------------------------
    def capture_stderr(self, pipe) -> None:
        """Reads the daemon's stderr pipe from now on (a thread of its own)."""
        with contextlib.suppress(OSError):  # above the system's pipe-max-size: the default pipe
            fcntl.fcntl(pipe.fileno(), getattr(fcntl, "F_SETPIPE_SZ", 1031), STDERR_PIPE)
        self._err_reader = self._spawn_reader(pipe, self._on_stderr, "stderr")

    def capture_stdout(self, pipe) -> None:
        """Socket modes: reads the daemon's stdout pipe (it should stay empty)."""
        self._spawn_reader(pipe, self._on_stdout, "stdout")

    def _spawn_reader(self, pipe, sink, what):
        reader = start_reader(pipe, sink, f"sb-daemon-{what}")
        self._threads.append(reader)
        return reader

    def join(self, timeout: float) -> None:
        """Waits for the readers to end (each up to `timeout` s)."""
        for t in self._threads:
            t.join(timeout)

    def reset(self) -> None:
        """Forgets everything read: the daemon is started again (start() retrying
        on another port), after its pipes were closed."""
        self._threads.clear()
        self._err_reader = None
        with self._cond:
            self._err_lines.clear()
            self._err_raw.clear()
            self._err_kept = self._err_first = self._err_total = 0
            self._evicted.clear()
            self._evicted_kept = 0
            self._err_partial = b""
            self._err_eof = False
            self._stdout.clear()
            self._stdout_total = 0

    def wake(self) -> None:
        """Wakes every stream wait (the daemon exited)."""
        with self._cond:
            self._cond.notify_all()

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
                self._evict(self._err_lines.popleft(), len(self._err_raw.popleft()) + 1)
            self._cond.notify_all()

    def _evict(self, text: str, size: int) -> None:
        """Line _err_first leaves the kept window. Caller holds _cond."""
        self._err_kept -= size
        if not self._evicted or self._evicted[-1][1] != text:
            self._evicted.append((self._err_first, text, size))
            self._evicted_kept += size
            while self._evicted_kept > EVICTED_KEEP and len(self._evicted) > 1:
                self._evicted_kept -= self._evicted.popleft()[2]
        self._err_first += 1

    def _on_stdout(self, data: bytes) -> None:
        if data:
            with self._cond:
                self._stdout_total += len(data)
                room = STDOUT_KEEP - len(self._stdout)
                if room > 0:
                    self._stdout += data[:room]
            self.recorder.add("daemon stdout (socket mode)", data)

    # -- queries -------------------------------------------------------------
    def _lines_since(self, mark: int) -> tuple[list[str], int]:
        """(kept lines numbered mark and up, the next mark). Caller holds _cond."""
        start = max(mark, self._err_first) - self._err_first
        lines = list(self._err_lines)[start:] if start else list(self._err_lines)
        if mark < self._err_first:  # pushed out since: each distinct one still counts
            lines = [text for n, text, _ in self._evicted if n >= mark] + lines
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
        the lines written after this call. Every line the daemon had written
        by then is read first: a test marks after an answer (a sync), and the
        daemon's lines about what came before that answer must fall before
        the mark however late a loaded machine runs the stderr reader."""
        self._catch_up()
        with self._cond:
            return self._err_first + len(self._err_lines)

    def _catch_up(self) -> None:
        reader = self._err_reader
        if reader is None:
            return
        target = reader.written(lambda: self._err_total)  # not under _cond: the sink takes it
        with self._cond:
            self._cond.wait_for(lambda: self._err_total >= target or self._err_eof, timeout=self.timeout)

    def stderr_bytes(self) -> bytes:
        """The kept stderr (the last STDERR_KEEP bytes, whole lines)."""
        with self._cond:
            return b"".join(raw + b"\n" for raw in self._err_raw) + self._err_partial

    def stderr_text(self) -> str:
        return self.stderr_bytes().decode("utf-8", "backslashreplace")

    def tail_note(self) -> str:
        """The end of stderr, as the close of a message about the daemon."""
        tail = self.stderr_text()[-300:]
        return f"; stderr ends {tail!r}" if tail else ""

    def stderr_lines(self, since: int = 0) -> list[str]:
        """Kept stderr lines; since: a stderr_mark() (absolute line number)."""
        with self._cond:
            return self._lines_since(since)[0]

    def stdout_bytes(self) -> bytes:
        """What the daemon wrote to its stdout in socket modes (should be
        nothing; the first STDOUT_KEEP bytes are kept)."""
        with self._cond:
            return bytes(self._stdout)

    # -- waits ---------------------------------------------------------------
    def _stderr_over(self) -> bool:
        """True once no stderr line can come any more. Caller holds _cond."""
        return self._err_eof or (self._exited() and not any(t.is_alive() for t in self._threads
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
                if self._exited() and exited_at is None:
                    exited_at = time.monotonic()
                if exited_at is not None and (self._stderr_over() or
                                              time.monotonic() - exited_at >= STDERR_AFTER_EXIT):
                    self._check("while the harness waited for a stderr line")  # _cond is reentrant
                    raise NeverComes(f"no daemon stderr line {what}; the daemon "
                                     f"{self._status()}")
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
                self._cond.wait(min(left, 0.1) if self._exited() or bound is not None else left)

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

    def await_end(self) -> None:
        """After the exit, what the daemon wrote to stderr is read before a test
        looks at it: its stderr ends with it (the event), unless a process it
        left holds the pipe, then STDERR_AFTER_EXIT at most. Under load the
        reader got a dead daemon's last lines seconds after its exit."""
        with self._cond:
            self._cond.wait_for(self._stderr_over, timeout=STDERR_AFTER_EXIT)

    def wait_ready_line(self, pattern: str, deadline: float, check_alive, startup_timeout: float) -> None:
        """Start-up: waits for a stderr line matching `pattern` (the profile's
        ready_regex) until `deadline`; check_alive() raises once the daemon
        is gone. Woken by the exit watcher too."""
        rx = re.compile(pattern)
        seen = 0
        with self._cond:
            while True:
                lines, seen = self._lines_since(seen)
                if any(rx.search(line) for line in lines):
                    return
                check_alive()
                left = deadline - time.monotonic()
                if left <= 0:
                    raise DaemonTimeout(f"no stderr line matched {pattern!r} "
                                        f"within {startup_timeout:g} s")
                self._cond.wait(left)  # the exit watcher notifies too
