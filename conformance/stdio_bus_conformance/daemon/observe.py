"""What the tests observe about a running daemon beyond its messages: which
worker answered, the daemon's client sockets in /proc, and a worker being
failed. Shared by the test files that used to carry their own copies."""

from __future__ import annotations

import time

from ..common import context, procinfo
from ..common.context import wait_timeout
from ..common.errors import DaemonTimeout
from ..common.waits import wait_until
from .client import field
from .streams import worker_context


def pipes_held_pool(bus, id, instances, args=()):
    """Mock workers that leave a helper process holding their stdin, stdout
    and stderr: when one of them exits its pipes stay open, so only the exit
    itself (SIGCHLD) tells the daemon, not an EOF or a broken pipe."""
    p = bus.pool(id, instances, args)
    bus.expect_leftovers("helpers that hold the pipes of exited workers (sleep 60)")
    keep = 'exec 3<&0; sleep 60 <&3 3<&- & exec 3<&-; exec "$@"'
    return {"id": id, "command": "/bin/sh", "args": ["-c", keep, "sh", p["command"]] + p["args"],
            "instances": instances}


def pid_of(response):
    """The worker that answered: the mock puts its pid in every answer."""
    return field(response, "result", "pid")


def request_after_exit(client, session=None, timeout: float | None = None, streak: int = 1):
    """The answer to a request sent just after a worker was reaped. A daemon
    may have reaped the child without having run its exit handling yet (a
    runtime that reaps in one step and calls back in another, or one that
    waits a while for the rest of the worker's output): a request routed to
    that worker meanwhile is discarded by 7.1.2, which every reading allows.
    So each try waits briefly (the subject's pace) and requests are sent
    again until `streak` in a row are answered (as many as the workers left:
    then round-robin has gone past the one that exited); the caller judges
    which worker answered the last."""
    deadline = time.monotonic() + (wait_timeout() if timeout is None else timeout)
    answered = 0
    while True:
        try:
            got = client.request(session=session, timeout=context.state.pace.bound("answer", 0.5))
            answered += 1
            if answered >= streak:
                return got
        except DaemonTimeout:
            answered = 0
            if time.monotonic() >= deadline:
                raise


def socket_links(pid: int) -> set[str]:
    """The daemon's sockets: 'socket:[inode]' links in /proc/<pid>/fd."""
    return {v for v in procinfo.fds(pid).values() if v.startswith("socket:")}


def tracked_client(bus):
    """A new socket client, served once, and the daemon's fd link for it
    ('socket:[inode]' in /proc/<daemon>/fd), to watch the daemon close it."""
    d = bus.daemon
    before = socket_links(d.pid)
    c = bus.client()
    c.sync()
    new = wait_until(lambda: (lambda s: s if len(s) == 1 else None)(socket_links(d.pid) - before),
                     wait_timeout(), "exactly one new socket in the daemon's /proc/<pid>/fd")
    return c, next(iter(new))


def wait_link_closed(daemon, link: str, timeout: float | None = None) -> None:
    wait_until(lambda: link not in set(procinfo.fds(daemon.pid).values()), timeout,
               f"the daemon closing its fd for {link}")


def wait_worker_failed(bus, c, pool: str, pid: int, marker: bytes, since: int = 0, index=None) -> None:
    """Waits for the daemon to fail worker `pid` of `pool` for a line it
    wrote: a log line naming it (worker_context: its pid, pool or integer
    id; no level word is required, that is SB-I-34's), then its SIGTERM.
    Right after that line the worker wrote a notification for its own
    session carrying `marker`: once that reaches client c, the session
    outlived the line, which a daemon that failed the worker had invalidated
    (SB-5.3-2), so the failure can no longer come and the wait ends there.
    `since`: a stderr_mark() taken before the line was provoked; `index`:
    the worker's position(s) over all pools (see worker_context)."""
    def bound():
        if any(marker in x for x in c.received):
            raise AssertionError(f"worker {pid} was not failed: its session still routed a notification "
                                 f"it wrote after that line")
    d = bus.daemon
    about = worker_context(pid, pool, index)
    wait_until(lambda: d.streams.logged_lines(about, since), wait_timeout(),
               f"a daemon stderr line naming worker {pid} (pid, pool {pool!r} or its id)", check=bound)
    bus.worker_log(pool).wait_count(lambda r: r.kind == "signal" and r.pid == pid, 1, wait_timeout(),
                                    f"'signal' (SIGTERM to the worker {pid} that wrote it)", check=bound)
