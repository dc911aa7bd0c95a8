"""stdio Bus conformance harness: launch a daemon under test, talk to it as
its clients, watch its workers, and judge it clause by clause against SPEC.md.

Test code imports from here:

    from stdio_bus_conformance import DaemonError, HarnessError, check, field, procinfo, wait_until
"""

from .common import procinfo
from .daemon import evidence
from .daemon.client import Client, field, next_id, parse_line
from .common.context import pace, restart_wait, wait_timeout
from .common.errors import (ConnectionClosed, DaemonCrashed, DaemonError, DaemonExited, DaemonTimeout,
                            HarnessError, Lost, NeverComes)
from .spec.judge import ClauseFailure, check, checking
from .common.waits import wait_until
from .daemon.observe import pid_of, pipes_held_pool, request_after_exit, socket_links, tracked_client, wait_link_closed, wait_worker_failed
from .daemon.streams import INPUT_OVERFLOW, MALFORMED_INPUT, connection_context, has_level, worker_context
from .daemon.workerlog import Record, WorkerLog

__all__ = ["Client", "ClauseFailure", "ConnectionClosed", "DaemonCrashed", "DaemonError", "DaemonExited",
           "DaemonTimeout", "HarnessError", "Lost", "NeverComes", "evidence", "Record", "WorkerLog", "check", "checking", "field", "next_id",
           "pace", "parse_line", "pid_of", "restart_wait", "pipes_held_pool", "procinfo", "request_after_exit", "socket_links", "tracked_client", "wait_link_closed", "wait_timeout", "wait_until", "wait_worker_failed",
           "connection_context", "has_level", "worker_context", "INPUT_OVERFLOW", "MALFORMED_INPUT"]
