"""What the library needs to know about the run and the running test,
without being handed it at every call: the run's wait deadline
(--wait-timeout), the clauses the running test cites (for check()), and the
running test's `bus` (so every wait watches its daemons).

Tests run one at a time in a process (xdist runs several processes), so a
module-level state is enough; the plugin sets it around each test."""

from __future__ import annotations

DEFAULT_WAIT = 5.0


class _State:
    wait = DEFAULT_WAIT       # --wait-timeout of the run
    nodeid: str | None = None
    clauses: tuple = ()       # cited by the running test, in citation order
    bus = None                # the running test's Bus, once the fixture made it


state = _State()


def wait_timeout() -> float:
    """The run's deadline for one wait for the daemon (--wait-timeout)."""
    return state.wait


def begin_test(nodeid: str, clauses) -> None:
    state.nodeid, state.clauses, state.bus = nodeid, tuple(clauses), None


def end_test() -> None:
    state.nodeid, state.clauses, state.bus = None, (), None


def watch() -> None:
    """Raises when a daemon of the running test crashed or exited without
    being asked to (see Daemon.check)."""
    if state.bus is not None:
        state.bus.watch()
