"""Reader for the mock worker's --log file.

One record per line, written with one write(2) by whichever instance:
    <monotonic ns> <pid> <worker id or -> <in|out|start|exit|signal> <raw line>
"in" is a line the daemon wrote to the worker, "out" a line the worker wrote
back; raw is the line without its newline. The file is shared by all
instances of a pool, so records are ordered by time across instances.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from ..common import context
from ..common.errors import DaemonTimeout, HarnessError, NeverComes
from ..common.waits import LATE

POLL = 0.005  # seconds between two looks at the file while waiting for a record


@dataclass(frozen=True)
class Record:
    t_ns: int
    pid: int
    worker: str | None
    kind: str
    raw: bytes

    @property
    def line(self) -> bytes:
        """The raw line with its newline, as it crossed the pipe."""
        return self.raw + b"\n"

    def json(self):
        import json
        return json.loads(self.raw)


def parse_record(line: bytes) -> Record:
    parts = line.split(b" ", 4)
    if len(parts) < 4:
        raise HarnessError(f"mock worker log: malformed record {line[:200]!r}")
    raw = parts[4] if len(parts) == 5 else b""
    try:
        t_ns, pid = int(parts[0]), int(parts[1])
    except ValueError:
        raise HarnessError(f"mock worker log: malformed record {line[:200]!r}") from None
    worker = parts[2].decode("utf-8", "replace")
    return Record(t_ns, pid, None if worker == "-" else worker, parts[3].decode(), raw)


class WorkerLog:
    def __init__(self, path, pool: str = "p"):
        self.path = str(path)
        self.pool = pool
        self._records: list[Record] = []
        self._offset = 0
        self._rest = b""

    def records(self) -> list[Record]:
        """All complete records written so far."""
        try:
            with open(self.path, "rb") as f:
                f.seek(self._offset)
                data = f.read()
        except FileNotFoundError:
            return list(self._records)
        self._offset += len(data)
        buf = self._rest + data
        end = buf.rfind(b"\n")
        if end >= 0:
            for line in buf[:end].split(b"\n"):
                if line:
                    self._records.append(parse_record(line))
            self._rest = buf[end + 1:]
        else:
            self._rest = buf
        return list(self._records)

    def select(self, kind: str | None = None, pid: int | None = None) -> list[Record]:
        return [r for r in self.records()
                if (kind is None or r.kind == kind) and (pid is None or r.pid == pid)]

    def received(self, pid: int | None = None) -> list[bytes]:
        """Lines the daemon wrote to the worker(s), newline included."""
        return [r.line for r in self.select("in", pid)]

    def sent(self, pid: int | None = None) -> list[bytes]:
        """Lines the worker(s) wrote to the daemon, newline included."""
        return [r.line for r in self.select("out", pid)]

    def pids(self) -> list[int]:
        """Pids of instances that started, in start order."""
        return [r.pid for r in self.select("start")]

    def wait_count(self, predicate, count: int, timeout: float | None = None, what: str = "",
                   check=None) -> list[Record]:
        """Waits until `count` records satisfy predicate; returns them.
        Every look runs the running test's watch (a crashed or exited daemon
        ends the wait at once); check, if given, is called too and may raise
        to stop the wait early (a NeverComes from it, after LATE s more for
        records written before the evidence). The default deadline is
        --wait-timeout."""
        timeout = context.wait_timeout() if timeout is None else timeout
        deadline = time.monotonic() + timeout
        ended = None
        while True:
            context.watch()
            if check is not None and ended is None:
                try:
                    check()
                except NeverComes as exc:
                    ended = exc
                    deadline = min(deadline, time.monotonic() + LATE)
            found = [r for r in self.records() if predicate(r)]
            if len(found) >= count:
                return found[:count]
            if time.monotonic() >= deadline:
                if ended is not None:
                    raise NeverComes(f"worker log {self.pool}: {len(found)} of {count} records "
                                     f"{what or 'matching the predicate'}: {ended}")
                raise DaemonTimeout(
                    f"worker log {self.pool}: {len(found)} of {count} records "
                    f"{what or 'matching the predicate'} after {timeout:g} s")
            time.sleep(POLL)  # the file has no change notification; poll it until the deadline

    def wait_for(self, predicate, timeout: float | None = None, what: str = "", check=None) -> Record:
        """Waits for the first record satisfying predicate; returns it."""
        return self.wait_count(predicate, 1, timeout, what, check)[0]

    def wait_received(self, needle: bytes, timeout: float | None = None) -> Record:
        """Waits until a worker received a line containing needle."""
        return self.wait_for(lambda r: r.kind == "in" and needle in r.raw, timeout,
                             f"with a received line containing {needle[:80]!r}")

    def wait_sent(self, needle: bytes, timeout: float | None = None) -> Record:
        """Waits until a worker wrote a line containing needle."""
        return self.wait_for(lambda r: r.kind == "out" and needle in r.raw, timeout,
                             f"with a sent line containing {needle[:80]!r}")
