"""Evidence that an awaited event can no longer come (issue 22, item 5).

A wait in the harness has a deadline; on a daemon with defects most waits
that fail would run to it although the daemon had already shown that the
event could not come. Each function here builds a *bound*: a callable the
waits (`Client.expect_closed`, `Client.recv_line`, `Client.recv_response`,
`DaemonStreams.wait_stderr_line` and the log waits on it, `WorkerLog.wait_count`,
`wait_until`) run on every look. A bound returns None while the event may
still come and raises `NeverComes` (a DaemonTimeout, so it reads like the
deadline, only sooner) with the evidence in its message once it cannot.

Only evidence that holds under every reading the judged clause allows goes
here: the daemon forwarded the very line it was to close the client on (a
worker's log shows it received it), delivered the very worker line it was
to refuse, answered a line sent after the one it was to close on, the
worker that was to answer logged its exit. A test uses a bound only where
that evidence makes the test fail under every reading anyway (it would have
failed at the deadline, or on a later assertion): a bound never turns a
pass into a failure, it makes a failure come sooner.
"""

from __future__ import annotations

import json

from ..common.errors import NeverComes


def pipe_unread(pid: int, fd: int) -> int | None:
    """Bytes written into the pipe at pid's fd and not read yet (FIONREAD on
    the pipe, opened through /proc), None when it cannot be told (the
    process or its fd gone, not a pipe)."""
    import fcntl
    import os
    import struct
    import termios
    try:
        f = os.open(f"/proc/{pid}/fd/{fd}", os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        return struct.unpack("i", fcntl.ioctl(f, termios.FIONREAD, b"\0" * 4))[0]
    except OSError:
        return None
    finally:
        os.close(f)


def answer_lost(logs, req_id, age: float, delivered=frozenset()) -> str | None:
    """Where an answer to req_id went, when it is lost: a worker of `logs`
    (WorkerLogs) wrote a response with that id (same JSON value and type)
    at least `age` s ago, its stdout pipe is empty (the daemon read it), and
    no client received it (`delivered`: every line the test's clients got;
    another client's request may have had the same id). The description,
    else None (not answered, answered just now, delivered to someone, or
    still in the pipe: then the daemon may be holding it back, as
    backpressure allows)."""
    import time
    now = time.monotonic_ns()
    for log in logs:
        for r in log.records():
            if r.kind != "out" or str(req_id).encode() not in r.raw:
                continue
            try:
                obj = json.loads(r.raw)
            except ValueError:
                continue
            if not (isinstance(obj, dict) and obj.get("id") == req_id and type(obj.get("id")) is type(req_id)
                    and ("result" in obj or "error" in obj)):
                continue
            if r.line in delivered:
                continue
            if (now - r.t_ns) / 1e9 < age or pipe_unread(r.pid, 1) != 0:
                return None
            return (f"lost: worker pid {r.pid} wrote the answer to id {req_id!r} "
                    f"{(now - r.t_ns) / 1e9:.1f} s ago and the daemon read it off the pipe, "
                    "but it never reached the client that asked")
    return None


def forwarded(log, needle: bytes, what: str = "the line"):
    """Ends a wait once a worker of `log` (a WorkerLog) received a line
    containing needle: the daemon accepted that line, so it will not close
    the client on it (nor drop it)."""
    def bound():
        for r in log.records():
            if r.kind == "in" and needle in r.raw:
                raise NeverComes(f"the daemon accepted {what}: it forwarded it to worker pid {r.pid} "
                                 f"(received {r.raw[:120]!r})")
    return bound


def delivered(client, needle: bytes, what: str = "the line"):
    """Ends a wait once `client` received a line containing needle: the
    daemon accepted that line (e.g. a worker line it was to refuse)."""
    def bound():
        for x in client.received:
            if needle in x:
                raise NeverComes(f"the daemon accepted {what}: it delivered it to {client.name} "
                                 f"({x[:120]!r})")
    return bound


def answered(client, req_id, what: str = ""):
    """Ends a wait once `client` received a response to req_id (same JSON
    value and type): the daemon read past whatever came before that request
    and kept serving the connection."""
    def bound():
        for x in client.received:
            try:
                obj = json.loads(x)
            except ValueError:
                continue
            if isinstance(obj, dict) and "id" in obj and obj["id"] == req_id and \
                    type(obj["id"]) is type(req_id) and ("result" in obj or "error" in obj):
                raise NeverComes(f"the daemon kept serving {client.name}: it answered {req_id!r}"
                                 + (f", {what}" if what else ""))
    return bound


def worker_exited(log, pid: int, needle: bytes, what: str = "the answer"):
    """Ends a wait for an answer once worker `pid`, which received the
    request, logged its exit without having written a line containing
    needle (its answer): a restarted worker does not hold its predecessor's
    requests, so nothing can bring that answer any more. Not for a wait that
    the daemon's own error reply would end (SB-X-8): a daemon may answer a
    request whose worker died, so such a wait has no evidence here."""
    def bound():
        recs = [r for r in log.records() if r.pid == pid]
        if any(r.kind == "out" and needle in r.raw for r in recs):
            return  # it answered: the answer may still be on its way through the daemon
        for r in recs:
            if r.kind == "exit":
                raise NeverComes(f"{what} can no longer come: worker pid {pid} exited "
                                 f"({r.raw[:60]!r}) without writing it")
    return bound


def worker_replaced(log, pid: int, what: str = "the failure of that worker"):
    """Ends a wait for the daemon's handling of worker `pid` (an error naming
    it, a signal to it) once that worker logged its exit and another one of
    its pool started after it: the daemon is done with that worker. The
    waits give LATE more seconds to lines written before it."""
    def bound():
        gone = None
        for r in log.records():
            if r.kind == "exit" and r.pid == pid and gone is None:
                gone = r
            elif gone is not None and r.kind == "start" and r.pid != pid:
                raise NeverComes(f"{what} was handled already: worker pid {pid} exited "
                                 f"({gone.raw[:40]!r}) and pid {r.pid} replaced it")
    return bound


def worker_started(log, what: str = "the daemon refusing to start"):
    """Ends a wait (a command line expected to fail) once a worker of `log`
    started: the daemon took its configuration and command line as valid."""
    def bound():
        for r in log.records():
            if r.kind == "start":
                raise NeverComes(f"{what} can no longer come: it started worker pid {r.pid}")
    return bound


def signal_ignored(daemon, sig: int):
    """Ends a wait for the daemon's reaction to signal sig once the harness
    sent it while the daemon ignored it (SIG_IGN in /proc/<pid>/status, before
    and after the kill): the kernel discarded it, the daemon never saw it."""
    def bound():
        if sig in daemon.ignored_signals:
            import signal as _signal
            raise NeverComes(f"the daemon ignores {_signal.Signals(sig).name} (SIG_IGN): "
                             f"the kernel discarded the signal the harness sent")
    return bound


def daemon_exited(daemon, what: str = "the event"):
    """Ends a wait once the daemon process has exited (for waits whose own
    watch lets an exit pass, e.g. after the test asked the daemon to exit)."""
    def bound():
        if daemon.exited:
            raise NeverComes(f"{what} can no longer come: the daemon exited "
                             f"(status {daemon.returncode})")
    return bound


def any_of(*bounds):
    """One bound that runs each of bounds (None entries skipped)."""
    bounds = [b for b in bounds if b is not None]

    def bound():
        for b in bounds:
            b()
    return bound


def run(bound) -> None:
    """Runs bound if it is one: a callable, or a list/tuple of callables."""
    if bound is None:
        return
    if isinstance(bound, (list, tuple)):
        for b in bound:
            if b is not None:
                b()
    else:
        bound()
