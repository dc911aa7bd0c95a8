"""Timestamped record of everything that crossed the daemon's boundary.

Every client line (both ways), every daemon stderr line, harness actions
(signals, connects, closes) go into one ``Recorder``; the mock workers' logs
add what the daemon wrote to each worker and what each worker wrote back.
``render`` merges them by CLOCK_MONOTONIC time (the mock's clock too).
"""

from __future__ import annotations

import threading
import time

MAX_SHOWN = 2048  # bytes of one line shown in a transcript; the rest is counted


class Recorder:
    def __init__(self):
        self.t0 = time.monotonic_ns()
        self._events: list[tuple[int, str, bytes]] = []
        self._lock = threading.Lock()

    def add(self, source: str, data: bytes | str, t_ns: int | None = None) -> None:
        if isinstance(data, str):
            data = data.encode()
        with self._lock:
            self._events.append((t_ns if t_ns is not None else time.monotonic_ns(), source, data))

    def note(self, text: str) -> None:
        self.add("harness", text + "\n")

    def events(self) -> list[tuple[int, str, bytes]]:
        with self._lock:
            return list(self._events)


def show(data: bytes) -> str:
    """One line, printable: non-UTF-8 bytes escaped, trailing newline marked."""
    nl = data.endswith(b"\n")
    body = data[:-1] if nl else data
    extra = ""
    if len(body) > MAX_SHOWN:
        extra = f" ...(+{len(body) - MAX_SHOWN} bytes)"
        body = body[:MAX_SHOWN]
    text = body.decode("utf-8", "backslashreplace")
    text = text.replace("\r", "\\r").replace("\n", "\\n")
    return text + extra + ("" if nl else "  [no newline]")


def render(recorder: Recorder, worker_logs=()) -> str:
    """The merged transcript. worker_logs: iterable of (pool id, WorkerLog)."""
    events = [(t, src, data) for t, src, data in recorder.events()]
    for pool, log in worker_logs:
        try:
            records = log.records()
        except OSError:
            continue
        for r in records:
            who = f"worker {pool}/{r.worker if r.worker is not None else '-'} pid {r.pid}"
            if r.kind == "in":
                events.append((r.t_ns, f"daemon -> {who}", r.raw + b"\n"))
            elif r.kind == "out":
                events.append((r.t_ns, f"{who} -> daemon", r.raw + b"\n"))
            else:
                events.append((r.t_ns, f"{who} {r.kind}", r.raw + b"\n"))
    events.sort(key=lambda e: e[0])
    lines = ["# times in ms since the harness started the test; '[no newline]' marks a line "
             "sent or received without its terminating \\n"]
    for t, src, data in events:
        lines.append(f"{(t - recorder.t0) / 1e6:10.3f}  {src:<34} {show(data)}")
    return "\n".join(lines) + "\n"
