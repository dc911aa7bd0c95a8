"""One reader thread per output pipe of a process under test (the daemon's
stderr and socket-mode stdout, a worker's stdout and stderr).

The thread hands every chunk read to `sink` as it comes, and `b""` once at
the end of the stream (or on a read error, which ends it the same way), so
the sink can tell "nothing yet" from "nothing more"."""

from __future__ import annotations

import os
import threading

CHUNK = 65536  # bytes per read: the sinks keep bounded tails, the size only sets the syscall count


def start_reader(fd: int, sink, name: str) -> threading.Thread:
    """Starts a daemon thread reading fd until EOF into sink(bytes); returns it
    (join it after the process and its descendants are gone)."""
    def loop():
        while True:
            try:
                data = os.read(fd, CHUNK)
            except OSError:
                data = b""
            sink(data)
            if not data:
                return
    t = threading.Thread(target=loop, name=name, daemon=True)
    t.start()
    return t
