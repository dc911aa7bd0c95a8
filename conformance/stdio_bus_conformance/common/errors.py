"""Who is to blame when a test does not pass.

The outcome of a test depends on the class of the exception that ended it:

* ``AssertionError`` and ``DaemonError`` (and subclasses) count against the
  daemon under test: the test outcome is ``fail`` (or ``warn`` when only
  SHOULD/MAY clauses are cited).
* ``HarnessError`` and every other exception are the suite's fault: the outcome
  is ``harness-error`` and the daemon is never blamed for them.

Library code that talks to the daemon therefore converts every I/O problem
the daemon can cause (closed socket, broken pipe, garbage on stdout, timeout)
into a ``DaemonError``, and raises ``HarnessError`` for its own problems
(missing mock worker, bad arguments, fixture misuse).
"""


class HarnessError(Exception):
    """A problem that is the conformance suite's fault, not the daemon's."""


class DaemonError(Exception):
    """The daemon under test misbehaved (counts like a failed assertion)."""


class DaemonTimeout(DaemonError):
    """The daemon did not produce an expected event before the deadline."""


class NeverComes(DaemonTimeout):
    """A wait ended before its deadline because the daemon had already shown
    that the awaited event can no longer come (it accepted the line it was to
    close the client on, the worker that would answer is gone, it exited).
    The message names that evidence. A DaemonTimeout, so code that reads a
    timeout as "it did not come" reads this the same way, only sooner."""


class Lost(DaemonTimeout):
    """A message the harness saw sent is gone: a worker wrote the answer,
    the daemon (alive) read it off the worker's pipe, and the client that
    asked never got it (issue 37 item 4). The message says "lost" and
    `clause` names the clause that promises its delivery (SB-6.3.1-2); it is
    judged, as any failure, by the clause the test checks: the loss may
    follow from a defect that test is about (a request never recorded is
    rightly discarded when its answer comes, 6.3.1-4). A DaemonTimeout, so
    code that reads a timeout as "it did not come" reads this the same way."""

    def __init__(self, clause: str, message: str):
        super().__init__(message)
        self.clause = clause


class ConnectionClosed(DaemonError):
    """The daemon closed a client connection the test expected to stay open."""


class DaemonExited(DaemonError):
    """The daemon process exited when the test expected it to keep running."""


class DaemonCrashed(DaemonExited):
    """The daemon died of a signal the harness did not send (a crash). Always
    a finding: never read as "the daemon closed the connection"."""

    def __init__(self, message: str, signame: str = ""):
        super().__init__(message)
        self.signame = signame
