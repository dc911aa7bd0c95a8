"""Timestamped record of everything that crossed the daemon's boundary.

Every client line (both ways), every daemon stderr line, harness actions
(signals, connects, closes) go into one ``Recorder``; the mock workers' logs
add what the daemon wrote to each worker and what each worker wrote back.
``render`` merges them by CLOCK_MONOTONIC time (the mock's clock too).

The recorder is bounded whatever the software under test writes: each event
keeps at most MAX_SHOWN bytes (and its length), and each source keeps its
first HEAD_BYTES and its last TAIL_BYTES; what falls between is counted and
shown as one line in the transcript.
"""

from __future__ import annotations

import collections
import threading
import time

MAX_SHOWN = 2048            # bytes of one line shown in a transcript; the rest is counted
HEAD_BYTES = 256 * 1024     # per source: the first events kept whole...
TAIL_BYTES = 256 * 1024     # ...and the last ones
_OVERHEAD = 64              # bytes charged per event, so a flood of empty lines is bounded too


class _Source:
    __slots__ = ("head", "head_bytes", "tail", "tail_bytes", "dropped", "dropped_bytes")

    def __init__(self):
        self.head: list = []
        self.head_bytes = 0
        self.tail: collections.deque = collections.deque()
        self.tail_bytes = 0
        self.dropped = 0          # events between head and tail that were let go
        self.dropped_bytes = 0    # their total length


class Recorder:
    def __init__(self, head_bytes: int = HEAD_BYTES, tail_bytes: int = TAIL_BYTES):
        self.t0 = time.monotonic_ns()
        self._sources: dict[str, _Source] = {}
        self._lock = threading.Lock()
        self.head_bytes, self.tail_bytes = head_bytes, tail_bytes
        self._order = 0

    def add(self, source: str, data: bytes | str, t_ns: int | None = None) -> None:
        if isinstance(data, str):
            data = data.encode()
        length = len(data)
        kept = bytes(data[:MAX_SHOWN + 1]) if length > MAX_SHOWN + 1 else bytes(data)
        if length > len(kept) and data.endswith(b"\n"):
            kept += b"\n"  # keep the mark of a terminated line
        ev = (t_ns if t_ns is not None else time.monotonic_ns(), source, kept, length)
        cost = len(kept) + _OVERHEAD
        with self._lock:
            src = self._sources.get(source)
            if src is None:
                src = self._sources[source] = _Source()
            if src.head_bytes + cost <= self.head_bytes and not src.tail:
                src.head.append(ev)
                src.head_bytes += cost
                return
            src.tail.append(ev)
            src.tail_bytes += cost
            while src.tail_bytes > self.tail_bytes and len(src.tail) > 1:
                old = src.tail.popleft()
                src.tail_bytes -= len(old[2]) + _OVERHEAD
                src.dropped += 1
                src.dropped_bytes += old[3]

    def note(self, text: str) -> None:
        self.add("harness", text + "\n")

    def events(self) -> list[tuple[int, str, bytes]]:
        """Kept events (time, source, data), data cut to MAX_SHOWN (+1) bytes."""
        with self._lock:
            out = []
            for src in self._sources.values():
                out.extend((t, s, d) for t, s, d, _ in src.head)
                out.extend((t, s, d) for t, s, d, _ in src.tail)
        return out

    def _events_full(self) -> list[tuple[int, str, bytes, int]]:
        with self._lock:
            out = []
            for name, src in self._sources.items():
                out.extend(src.head)
                if src.dropped:
                    # shown where the gap is: just before the first kept tail event
                    t = src.tail[0][0] - 1 if src.tail else time.monotonic_ns()
                    out.append((t, name, f"[harness: {src.dropped} events ({src.dropped_bytes} bytes) from "
                                         f"this source not kept]\n".encode(), -1))
                out.extend(src.tail)
        return out

    def dropped(self) -> dict[str, tuple[int, int]]:
        """source -> (events, bytes) that were not kept."""
        with self._lock:
            return {n: (s.dropped, s.dropped_bytes) for n, s in self._sources.items() if s.dropped}


def show(data: bytes, length: int | None = None) -> str:
    """One line, printable: non-UTF-8 bytes escaped, trailing newline marked."""
    length = len(data) if length is None or length < 0 else length
    nl = data.endswith(b"\n")
    body = data[:-1] if nl else data
    full = length - (1 if nl else 0)
    extra = ""
    if full > MAX_SHOWN:
        extra = f" ...(+{full - MAX_SHOWN} bytes)"
        body = body[:MAX_SHOWN]
    text = body.decode("utf-8", "backslashreplace")
    text = text.replace("\r", "\\r").replace("\n", "\\n")
    return text + extra + ("" if nl else "  [no newline]")


def render(recorder: Recorder, worker_logs=(), max_bytes: int | None = None) -> str:
    """The merged transcript. worker_logs: iterable of (pool id, WorkerLog).
    max_bytes bounds the text: its first and last halves are kept."""
    events = list(recorder._events_full())
    for pool, log in worker_logs:
        try:
            records = log.records()
        except OSError:
            continue
        for r in records:
            who = f"worker {pool}/{r.worker if r.worker is not None else '-'} pid {r.pid}"
            if r.kind == "in":
                events.append((r.t_ns, f"daemon -> {who}", r.raw + b"\n", -1))
            elif r.kind == "out":
                events.append((r.t_ns, f"{who} -> daemon", r.raw + b"\n", -1))
            else:
                events.append((r.t_ns, f"{who} {r.kind}", r.raw + b"\n", -1))
    events.sort(key=lambda e: e[0])
    lines = ["# times in ms since the harness started the test; '[no newline]' marks a line "
             "sent or received without its terminating \\n"]
    for t, src, data, length in events:
        lines.append(f"{(t - recorder.t0) / 1e6:10.3f}  {src:<34} {show(data, length)}")
    text = "\n".join(lines) + "\n"
    if max_bytes is not None and len(text) > max_bytes:
        half = max_bytes // 2
        cut = len(text) - 2 * half
        text = (text[:half] + f"\n[harness: {cut} characters of transcript not kept]\n" + text[-half:])
    return text
