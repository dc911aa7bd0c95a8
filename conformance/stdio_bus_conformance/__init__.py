"""stdio Bus conformance harness: launch a daemon under test, talk to it as
its clients, watch its workers, and judge it clause by clause against SPEC.md.

Test code imports from here:

    from stdio_bus_conformance import DaemonError, HarnessError, field, procinfo
"""

from . import procinfo
from .client import Client, field, next_id, parse_line
from .errors import ConnectionClosed, DaemonError, DaemonExited, DaemonTimeout, HarnessError
from .workerlog import Record, WorkerLog

__all__ = ["Client", "ConnectionClosed", "DaemonError", "DaemonExited", "DaemonTimeout",
           "HarnessError", "Record", "WorkerLog", "field", "next_id", "parse_line", "procinfo"]
