"""SIGTERM stops a run as Ctrl-C does.

A CI system cancels a job with SIGTERM (then SIGKILL after a grace period),
to the harness's process or to its whole group. Its default action would end
the harness at once: no reports, the unfinished tests never marked, and the
daemons and mock workers of the running tests orphaned. Raised as
KeyboardInterrupt instead, it takes the path Ctrl-C takes: each running test
is torn down (its daemon and workers killed), the controller marks what did
not finish `unfinished`, writes the reports, sweeps whatever carries the
run's mark and exits 2; xdist stops its workers as on Ctrl-C.
"""

from __future__ import annotations

import signal
import threading


_received = []


def _interrupt(signum, frame):
    # once: a second SIGTERM (a CI's repeat, or the group's copy reaching a
    # process already stopping) must not break the teardown that kills the
    # daemons. Not SIG_IGN: a process spawned after it would inherit that.
    if _received:
        return
    _received.append(signum)
    raise KeyboardInterrupt(f"signal {signal.Signals(signum).name}")


def sigterm_interrupts() -> bool:
    """Installs the handler in this process (harness controller or xdist
    worker). Only the main thread may set a handler: False elsewhere."""
    if threading.current_thread() is not threading.main_thread():
        return False
    signal.signal(signal.SIGTERM, _interrupt)
    # A shell starts a background job (`cmd &` in a script, some CI runners)
    # with SIGINT and SIGQUIT ignored, and an ignored signal stays ignored
    # across exec: every daemon under test would inherit that, and a daemon
    # that installs no handler of its own would be judged as ignoring them.
    # A daemon gets the dispositions it would get from a terminal.
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if signal.getsignal(signal.SIGQUIT) == signal.SIG_IGN:
        signal.signal(signal.SIGQUIT, signal.SIG_DFL)
    return True
