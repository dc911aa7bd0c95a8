"""What the library needs to know about the run and the running test,
without being handed it at every call: the run's wait deadline
(--wait-timeout), the clauses the running test cites (for check()), and the
running test's `bus` (so every wait watches its daemons).

Tests run one at a time in a process (xdist runs several processes), so a
module-level state is enough; the plugin sets it around each test."""

from __future__ import annotations

import time

from .pace import FACTOR, Pace

DEFAULT_WAIT = 5.0
RECENT = 120.0   # s: how long a round trip a test saw keeps raising this process's waits
GROWTH = 4.0     # the most the waits grow above the preflight's: each test's own time limit allows it


class _State:
    wait = DEFAULT_WAIT       # the run's wait: --wait-timeout, or the floor scaled by the pace
    pace = Pace()             # the subject's pace, from the preflight (common/pace.py)
    nodeid: str | None = None
    clauses: tuple = ()       # cited by the running test, in citation order
    bus = None                # the running test's Bus, once the fixture made it
    slowest: dict = {}        # the running test's slowest time for each kind of event (Pace's kinds)
    fixed = False             # --wait-timeout given: every wait is that, whatever the pace
    recent: list = []         # (when, s): round trips this process saw in the last RECENT s


state = _State()


def wait_timeout() -> float:
    """The deadline for one wait for the daemon: --wait-timeout when given,
    else the preflight's (FACTOR times its pace, at least the floor), raised
    to FACTOR times the slowest round trip the tests of this process saw in
    the last RECENT s: a machine that became busier after the preflight (a
    CI machine starting other jobs) slows every event alike, and a wait
    sized before it would end before events that still come."""
    if state.fixed:
        return state.wait
    now = time.monotonic()
    live = max((s for t, s in state.recent if now - t < RECENT), default=0.0)
    return max(state.wait, min(FACTOR * live, GROWTH * state.wait))


def restart_wait(last: float = 0.0) -> float:
    """The deadline for a worker's next restart after its exit, when its
    last restart delay was `last` s (0: none yet). The seed gives no delay
    ("exponential backoff", no base): FACTOR times the subject's own first
    delay (the preflight's restart item) or its last one, whichever is
    longer (room for any growth up to FACTOR), then one wait more. A caller
    whose count ends with restart_window_sec caps it there."""
    return max(state.pace.bound("restart", state.wait), FACTOR * last) + state.wait


def pace() -> Pace:
    return state.pace


def saw(kind: str, seconds: float) -> None:
    """The running test saw an event of this kind take `seconds`."""
    state.slowest[kind] = max(state.slowest.get(kind, 0.0), seconds)
    if kind == "answer":
        now = time.monotonic()
        state.recent = [(t, s) for t, s in state.recent if now - t < RECENT][-63:] + [(now, seconds)]


def slow_notes() -> list[str]:
    """What the running test saw take far longer than the preflight did."""
    return [n for n in (state.pace.slow_note(k, s, state.wait) for k, s in state.slowest.items()) if n]


def begin_test(nodeid: str, clauses) -> None:
    state.nodeid, state.clauses, state.bus, state.slowest = nodeid, tuple(clauses), None, {}


def end_test() -> None:
    state.nodeid, state.clauses, state.bus, state.slowest = None, (), None, {}


def watch() -> None:
    """Raises when a daemon of the running test crashed or exited without
    being asked to (see Daemon.check)."""
    if state.bus is not None:
        state.bus.watch()
