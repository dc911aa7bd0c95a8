"""The preflight: a few seconds of systemic checks before the tests.

Most tests stand on behaviours they do not judge: that the daemon starts and
answers in their mode, exits on SIGTERM, restarts a worker... When one of
these is broken, every test standing on it would fail on its own clause for a
defect that is not its own (and each would burn its deadlines). The preflight
judges each behaviour once, on its own clause; a test standing on a broken
item is `blocked` (never a pass, never a fail of its own clause), and the
report opens with the root causes and how many tests each blocked.

Items (each in one mode, all at once in threads; well under 30 s):

  start-<mode>   the daemon starts and answers a request           SB-4.1.1-1/-3/-4
  sigterm        it exits with status 0 on SIGTERM                   SB-10.1-1, SB-10.2-6
  sigint         it exits with status 0 on SIGINT                    SB-10.1-2, SB-10.2-6
  stdin-eof      stdio mode: it exits with status 0 at end of stdin  SB-I-5
  restart-exit0  a worker that exits with status 0 is restarted      SB-7.1.3-1
  restart-crash  a worker killed by a signal is restarted            SB-7.1.3-1
  two-pools      with two pools, requests reach both (round robin)   SB-6.1.3-1
  pipes          each worker's stdin and stdout are pipes (by file     SB-3.3-1
                 type) whose other ends the daemon holds
  full-pipe      100 lines of 4 KiB to a worker that reads slowly      SB-5.1.1-3
                 arrive whole, every byte, none lost or cut
  line-64k       a 64 KiB line passes both ways                      SB-5.1.1-3
  big-line       a line larger than a pipe buffer passes both ways   SB-5.1.1-3
  burst          500 pipelined requests to one worker are answered   SB-6.3.1-2
  slow-reader    1 MiB of answers to a client that reads nothing     SB-7.3.1-1 (dropped),
                 until its worker has written them all arrive whole  SB-8.1-2 (not queued)
  malformed      a malformed client line closes that client only     SB-4.3-1

How tests stand on items: every test stands on start-<its mode>; a test that
signals the daemon (d.signal) stands on sigterm/sigint, one that closes the
stdio client's stdin on stdin-eof, one that starts two pools or more on
two-pools, one whose client sends more than a pipe holds before its next
answer on full-pipe (all found as they happen); others declare
@pytest.mark.stands_on("restart-crash", ...). A test whose first cited clause
is the one the item was found broken on (or the same behaviour restated) is
never blocked by it: it judges that behaviour itself, on that clause.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import json
import os
import select
import signal
import socket
import threading
import time

from . import contain, evidence
from .items import ITEMS, MODES_PREFERRED, SIGNAL_ITEMS, Result, Results
from .bus import Bus
from .process import describe_status
from ..common import procinfo
from ..common.pace import FACTOR, Pace, first_contact
from ..common.errors import ConnectionClosed, DaemonCrashed, DaemonError, DaemonExited, DaemonTimeout, HarnessError


class Broken(Exception):
    """The item's behaviour is broken: the message says how; clause, when
    given, is the one this way of breaking it violates (else the item's)."""

    def __init__(self, message: str, clause: str | None = None):
        super().__init__(message)
        self.clause = clause


class NotJudged(Exception):
    """The item could not be judged (e.g. the daemon does not even start)."""


# -- the checks -------------------------------------------------------------------------
def _serve_one(bus: Bus, **start) -> None:
    """Starts the daemon with one worker and has it answer one request,
    timing both for the run's pace (common/pace.py)."""
    t0 = time.monotonic()
    d = bus.start(instances=start.pop("instances", 1), **start)
    t1 = time.monotonic()
    c = bus.client()
    c.request(timeout=bus.timeout)
    bus.ctx.pace.saw("start", t1 - t0)
    bus.ctx.pace.saw("answer", time.monotonic() - t1)
    return d


def _start(bus: Bus) -> None:
    try:
        _serve_one(bus)
    except DaemonCrashed as exc:
        raise Broken(f"the daemon died of {exc.signame} at start or at its first request") from None
    except DaemonError as exc:
        raise Broken(f"no answer to a first request in {bus.mode} mode: {exc}") from None


def _signal_exit(sig: int):
    def run(bus: Bus) -> None:
        # judged on a daemon that runs, even one that never answers
        t0 = time.monotonic()
        try:
            d = bus.start(instances=1)
        except DaemonError as exc:
            raise NotJudged(f"the daemon does not start: {exc}") from None
        started = time.monotonic() - t0
        try:
            bus.client().request(timeout=min(1.0, bus.timeout))
        except DaemonCrashed as exc:
            raise NotJudged(f"the daemon died of {exc.signame} at its first request") from None
        except DaemonError:
            pass  # not serving is start-<mode>'s finding, not this one's
        d.signal(sig)
        t0 = time.monotonic()
        name = signal.Signals(sig).name
        # before any pace is known: a daemon slow to start is given as much more to exit
        grace = max(bus.profile.shutdown_timeout, FACTOR * started)
        try:
            rc = d.wait_exit(grace)
        except DaemonCrashed as exc:
            raise Broken(f"the daemon died of {exc.signame} on {name}") from None
        except DaemonError:
            raise Broken(f"the daemon did not exit within {grace:g} s of {name}") from None
        if rc != 0:
            raise Broken(f"the daemon {describe_status(rc)} on {name}, not 0", "SB-10.2-6")
        bus.ctx.pace.saw("exit", time.monotonic() - t0)
    return run


def _stdin_eof(bus: Bus) -> None:
    d = _serve_one(bus)
    bus.client().close()
    grace = bus.profile.shutdown_timeout
    try:
        rc = d.wait_exit(grace)
    except DaemonCrashed as exc:
        raise Broken(f"the daemon died of {exc.signame} at the end of stdin") from None
    except DaemonError:
        raise Broken(f"the daemon did not exit within {grace:g} s of the end of its stdin") from None
    if rc != 0:
        raise Broken(f"the daemon {describe_status(rc)} at the end of stdin, not 0")


RESTART_WINDOW = 10  # restart_window_sec of the restart items: their wait for a first restart


def _restart(sig: int, how: str):
    def run(bus: Bus) -> None:
        d = _serve_one(bus, overrides={"limits": {"restart_window_sec": RESTART_WINDOW}})
        log = bus.worker_log()
        first = log.pids()[0]
        os.kill(first, sig)
        # The seed gives no first restart delay; a restart after the window would leave
        # its count meaningless (7.1.3), so the window bounds the wait, with a wait more.
        limit = RESTART_WINDOW + bus.timeout
        try:
            log.wait_count(lambda r: r.kind == "start" and r.pid != first, 1, limit,
                           "'start' of a new worker", check=lambda: d.check("while its worker restarted"))
        except DaemonCrashed as exc:
            raise Broken(f"the daemon died of {exc.signame} when its worker {how}") from None
        except DaemonExited as exc:
            raise Broken(f"when its worker {how}: {exc}") from None
        except DaemonError:
            raise Broken(f"no worker was started again within {limit:g} s after the only worker {how}") \
                from None
        new = log.select("start")[-1]
        gone = [r for r in log.records() if r.kind == "exit" and r.pid == first]
        if gone:
            bus.ctx.pace.saw("restart", (new.t_ns - gone[0].t_ns) / 1e9)
        new = new.pid
        try:
            got = bus.client().request(timeout=bus.timeout)
        except DaemonError as exc:
            raise Broken(f"the restarted worker does not serve: {exc}") from None
        if got.get("result", {}).get("pid") != new:
            raise Broken(f"the answer came from pid {got.get('result', {}).get('pid')}, not the restarted "
                         f"worker {new}")
    return run


def _two_pools(bus: Bus) -> None:
    d, mark = None, 0
    try:
        d = bus.start(pools=[bus.pool("a", 1), bus.pool("b", 1)])
        c = bus.client()
        want = {bus.worker_pids("a")[0], bus.worker_pids("b")[0]}
        mark = d.streams.stderr_mark()
        seen = {c.request(timeout=bus.timeout).get("result", {}).get("pid") for _ in range(4)}
        d.check()
    except DaemonCrashed as exc:
        raise Broken(f"the daemon died of {exc.signame} with two pools") from None
    except DaemonError as exc:
        reached = any(log.received() for log in bus.worker_logs())
        said = [line for line in (d.streams.stderr_lines(mark) if d is not None else []) if "mock_worker[" not in line]
        raise Broken(f"with two pools, a request without a session got no answer ({exc})"
                     + ("" if reached else ": it reached neither worker")
                     + (f"; the daemon said: {said[-1][:200]!r}" if said else "")) from None
    if seen != want:
        raise Broken(f"4 requests without a session reached {len(seen & want)} of the 2 workers of two pools")


def _pipes(bus: Bus) -> None:
    """By file type (a FIFO is a pipe, whatever its /proc link text) and by
    identity: the daemon holds the other end of each."""
    try:
        d = _serve_one(bus)
    except DaemonError as exc:
        raise NotJudged(f"the daemon does not serve: {exc}") from None
    pid = bus.worker_pids()[0]
    held = {f.key for f in procinfo.open_files(d.pid).values()}
    for fd, name in ((0, "stdin"), (1, "stdout")):
        f = procinfo.open_file(pid, fd)
        if f is None:
            raise Broken(f"the worker's {name} is closed")
        if f.kind != "pipe":
            raise Broken(f"the worker's {name} is a {f.kind}, not a pipe")
        if f.key not in held:
            raise Broken(f"the daemon does not hold the other end of the worker's {name} pipe")


def _full_pipe(bus: Bus) -> None:
    """Lines sent to a worker that reads nothing: its stdin pipe fills, and
    what it does not take must wait in the daemon, not be dropped or cut.
    The worker never reads (--stall read); the harness reads its pipe in its
    place (opened through /proc), and only once the daemon has stopped
    writing to it with most of the lines still to go: the daemon has met a
    full pipe, whatever its pace (no race with a worker that reads)."""
    n, size = 100, 4096   # 400 KiB: several times what a pipe holds
    try:
        d = bus.start(pools=[bus.pool("p", 1, args=["--stall", "read"])])
        c = bus.client()
        pid = bus.worker_pids()[0]
        # notifications: the worker answers none, so nothing flows back while the daemon writes
        lines = [json.dumps({"jsonrpc": "2.0", "method": "full/note", "sessionId": "full",
                             "params": {"n": i, "pad": f"{i:06d}" * (size // 6)}}, separators=(",", ":")).encode()
                 + b"\n" for i in range(n)]
        # A daemon may stop reading this client while the worker's pipe is full
        # (backpressure, 7.3.1): the send is a flow that may finish only once the
        # harness reads the pipe, so it runs beside (its error is judged at the end).
        sent: list = []

        def send():
            try:
                c.send(b"".join(lines), timeout=8 * bus.timeout)
            except DaemonError as exc:
                sent.append(exc)
        if procinfo.open_file(pid, 0) is None or procinfo.open_file(pid, 0).kind != "pipe":
            # not a pipe the harness can read in its place: that is the pipes item's to judge
            raise NotJudged("the worker's stdin is not a pipe (the pipes item judges it)")
        sender = threading.Thread(target=send, daemon=True)
        sender.start()
        pipe = os.open(f"/proc/{pid}/fd/0", os.O_RDONLY | os.O_NONBLOCK)
    except DaemonCrashed as exc:
        raise Broken(f"the daemon died of {exc.signame} writing to a worker that reads slowly") from None
    except (DaemonError, OSError) as exc:
        raise Broken(f"{n} lines of {size // 1024} KiB to a worker that reads nothing: {exc}") from None
    try:
        # the daemon met a full pipe: it holds at least half a pipe and stopped writing
        quiet = max(0.2, FACTOR * bus.ctx.pace.answer)
        last, since, deadline = -1, time.monotonic(), time.monotonic() + bus.timeout + quiet
        while True:
            d.check("while it wrote to a worker that reads nothing")
            held = evidence.pipe_unread(pid, 0) or 0
            now = time.monotonic()
            if held != last:
                last, since = held, now
            elif held >= 32 * 1024 and now - since >= quiet:
                break
            if now > deadline:
                raise Broken(f"the daemon wrote {held} bytes to a worker that reads nothing, then no more "
                             f"within {bus.timeout:g} s")
            time.sleep(0.01)  # the poll interval of this deadline loop (a pipe has no notification)
        # now read in the worker's place: every line must come, whole, in order
        got, buf, moved = [], b"", time.monotonic()
        while len(got) < n and time.monotonic() - moved < bus.timeout:
            d.check("while a worker's pipe was read")
            if not select.select([pipe], [], [], 0.05)[0]:
                continue
            chunk = os.read(pipe, 1 << 16)
            if chunk:
                moved = time.monotonic()
                buf += chunk
                *done, buf = buf.split(b"\n")
                got += [x + b"\n" for x in done]
    except DaemonCrashed as exc:
        raise Broken(f"the daemon died of {exc.signame} writing to a worker that reads slowly") from None
    except DaemonError as exc:
        raise Broken(f"{n} lines of {size // 1024} KiB to a worker that reads nothing: {exc}") from None
    finally:
        os.close(pipe)
    sender.join(bus.timeout)
    if sent and len(got) < n:
        raise Broken(f"{n} lines of {size // 1024} KiB to a worker that reads nothing: {sent[0]}")
    whole = set(lines)
    cut = [x for x in got if x not in whole]
    if cut:
        raise Broken(f"a worker whose pipe was full got {len(cut)} line(s) cut or altered (e.g. {len(cut[0])} "
                     f"bytes of a {len(lines[0])}-byte line): lost, the daemon dropped what the full pipe did "
                     "not take")
    if len(got) < n:
        raise Broken(f"a worker whose pipe was full got {len(got)} of {n} lines of {size // 1024} KiB: lost, the "
                     "daemon dropped what the full pipe did not take")


def _line_both_ways(kib: int):
    def run(bus: Bus) -> None:
        try:
            _serve_one(bus)
            c = bus.client()
            pad = "x" * (kib * 1024)
            line = json.dumps({"jsonrpc": "2.0", "id": "big", "method": "echo", "params": {"pad": pad}},
                              separators=(",", ":")).encode() + b"\n"
            c.send(line)
            got = c.recv_response("big", timeout=bus.timeout)
        except DaemonCrashed as exc:
            raise Broken(f"the daemon died of {exc.signame} on a {kib} KiB line") from None
        except DaemonError as exc:
            raise Broken(f"a {kib} KiB line: {exc}") from None
        if got.get("result", {}).get("params", {}).get("pad") != pad:
            raise Broken(f"a {kib} KiB line did not come back whole")
    return run


def _burst(bus: Bus) -> None:
    n = 500
    try:
        _serve_one(bus)
        c = bus.client()
        c.send(b"".join(json.dumps({"jsonrpc": "2.0", "id": f"b{i}", "method": "echo", "sessionId": "burst"},
                                   separators=(",", ":")).encode() + b"\n" for i in range(n)))
        for i in range(n):
            c.recv_response(f"b{i}", timeout=bus.timeout)
    except DaemonCrashed as exc:
        raise Broken(f"the daemon died of {exc.signame} under a burst of {n} requests") from None
    except DaemonError as exc:
        raise Broken(f"a burst of {n} pipelined requests on one session: {exc}") from None


def _slow_reader(bus: Bus) -> None:
    """A client with a small receive buffer that reads nothing until its
    worker has written every answer: what does not fit in the socket waits
    in the daemon's output queue (1 MiB, under the 4 MiB default cap, so no
    backpressure is due), and all of it arrives once the client reads."""
    n = 64
    try:
        d = _serve_one(bus)
        family = socket.AF_UNIX if bus.mode == "unix" else socket.AF_INET
        s = socket.socket(family, socket.SOCK_STREAM)
        try:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            s.settimeout(bus.timeout)
            s.connect(d.address)
            s.sendall(b"".join(json.dumps({"jsonrpc": "2.0", "id": f"slow-{i}", "method": "echo",
                                           "sessionId": "slow", "params": {"mock": {"big": 16 * 1024}}},
                                          separators=(",", ":")).encode() + b"\n" for i in range(n)))
            try:
                bus.worker_log().wait_count(lambda r: r.kind == "out" and b'"slow-' in r.raw, n, bus.timeout,
                                            f"{n} answers written by the worker", check=d.check)
            except DaemonTimeout:
                # it stopped taking the worker's output (blocked in a write to us, or
                # backpressure long before its cap): not queueing is SB-8.1-2's to judge
                raise Broken("the daemon stopped taking its worker's output while it held at most 1 MiB for "
                             "a client that does not read (backpressure is due only beyond 4 MiB)",
                             "SB-8.1-2") from None
            # A probe on the same session (same worker) is answered after every answer
            # before it. A daemon that drops lines may drop a probe sent while it
            # still holds data for us: ask again whenever nothing is waiting to be read.
            # The deadline counts from the last bytes received: a slow daemon (or a
            # busy machine) still delivering is waited for; one that stopped is not.
            buf, probes, deadline = b"", 0, time.monotonic() + bus.timeout
            while b'"slow-end-' not in buf:
                d.check("while a slow client read its answers")
                if time.monotonic() > deadline:
                    raise Broken(f"the answers to a client that read nothing for a while stopped "
                                 f"arriving once it read: nothing for {bus.timeout:g} s, "
                                 f"{len(buf)} bytes received")
                if select.select([s], [], [], 0.05)[0]:  # poll interval of this deadline loop
                    chunk = s.recv(1 << 16)
                    if not chunk:
                        raise Broken("the daemon closed a client that read nothing for a while "
                                     "(1 MiB of answers, under the default cap)")
                    buf += chunk
                    deadline = time.monotonic() + bus.timeout
                    continue
                s.sendall(b'{"jsonrpc":"2.0","id":"slow-end-%d","method":"echo","sessionId":"slow"}\n' % probes)
                probes += 1
        finally:
            s.close()
    except DaemonCrashed as exc:
        raise Broken(f"the daemon died of {exc.signame} with a client that does not read") from None
    except DaemonError as exc:
        raise Broken(f"a client that reads nothing for a while: {exc}") from None
    got = sum(1 for i in range(n) if f'"slow-{i}"'.encode() in buf)
    if got < n:
        raise Broken(f"a client that read nothing while {n} answers of 16 KiB were written for it got "
                     f"{got} of them: the daemon dropped what its socket did not take")


def _malformed(bus: Bus) -> None:
    try:
        d = _serve_one(bus)
        bad, good = bus.client(), bus.client()
        good.request(timeout=bus.timeout)
        bad.send(b"{this is not json\n")
        try:
            bad.expect_closed(timeout=bus.timeout)
        except DaemonCrashed:
            raise
        except DaemonError:
            raise Broken("the client that sent a malformed line was not closed") from None
        good.request(timeout=bus.timeout)
        d.check("after a malformed line")
    except DaemonCrashed as exc:
        raise Broken(f"the daemon died of {exc.signame} after a malformed client line") from None
    except (DaemonExited, ConnectionClosed) as exc:
        raise Broken(f"after a malformed line from another client: {exc}") from None
    except DaemonError as exc:
        raise Broken(f"after a malformed line from another client: {exc}") from None


CHECKS = {
    "start-stdio": _start, "start-unix": _start, "start-tcp": _start,
    "sigterm": _signal_exit(signal.SIGTERM), "sigint": _signal_exit(signal.SIGINT),
    "stdin-eof": _stdin_eof,
    "restart-exit0": _restart(signal.SIGTERM, "exited with status 0 (it was sent SIGTERM by someone else)"),
    "restart-crash": _restart(signal.SIGKILL, "was killed by SIGKILL"),
    "two-pools": _two_pools, "pipes": _pipes, "full-pipe": _full_pipe, "line-64k": _line_both_ways(64),
    "big-line": _line_both_ways(256), "burst": _burst, "slow-reader": _slow_reader,
    "malformed": _malformed,
}


# -- running ------------------------------------------------------------------------------
def _run_item(ctx, name: str, mode: str, notes: list) -> Result:
    item = ITEMS[name]
    t0 = time.monotonic()
    clause = item.clause
    token = f"{ctx.token}-preflight-{name}"
    # teardown: whatever SIGTERM does is the sigterm item's to judge; here, kill soon
    bus = Bus(dataclasses.replace(ctx, token=token, term_grace=0.5), mode, f"preflight::{name}[{mode}]",
              sweep=False)
    try:
        CHECKS[name](bus)
        status, message = "ok", ""
    except Broken as exc:
        status, message = "broken", str(exc)
        clause = exc.clause or item.clause
    except NotJudged as exc:
        status, message = "not judged", str(exc)
    except HarnessError as exc:
        status, message = "not judged", f"harness error: {exc}"
    except Exception as exc:  # the preflight must never stop the run: say so and go on
        status, message = "not judged", f"harness error: {exc.__class__.__name__}: {exc}"
    finally:
        try:
            bus.stop()
        except DaemonCrashed:
            pass
        finally:
            contain.kill_marked(token)
            bus.cleanup()
    notes.append(bus.findings)
    return Result(name, status, clause, mode, message, time.monotonic() - t0)


def paced(ctx, pace: Pace, *, preflight: bool = False):
    """The run's context once the pace is known: every wait of ctx bounded by
    the pace (common/pace.py), never less than what ctx gave. With
    --wait-timeout given (ctx.fixed_wait) the tests' waits stay as given; the
    preflight's own items still follow the pace, since a broken item takes
    clauses from the run and must not depend on how busy the machine was
    (a self-test run at --wait-timeout 0.4 beside a CI run found an item
    broken that was only late)."""
    if ctx.fixed_wait and not preflight:
        return dataclasses.replace(ctx, pace=pace)
    prof = ctx.profile
    prof = dataclasses.replace(prof, startup_timeout=pace.bound("start", prof.startup_timeout),
                               shutdown_timeout=pace.bound("exit", prof.shutdown_timeout))
    # one wait for whatever a test waits on (an answer, its workers started, a rejected
    # config's exit): the slowest kind decides, so no wait is shorter than its event needs
    wait = max(pace.bound(kind, ctx.timeout) for kind in ("answer", "start", "exit"))
    return dataclasses.replace(ctx, pace=pace, profile=prof, timeout=wait)


def run(ctx, workers: int = 6) -> Results:
    """Runs every item the profile's modes allow: the starts first, then the
    others in the first mode that started (by preference). The starts (and
    the signals) come before any pace is known: they wait FIRST_CONTACT for
    a start and a first answer; the items after them wait as the pace they
    measured says (paced)."""
    t0 = time.monotonic()
    pace = Pace()
    first = first_contact(ctx.timeout if ctx.fixed_wait else None)
    first_ctx = dataclasses.replace(
        ctx, pace=pace, timeout=max(ctx.timeout, first),
        profile=dataclasses.replace(ctx.profile, startup_timeout=max(ctx.profile.startup_timeout, first)))
    modes = [m for m in MODES_PREFERRED if ctx.profile.supports(m)]
    results: dict[str, Result] = {}
    under: dict[str, str] = {}   # item not judged -> the broken item it stands on, at the root
    notes: list = []
    with concurrent.futures.ThreadPoolExecutor(max_workers=workers) as pool:
        # the starts, and the signals (they need a running daemon, not a serving one)
        first = [(f"start-{m}", m) for m in modes] + [(n, modes[0]) for n in SIGNAL_ITEMS.values() if modes]
        futures = [pool.submit(_run_item, first_ctx, n, m, notes) for n, m in first]
        for f in concurrent.futures.as_completed(futures):
            r = f.result()
            results[r.name] = r
        ctx = paced(ctx, pace, preflight=True)
        serving = [m for m in modes if results[f"start-{m}"].status == "ok"]
        # the items that stand on others run once those are judged (in waves): when one of
        # those is broken, they are not judged (one root cause per defect, and no wait on it)
        while len(results) < len(ITEMS):
            futures = []
            wave = [i for i in ITEMS.values() if i.name not in results and all(n in results for n in i.needs)]
            if not wave:
                raise HarnessError("preflight: items whose needs are never judged: "
                                   f"{sorted(set(ITEMS) - set(results))}")
            for item in wave:
                broken = [under[n] if n in under else n for n in item.needs
                          if n in under or results[n].status == "broken"]
                if broken:
                    under[item.name] = broken[0]
                    results[item.name] = Result(item.name, "not judged", item.clause, None,
                                                f"it stands on {broken[0]}, which is broken")
                    continue
                usable = [m for m in item.modes if m in serving]
                if not usable:
                    supported = [m for m in item.modes if m in modes]
                    why = (f"no {'/'.join(item.modes)} mode in the profile" if not supported else
                           f"the daemon does not serve in {'/'.join(supported)} mode")
                    results[item.name] = Result(item.name, "not judged", item.clause, None, why)
                    continue
                futures.append(pool.submit(_run_item, ctx, item.name, usable[0], notes))
            for f in concurrent.futures.as_completed(futures):
                r = f.result()
                results[r.name] = r
    order = list(ITEMS)
    return Results({n: results[n] for n in order if n in results}, time.monotonic() - t0, pace)


def summary_lines(res: Results | None) -> list[str]:
    if res is None:
        return []
    broken = [r for r in res.items.values() if r.status == "broken"]
    unjudged = [r for r in res.items.values() if r.status == "not judged"]
    head = (f"preflight ({res.duration:.1f} s): {len(res.items)} items, "
            f"{len(broken)} broken, {len(unjudged)} not judged")
    out = [head, f"  pace: {res.pace.describe()} (waits give {FACTOR:g} times it, at least the run's wait)"]
    for r in broken:
        out.append(f"  BROKEN {r.name} ({r.clause}, {r.mode} mode): {r.message}")
    for r in unjudged:
        out.append(f"  not judged {r.name}: {r.message}")
    return out
