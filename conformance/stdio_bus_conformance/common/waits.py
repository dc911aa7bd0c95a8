"""Waiting for events the harness can only poll for (/proc, files).

Every wait has a deadline, and ends as soon as its event can no longer
happen: each look first runs the running test's watch, which raises when a
daemon crashed (DaemonCrashed, naming the signal) or exited without being
asked to (DaemonExited). The default deadline is the run's --wait-timeout.
"""

from __future__ import annotations

import time

from . import context
from .errors import DaemonExited, DaemonTimeout, NeverComes

POLL = 0.005  # /proc and log files have no change notification: poll them until the deadline
LATE = 0.25   # s a wait ended by evidence still looks: what happened before the evidence may show late


def wait_until(predicate, timeout: float | None = None, what: str = "the condition", check=None):
    """Polls predicate until it returns a true value (returned) or the
    deadline (DaemonTimeout). check, if given, runs on every look too and may
    raise to end the wait early (e.g. when a worker is gone); a NeverComes
    from it (see daemon/evidence.py) ends the wait after LATE s more, in
    which predicate can still be met by what happened before the evidence."""
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
        try:
            value = predicate()
        except (FileNotFoundError, ProcessLookupError):
            # /proc of a process that is gone: if it was the daemon, say so
            context.watch()
            bus = context.state.bus
            if bus is not None and any(d.exited for d in bus.daemons):
                raise DaemonExited(f"{what}: the daemon is gone (it exited as the test asked)") from None
            raise
        if value:
            return value
        if time.monotonic() >= deadline:
            if ended is not None:
                raise NeverComes(f"{what}: {ended}")
            raise DaemonTimeout(f"{what}: not seen within {timeout:g} s")
        time.sleep(POLL)
