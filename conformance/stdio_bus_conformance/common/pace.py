"""The subject's pace: how long it took, in the preflight, for what the tests
wait for (to start, to answer, to restart a worker, to exit), and the waits
that follow from it.

A wait for an event that can still come lasts as long as the seed allows
(drain_timeout_sec, backpressure_timeout_sec, restart_window_sec: the tests
use those) or, where the seed gives no time, FACTOR times what the subject
took for the same kind of event in the preflight, and never less than the
run's floor (--wait-timeout, 5 s by default). So a daemon in Java or Python,
one under valgrind, or any daemon on a busy CI machine is judged by the same
clauses as a fast one on a quiet machine: its waits grow with it.

The preflight measures on several daemons at once (its items run side by
side), so its figures are those of a loaded moment; FACTOR leaves room for a
machine that becomes busier still. A test that sees the subject much slower
than this still finishes its waits (they are bounded) and the report notes
it (Pace.slow_note), so that a timeout there is read for what it may be.
"""

from __future__ import annotations

import dataclasses
import threading

FACTOR = 10.0        # a wait gives an event this many times the subject's slowest preflight time for it
FIRST_CONTACT = 60.0  # s: the preflight's first start and first answer, before any pace is known


def first_contact(fixed: float | None) -> float:
    """The wait for a first start or a first answer, before any pace is
    known: FIRST_CONTACT, or FACTOR times the wait the run was given
    (--wait-timeout), which fixes every other wait: a user who fixed the
    waits gets a first contact in proportion, not a minute per silent start."""
    return FACTOR * fixed if fixed else FIRST_CONTACT


@dataclasses.dataclass
class Pace:
    """The slowest time (s) the preflight saw for each kind of event; 0 when
    not measured (then the floor alone bounds its waits)."""
    start: float = 0.0        # exec to ready, its workers started
    answer: float = 0.0       # a request's round trip through the daemon and a worker
    restart: float = 0.0      # a worker's exit to its replacement's start
    exit: float = 0.0         # SIGTERM to the daemon's exit (workers that exit on SIGTERM)
    initialize: float = 0.0   # worker mode: the answer to the first request of a fresh worker

    def __post_init__(self):
        self._lock = threading.Lock()

    def saw(self, kind: str, seconds: float) -> None:
        """Records one measurement (the preflight's items run in threads)."""
        with self._lock:
            setattr(self, kind, max(getattr(self, kind), max(0.0, seconds)))

    def bound(self, kind: str, floor: float) -> float:
        """The wait for an event of this kind: FACTOR times its slowest
        preflight time, never less than floor."""
        return max(floor, FACTOR * getattr(self, kind))

    def to_json(self) -> dict:
        return {k: round(getattr(self, k), 4) for k in ("start", "answer", "restart", "exit", "initialize")}

    @classmethod
    def from_json(cls, data: dict | None) -> "Pace":
        data = data or {}
        return cls(**{k: float(data.get(k, 0.0)) for k in ("start", "answer", "restart", "exit", "initialize")})

    def describe(self) -> str:
        parts = [f"{k} {getattr(self, k):.3g} s" for k in ("start", "answer", "restart", "exit", "initialize")
                 if getattr(self, k)]
        return ", ".join(parts) or "not measured"

    def slow_note(self, kind: str, seconds: float, wait: float) -> str | None:
        """A note when a test saw an event take far longer than the preflight
        did (FACTOR / 2 times or more) and half its wait or more: the subject
        is much slower than its own preflight, and a wait may have ended
        before its event."""
        base = getattr(self, kind)
        if base <= 0 or seconds < max(wait / 2, FACTOR / 2 * base):
            return None
        return (f"the subject took {seconds:.2f} s for {WHAT[kind]} in this test, {seconds / base:.0f} times "
                f"its slowest in the preflight ({base:.3g} s); waits give {FACTOR:g} times that: if a wait "
                "of this test ran out, rerun it with a larger --wait-timeout")


WHAT = {"start": "a start", "answer": "a request's round trip", "restart": "a worker's restart",
        "exit": "its exit", "initialize": "a fresh worker's first answer"}
