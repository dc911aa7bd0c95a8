"""One reader thread per output pipe of a process under test (the daemon's
stderr and socket-mode stdout, a worker's stdout and stderr).

The thread hands every chunk read to `sink` as it comes, and `b""` once at
the end of the stream (or on a read error, which ends it the same way), so
the sink can tell "nothing yet" from "nothing more".

The thread owns the pipe's read end: it closes it when the stream ends, and
nobody else does. A pipe closed under a reader still blocked in poll() (a
descendant of the process kept the pipe open) would hand its fd number to
the next pipe the harness opens, and the old reader would read the next
process's output as its own: one worker's answer taken for another's, an
answer "never" coming, only when teardown and the next start interleave.

`written()` says how many bytes the process has written so far, the sink's
and those still in the pipe: a test that took an answer from one pipe (a socket, stdout) can
first let the sink of another (the daemon's log) catch up with everything
written before that answer, however far behind a loaded machine left its
reader thread."""

from __future__ import annotations

import contextlib
import fcntl
import os
import select
import struct
import termios
import threading

CHUNK = 65536  # bytes per read: the sinks keep bounded tails, the size only sets the syscall count


class PipeReader(threading.Thread):
    """Reads the pipe until EOF into sink(bytes), then closes it. A read and
    its sink run under one lock, so that between them no byte is in neither
    the pipe nor the sink."""

    def __init__(self, pipe, sink, name: str):
        """pipe: the read end (a file object); the reader owns it from now on."""
        super().__init__(name=name, daemon=True)
        self.pipe, self.fd, self.sink = pipe, pipe.fileno(), sink
        self._lock = threading.Lock()
        self._done = False

    def run(self):
        poller = select.poll()
        poller.register(self.fd, select.POLLIN | select.POLLHUP | select.POLLERR)
        while True:
            with contextlib.suppress(OSError):  # a failed poll: the read below says so and ends the stream
                poller.poll()  # wait outside the lock: written() must not wait for the next write
            with self._lock:
                try:
                    data = os.read(self.fd, CHUNK)
                except OSError:
                    data = b""
                self.sink(data)
                if not data:
                    self._done = True
                    with contextlib.suppress(OSError):
                        self.pipe.close()  # only now may its fd number be reused
                    return

    def written(self, sunk) -> int:
        """What the process has written so far: sunk() (the sink's own count
        of bytes it had) plus the bytes still in the pipe, both read while no
        chunk is between the two. Call it holding none of the sink's locks."""
        with self._lock:
            if self._done:
                return sunk()
            try:
                buf = fcntl.ioctl(self.fd, termios.FIONREAD, b"\0\0\0\0")
            except OSError:
                return sunk()
            return sunk() + struct.unpack("i", buf)[0]


def start_reader(pipe, sink, name: str) -> PipeReader:
    """Starts a daemon thread reading the pipe (a file object, which it owns
    and closes at the end) until EOF into sink(bytes); returns it (join it
    after the process and its descendants are gone)."""
    t = PipeReader(pipe, sink, name)
    t.start()
    return t
