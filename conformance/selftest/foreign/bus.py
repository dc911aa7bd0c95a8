"""The event loop of fbus: one thread, one selector (epoll), every descriptor
non-blocking, signals delivered through a wakeup pipe.

Terms: a Client is one client connection (the stdio pair, or a socket); a
Worker is one worker process; a Slot is one place in a worker group, which
keeps its restart history across the processes that fill it. Each Worker
gets a fresh serial number (1, 2, ...) at every spawn; serials are never
reused (spec 3.3: a unique integer per worker).

Where the spec leaves a choice open, fbus chooses (clause IDs of SPEC.md):
  - round-robin: two cursors, one for new sessions and one for messages
    without a session; worker order interleaves the groups (1st worker of
    each group, then 2nd of each, ...)                          SB-I-11/30
  - sessionIds compare and are measured as decoded strings      SB-I-37
  - a duplicated routing member: the last occurrence counts     SB-I-19
  - a client line with result/error is routed like any message
    with an id (the spec's literal reading)                     SB-I-14
  - `method` is never looked at, whatever its type              SB-I-27
  - an over-long id or sessionId: from a client, the message is
    dropped with a warning and the client kept; from a worker it
    simply matches nothing (warning, dropped)                   SB-I-18
  - connections over the limit wait in the listen backlog       SB-I-18
  - worker stderr goes to /dev/null (--verbose: to ours)        SB-I-7
  - after malformed output the worker keeps its stdin and its
    later valid lines are still routed until it exits           SB-I-29
  - a worker that closes its stdin: a warning, then SIGTERM     SB-I-39
  - restart delay 100 ms doubling per restart in the window,
    capped at 6.4 s                                             SB-I-9
  - a socket client's end of input: it keeps receiving the
    answers to its requests in flight, then it is closed        SB-I-41
  - stdio end of input: worker stdins are closed, fbus waits for
    the workers to finish (at most drain_timeout_sec), then
    runs the shutdown sequence                                  SB-I-5
  - shutdown: SIGTERM only (stdins stay open); worker output is
    still forwarded; a second signal kills the workers at once  SB-I-21
  - Unix socket: file mode from the umask, an existing file is
    never replaced, removed at exit                             SB-I-22
  - a partial line at end of input is dropped silently          SB-I-25
  - unknown settings are ignored silently                       SB-I-20
"""

import errno
import heapq
import itertools
import os
import selectors
import signal
import socket
import sys
import time

from . import journal as log
from .rawjson import BadLine, blank, parse

STARTING, RUNNING, STOPPING, STOPPED = "starting", "running", "stopping", "stopped"
MAX_CONNECTIONS = 1024
MAX_SESSIONS = 1024
MAX_PENDING = 4096
MAX_SESSION_ID = 256
MAX_REQUEST_ID = 128
CHUNK = 65536
WRITE_CHUNK = 262144
# SB-I-3: a request whose id is in flight on every worker it may go to waits
# (a worker's answer carries only the id); this sentinel in a client's
# blockers pauses it until a request ends or a worker starts.
ID_IN_USE = "id-in-use"
BUSY = object()
BACKOFF_FIRST = 0.1
BACKOFF_CAP = 6.4


def _idlen(raw: bytes) -> int:
    return len(raw) - 2 if raw[:1] == b'"' else len(raw)


def _show(raw):
    return raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw


class Timer:
    __slots__ = ("when", "fn", "dead")

    def __init__(self, when, fn):
        self.when, self.fn, self.dead = when, fn, False

    def __lt__(self, other):
        return self.when < other.when


class Peer:
    """Something with an input (lines in) and an output queue (lines out)."""

    def __init__(self):
        self.out = bytearray()
        self.full_since = None
        self.full_gen = 0
        self.held = set()       # inputs paused because this output is over its cap
        self.blockers = set()   # outputs over their cap that pause this input
        self.inbuf = bytearray()
        self.scan = 0
        self.skip_line = False  # after an overflow: drop up to the next newline


class Client(Peer):
    def __init__(self, n, rfd, wfd, sock=None):
        super().__init__()
        self.n = n
        self.rfd, self.wfd, self.sock = rfd, wfd, sock
        self.closed = False
        self.eof = False
        self.owned = set()      # sessionIds
        self.entries = set()    # pending entries it is waiting on
        self.linger = None

    def __repr__(self):
        return f"client#{self.n}"


class Slot:
    def __init__(self, group, index):
        self.group, self.index = group, index
        self.worker = None
        self.restarts = []      # monotonic times of restarts
        self.timer = None
        self.given_up = False


class Worker(Peer):
    def __init__(self, slot, serial, pid, rfd, wfd):
        super().__init__()
        self.slot, self.serial, self.pid = slot, serial, pid
        self.rfd, self.wfd = rfd, wfd
        self.state = RUNNING
        self.sessions = set()
        self.keys = set()       # pending-table keys (self, id token)
        self.failed = False
        self.reaped = False
        self.kill_timer = None
        self.close_when_flushed = False

    @property
    def closed(self):
        return self.wfd is None

    def ctx(self):
        return {"worker": self.serial, "pid": self.pid}


class Entry:
    __slots__ = ("client", "sid")

    def __init__(self, client, sid):
        self.client, self.sid = client, sid


class Session:
    __slots__ = ("worker", "owner")

    def __init__(self, worker, owner):
        self.worker, self.owner = worker, owner


class Bus:
    def __init__(self, opts, settings):
        self.opts = opts
        self.defects = frozenset((opts.defect or "").split(",")) - {""}
        self.groups = settings.groups
        t = settings.tuning
        self.max_in = t["max_input_buffer"]
        self.max_out = t["max_output_queue"]
        self.max_restarts = t["max_restarts"]
        self.window = t["restart_window_sec"]
        self.drain = t["drain_timeout_sec"]
        self.bp_timeout = t["backpressure_timeout_sec"]
        self.id_waiters = []  # clients paused on ID_IN_USE
        self.sel = selectors.DefaultSelector()
        self.masks = {}
        self.timers = []
        self.clients = []
        self.nclients = 0
        self.by_pid = {}
        self.serials = itertools.count(1)
        self.sessions = {}
        self.pending = {}
        self.npending = 0
        self.cursor = {"session": 0, "free": 0}
        self.listener = None
        self.accepting = False
        self.phase = "serve"
        self.ready = []           # inputs to resume after a queue drained
        self.signals = []
        self.exit_now = False
        # slots in the order round-robin visits them: groups interleaved
        per_group = [[Slot(g, k) for k in range(g.count)] for g in self.groups]
        self.order = [s for rank in itertools.zip_longest(*per_group) for s in rank if s is not None]
        self.slots = [s for group in per_group for s in group]

    # ------------------------------------------------------------------ setup
    def open_listener(self):
        """Socket modes: bind and listen (before any worker is spawned, so a
        refusal leaves nothing behind). Raises OSError."""
        if self.opts.mode == "unix":
            path = self.opts.address
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                s.bind(path)  # an existing file, stale or live, is never replaced
            except OSError:
                s.close()
                raise
            self.unix_path = path
        else:
            host, port = self.opts.address
            infos = socket.getaddrinfo(host, port, socket.AF_UNSPEC, socket.SOCK_STREAM)
            fam, typ, proto, _, addr = infos[0]
            s = socket.socket(fam, typ, proto)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind(addr)
            except OSError:
                s.close()
                raise
        s.listen(MAX_CONNECTIONS)
        s.setblocking(False)
        self.listener = s
        log.info("accepting clients", on=str(self.opts.address))

    def start(self):
        rd, wr = os.pipe()
        os.set_blocking(rd, False)
        os.set_blocking(wr, False)
        self.wake_rd = rd
        signal.set_wakeup_fd(wr, warn_on_full_buffer=False)
        for sig in (signal.SIGCHLD, signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, self._on_signal)
        self._watch(rd, "wake", selectors.EVENT_READ)
        for slot in self.slots:
            self.spawn(slot)
        if self.opts.mode == "stdio":
            os.set_blocking(0, False)
            os.set_blocking(1, False)
            self.nclients += 1
            c = Client(self.nclients, 0, 1)
            self.clients.append(c)
            self.refresh(c)
        else:
            self.accepting = True
            self._watch(self.listener.fileno(), "listen", selectors.EVENT_READ)

    def _on_signal(self, signo, frame):
        self.signals.append(signo)

    # -------------------------------------------------------------- selector
    def _watch(self, fd, data, mask):
        old = self.masks.get(fd)
        if mask == 0:
            if old is not None:
                self.sel.unregister(fd)
                del self.masks[fd]
        elif old is None:
            self.sel.register(fd, mask, data)
            self.masks[fd] = mask
        elif old != mask:
            self.sel.modify(fd, mask, data)
            self.masks[fd] = mask

    def _forget(self, fd):
        if fd in self.masks:
            self.sel.unregister(fd)
            del self.masks[fd]

    def refresh(self, p):
        R, W = selectors.EVENT_READ, selectors.EVENT_WRITE
        if isinstance(p, Client):
            if p.closed:
                return
            want_r = not p.eof and not p.blockers and self.phase == "serve"
            want_w = bool(p.out)
            if p.rfd == p.wfd:
                self._watch(p.rfd, p, (R if want_r else 0) | (W if want_w else 0))
            else:
                self._watch(p.rfd, p, R if want_r else 0)
                self._watch(p.wfd, p, W if want_w else 0)
        else:
            if p.rfd is not None:
                self._watch(p.rfd, p, R if not p.blockers else 0)
            if p.wfd is not None:
                self._watch(p.wfd, p, W if p.out else 0)

    # ---------------------------------------------------------------- timers
    def later(self, delay, fn):
        t = Timer(time.monotonic() + delay, fn)
        heapq.heappush(self.timers, t)
        return t

    def _run_timers(self):
        now = time.monotonic()
        while self.timers and self.timers[0].when <= now:
            t = heapq.heappop(self.timers)
            if not t.dead:
                t.fn()

    def _timeout(self):
        while self.timers and self.timers[0].dead:
            heapq.heappop(self.timers)
        if self.ready or self.signals:
            return 0
        if not self.timers:
            return None
        return max(0.0, self.timers[0].when - time.monotonic())

    # ------------------------------------------------------------------ loop
    def run(self):
        while not self.exit_now:
            for key, ev in self.sel.select(self._timeout()):
                self._event(key.fileobj, key.data, ev)
                if self.exit_now:
                    break
            self._signals()
            self._run_timers()
            self._resume_ready()
        self._finish()

    def _event(self, fd, what, ev):
        if what == "wake":
            try:
                while os.read(fd, 512):
                    pass
            except BlockingIOError:
                pass
            return
        if what == "listen":
            self._accept()
            return
        if fd not in self.masks:
            return  # closed by an earlier event of this round
        p = what
        if isinstance(p, Client):
            if ev & selectors.EVENT_WRITE and not p.closed and fd == p.wfd:
                self.flush(p)
            if ev & selectors.EVENT_READ and not p.closed and fd == p.rfd and fd in self.masks:
                self._read_client(p)
        else:
            if fd == p.wfd and ev & selectors.EVENT_WRITE:
                self.flush(p)
            elif fd == p.rfd and ev & selectors.EVENT_READ:
                self._read_worker(p)

    def _signals(self):
        while self.signals:
            sig = self.signals.pop(0)
            if sig == signal.SIGCHLD:
                self._reap()
            elif sig in (signal.SIGTERM, signal.SIGINT):
                if sig == signal.SIGTERM and "crash-on-sigterm" in self.defects:
                    self._die()
                name = signal.Signals(sig).name
                if self.phase in ("drain", "final"):
                    log.info(f"{name} again: workers are killed now")
                    self._kill_all()
                else:
                    log.info(f"{name}: shutting down")
                    self.shutdown()

    def _die(self):
        """Defect switches: a crash, as a C daemon would have one."""
        signal.signal(signal.SIGSEGV, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGSEGV)
        time.sleep(1)
        os.abort()

    def _resume_ready(self):
        while self.ready:
            p = self.ready.pop(0)
            if p.blockers:
                continue
            self.refresh(p)
            if isinstance(p, Client):
                if not p.closed:
                    self._process_client(p)
            elif p.rfd is not None or p.inbuf:
                self._process_worker(p)

    # ---------------------------------------------------------------- clients
    def _accept(self):
        while len(self.clients) < MAX_CONNECTIONS:
            try:
                conn, _ = self.listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:
                if exc.errno in (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM):
                    log.warning(f"cannot accept a client now: {exc.strerror}")
                    self._pause_accept(0.1)
                    return
                continue  # ECONNABORTED and the like: that client is gone
            conn.setblocking(False)
            if conn.family in (socket.AF_INET, socket.AF_INET6):
                conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self.nclients += 1
            c = Client(self.nclients, conn.fileno(), conn.fileno(), conn)
            self.clients.append(c)
            self.refresh(c)
            log.debug("client connected", client=c.n)
        # full: new connections wait in the listen backlog until one leaves
        self._pause_accept(None)

    def _pause_accept(self, retry):
        if self.accepting:
            self.accepting = False
            self._forget(self.listener.fileno())
        if retry is not None:
            self.later(retry, self._resume_accept)

    def _resume_accept(self):
        if not self.accepting and self.listener is not None and self.phase == "serve" \
                and len(self.clients) < MAX_CONNECTIONS:
            self.accepting = True
            self._watch(self.listener.fileno(), "listen", selectors.EVENT_READ)

    def _read_client(self, c):
        try:
            data = os.read(c.rfd, CHUNK)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:
            self._client_eof(c)
            return
        c.inbuf += data
        self._process_client(c)

    def _process_client(self, c):
        while not c.closed and not c.blockers:
            nl = c.inbuf.find(b"\n", c.scan)
            if nl < 0:
                c.scan = len(c.inbuf)
                break
            line = bytes(c.inbuf[:nl + 1])
            del c.inbuf[:nl + 1]
            c.scan = 0
            if len(line) > self.max_in:
                self._client_overflow(c)
                return
            if self._client_line(c, line) is False:
                c.inbuf[0:0] = line   # offered again once an id is free
                c.blockers.add(ID_IN_USE)
                self.id_waiters.append(c)
                break
        if not c.closed and c.scan == len(c.inbuf) and len(c.inbuf) >= self.max_in:
            self._client_overflow(c)  # a line that can no longer fit, newline or not
            return
        self.refresh(c)

    def _client_overflow(self, c):
        log.error(f"client line longer than {self.max_in} bytes; disconnecting", client=c.n)
        self.close_client(c)

    def _client_eof(self, c):
        c.eof = True
        if c.inbuf:
            log.debug("partial line at end of input dropped", client=c.n, bytes=len(c.inbuf))
            c.inbuf.clear()
            c.scan = 0
        if self.opts.mode == "stdio":
            log.info("end of standard input")
            self.refresh(c)
            self.stdio_over()
            return
        live = [e for e in c.entries if e.client is c]
        if live and self.phase == "serve":
            # its answers in flight still reach it; then it is closed
            self.refresh(c)
            c.linger = self.later(self.drain, lambda: self.close_client(c))
            return
        self.close_client(c)

    def close_client(self, c):
        if c.closed:
            return
        c.closed = True
        if c.linger is not None:
            c.linger.dead = True
        if c.sock is not None:
            self._forget(c.rfd)
            c.sock.close()
        else:
            self._forget(0)
            self._forget(1)
            for fd in (0, 1):
                try:
                    os.close(fd)
                except OSError:
                    pass
        for sid in c.owned:
            s = self.sessions.pop(sid, None)
            if s is not None:
                s.worker.sessions.discard(sid)
        c.owned.clear()
        for e in c.entries:
            e.client = None   # orphan: a late answer reaches no one (SB-I-23)
        c.entries.clear()
        c.out.clear()
        self._release(c)
        for o in list(c.blockers):
            if o is not ID_IN_USE:
                o.held.discard(c)
        c.blockers.clear()
        if c in self.id_waiters:
            self.id_waiters.remove(c)
        self.clients.remove(c)
        log.debug("client gone", client=c.n)
        if self.opts.mode == "stdio":
            self.stdio_over()
        elif self.phase == "serve" and not self.accepting:
            self._resume_accept()

    def _client_line(self, c, line):
        if blank(line):
            return
        try:
            msg = parse(line)
        except BadLine as exc:
            if exc.kind == "syntax":
                log.info(f"client sent a line that is not JSON ({exc}); hanging up", client=c.n)
            else:
                log.warning(f"no routing information in the client's line ({exc}); hanging up", client=c.n)
            self.close_client(c)
            if "dies-after-malformed" in self.defects:
                self._die()
            return
        return self.route_in(c, msg, line)

    def _ids_freed(self):
        """A request ended or a worker started: the clients waiting on an id
        in use offer their line again."""
        for c in self.id_waiters:
            c.blockers.discard(ID_IN_USE)
            if not c.blockers and not c.closed:
                self.ready.append(c)
        self.id_waiters.clear()

    # ---------------------------------------------------------------- routing
    def route_in(self, c, msg, line):
        if "no-two-pool-routing" in self.defects and len(self.groups) > 1:
            log.warning("several worker groups and no way to choose one; message dropped", client=c.n)
            return
        sid, rid = msg.sid, msg.rid
        if rid is not None and _idlen(rid) > MAX_REQUEST_ID:
            log.warning(f"request id longer than {MAX_REQUEST_ID} bytes; message dropped", client=c.n)
            return
        if sid is not None and len(sid.encode("utf-8", "surrogatepass")) > MAX_SESSION_ID:
            log.warning(f"sessionId longer than {MAX_SESSION_ID} bytes; message dropped", client=c.n)
            return
        s = self.sessions.get(sid) if sid is not None else None
        if s is not None and s.owner is not c:
            log.warning("session belongs to another client; message dropped",
                        client=c.n, owner=s.owner.n, session=sid)
            return
        if rid is not None and self.npending >= MAX_PENDING:
            log.warning(f"{MAX_PENDING} requests already in flight; message dropped", client=c.n, id=_show(rid))
            return
        if s is not None:
            w = s.worker
            if rid is not None and (w, rid) in self.pending:
                return False
        else:
            if sid is not None and len(self.sessions) >= MAX_SESSIONS:
                log.warning(f"{MAX_SESSIONS} sessions open; message dropped", client=c.n, session=sid)
                return
            w = self.pick("session" if sid is not None else "free", rid)
            if w is BUSY:
                return False
            if w is None:
                log.warning("no worker running; message dropped", client=c.n)
                return
            if sid is not None:
                self.sessions[sid] = Session(w, c)
                w.sessions.add(sid)
                c.owned.add(sid)
        if rid is not None:
            e = Entry(c, sid)
            key = (w, rid)
            self.pending.setdefault(key, []).append(e)
            w.keys.add(key)
            c.entries.add(e)
            self.npending += 1
        self.send(w, line, c)

    def pick(self, cursor, rid):
        """Next RUNNING worker on this cursor that holds no request with this
        id; BUSY when every running worker holds one, None when none runs."""
        n = len(self.order)
        start = self.cursor[cursor]
        busy = None
        for k in range(n):
            i = (start + k) % n
            w = self.order[i].worker
            if w is None or w.state != RUNNING:
                continue
            if rid is not None and (w, rid) in self.pending:
                busy = BUSY
                continue
            self.cursor[cursor] = i + 1
            return w
        return busy

    def route_out(self, w, msg, line):
        if msg.has_result:
            if msg.rid is None:
                log.warning("response without an id dropped", **w.ctx())
                return
            key = (w, msg.rid)
            entries = self.pending.get(key)
            if not entries:
                log.warning("response matches no request in flight; dropped", id=_show(msg.rid), **w.ctx())
                return
            e = next((x for x in entries if x.sid is not None and x.sid == msg.sid), None) \
                or next((x for x in entries if x.sid is None), None) or entries[0]
            entries.remove(e)
            if not entries:
                del self.pending[key]
                w.keys.discard(key)
            self.npending -= 1
            if self.id_waiters:
                self._ids_freed()
            c = e.client
            if c is None:
                log.warning("response for a client that has left; dropped", id=_show(msg.rid), **w.ctx())
                return
            c.entries.discard(e)
            self.send(c, line, w)
            if c.eof and c.linger is not None and not [x for x in c.entries if x.client is c] and not c.out:
                self.close_client(c)
        elif msg.sid is not None:
            s = self.sessions.get(msg.sid)
            if s is None:
                log.warning("message for an unknown session dropped", session=msg.sid, **w.ctx())
                return
            self.send(s.owner, line, w)
        else:
            log.warning("worker message with neither a response id nor a session dropped", **w.ctx())

    # ------------------------------------------------------------ output queues
    def send(self, dst, line, src):
        if dst.closed:
            return
        if isinstance(dst, Client) and "drops-slow-reader" in self.defects and dst.out:
            log.debug("client is not keeping up; line dropped", client=dst.n)
            return
        dst.out += line
        self.flush(dst)
        if dst.closed:
            return
        if isinstance(dst, Worker) and "truncate-full-worker-pipe" in self.defects and dst.out:
            # what the pipe did not take at once is lost: the rest of a line cut
            # short, and whole lines while the worker is slow to read
            log.debug(f"worker input pipe full; {len(dst.out)} bytes dropped", **dst.ctx())
            dst.out.clear()
            return
        if len(dst.out) > self.max_out:
            if dst.full_since is None:
                dst.full_since = time.monotonic()
                dst.full_gen += 1
                gen = dst.full_gen
                self.later(self.bp_timeout, lambda: self._stalled(dst, gen))
            if src is not None and not (isinstance(dst, Client) and "drops-slow-reader" in self.defects):
                src.blockers.add(dst)
                dst.held.add(src)
                self.refresh(src)
        self.refresh(dst)

    def flush(self, p):
        fd = p.wfd
        while p.out and fd is not None:
            try:
                with memoryview(p.out) as mv:
                    n = os.write(fd, mv[:WRITE_CHUNK])
            except (BlockingIOError, InterruptedError):
                break
            except OSError as exc:
                self._output_failed(p, exc)
                return
            del p.out[:n]
        if p.full_since is not None and len(p.out) <= self.max_out:
            p.full_since = None
            self._release(p)
        if isinstance(p, Worker):
            if p.close_when_flushed and not p.out and p.wfd is not None:
                self._close_stdin(p)
        elif p.eof and p.linger is not None and not p.out and not [x for x in p.entries if x.client is p]:
            self.close_client(p)
            return
        self.refresh(p)

    def _release(self, out):
        for src in out.held:
            src.blockers.discard(out)
            if not src.blockers:
                self.ready.append(src)
        out.held.clear()

    def _output_failed(self, p, exc):
        if isinstance(p, Client):
            log.debug(f"client output failed: {exc.strerror}", client=p.n)
            if self.opts.mode == "stdio":
                log.info("standard output closed")
                self.close_client(p)
                self.shutdown()
            else:
                self.close_client(p)
            return
        self._close_stdin(p)
        if p.state == RUNNING:
            log.warning("worker closed its input; stopping it", **p.ctx())
            self.stop_worker(p)

    def _stalled(self, p, gen):
        if p.full_since is None or p.full_gen != gen or p.closed:
            return
        if isinstance(p, Client):
            log.warning(f"client has not read its output for {self.bp_timeout:g} s; disconnecting", client=p.n)
            self.close_client(p)
        else:
            log.warning(f"worker has not read its input for {self.bp_timeout:g} s; stopping it", **p.ctx())
            self._close_stdin(p)
            if p.state == RUNNING:
                self.stop_worker(p)

    def _close_stdin(self, w):
        if w.wfd is None:
            return
        self._forget(w.wfd)
        os.close(w.wfd)
        w.wfd = None
        w.out.clear()
        w.full_since = None
        self._release(w)

    # ---------------------------------------------------------------- workers
    def spawn(self, slot):
        slot.timer = None
        g = slot.group
        serial = next(self.serials)
        if "socketpair-workers" in self.defects:
            # a socket pair for each direction instead of a pipe (seed 3.3: pipes)
            in_r, in_w = (x.detach() for x in socket.socketpair())
            out_w, out_r = (x.detach() for x in socket.socketpair())
        else:
            in_r, in_w = os.pipe()
            out_r, out_w = os.pipe()
        actions = [(os.POSIX_SPAWN_DUP2, in_r, 0), (os.POSIX_SPAWN_DUP2, out_w, 1)]
        if not log.VERBOSE:
            actions.append((os.POSIX_SPAWN_OPEN, 2, "/dev/null", os.O_WRONLY, 0))
        env = dict(os.environ, FBUS_WORKER_SERIAL=str(serial))
        run = os.posix_spawn if "/" in g.program else os.posix_spawnp
        try:
            pid = run(g.program, [g.program] + g.argv, env, file_actions=actions,
                      setsigdef=(signal.SIGPIPE, signal.SIGXFSZ))
        except OSError as exc:
            for fd in (in_r, in_w, out_r, out_w):
                os.close(fd)
            log.error(f"cannot start a worker of group {g.name!r}: {exc.strerror}", worker=serial)
            self._after_exit(slot, None)
            return
        os.close(in_r)
        os.close(out_w)
        os.set_blocking(in_w, False)
        os.set_blocking(out_r, False)
        w = Worker(slot, serial, pid, out_r, in_w)
        slot.worker = w
        self.by_pid[pid] = w
        self.refresh(w)
        log.info(f"worker started for group {g.name!r}", **w.ctx())
        if self.id_waiters:
            self._ids_freed()

    def _read_worker(self, w):
        try:
            data = os.read(w.rfd, CHUNK)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:
            self._forget(w.rfd)
            os.close(w.rfd)
            w.rfd = None
            return
        w.inbuf += data
        self._process_worker(w)

    def _process_worker(self, w, force=False):
        while force or not w.blockers:
            if w.skip_line:
                nl = w.inbuf.find(b"\n")
                if nl < 0:
                    w.inbuf.clear()
                    w.scan = 0
                    break
                del w.inbuf[:nl + 1]
                w.skip_line = False
                continue
            nl = w.inbuf.find(b"\n", w.scan)
            if nl < 0:
                w.scan = len(w.inbuf)
                break
            line = bytes(w.inbuf[:nl + 1])
            del w.inbuf[:nl + 1]
            w.scan = 0
            if len(line) > self.max_in:
                self._worker_overflow(w)
                continue
            self._worker_line(w, line)
        if w.scan == len(w.inbuf) and len(w.inbuf) >= self.max_in:
            self._worker_overflow(w)
            w.skip_line = True
        self.refresh(w)

    def _worker_overflow(self, w):
        w.inbuf.clear()
        w.scan = 0
        self.fail_worker(w, f"a line longer than {self.max_in} bytes")

    def _worker_line(self, w, line):
        if blank(line):
            return
        try:
            msg = parse(line)
        except BadLine as exc:
            self.fail_worker(w, str(exc))
            return
        self.route_out(w, msg, line)

    def fail_worker(self, w, why):
        log.error(f"worker wrote unusable output ({why})", **w.ctx())
        if w.state == RUNNING:
            self.stop_worker(w)

    def stop_worker(self, w):
        """Spec 5.3 (and the closing of a stalled worker): its sessions end,
        it gets SIGTERM and nothing more; SIGKILL after drain_timeout_sec."""
        w.failed = True
        for sid in list(w.sessions):
            s = self.sessions.pop(sid, None)
            if s is not None:
                s.owner.owned.discard(sid)
        w.sessions.clear()
        w.state = STOPPING
        self._kill(w, signal.SIGTERM)
        w.kill_timer = self.later(self.drain, lambda: self._kill(w, signal.SIGKILL))

    def _kill(self, w, sig):
        if w.state == STOPPED or w.reaped:
            return
        try:
            os.kill(w.pid, sig)
        except ProcessLookupError:
            pass

    def _reap(self):
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            w = self.by_pid.pop(pid, None)
            if w is not None:
                self._exited(w, status)

    def _exited(self, w, status):
        w.reaped = True
        # first route what it wrote before it went (SB-I-40)
        while w.rfd is not None:
            try:
                data = os.read(w.rfd, CHUNK)
            except (BlockingIOError, InterruptedError):
                break
            except OSError:
                data = b""
            if not data:
                break
            w.inbuf += data
            self._process_worker(w, force=True)
        if w.inbuf and not w.skip_line:
            self._process_worker(w, force=True)
        w.state = STOPPED
        if w.kill_timer is not None:
            w.kill_timer.dead = True
        if w.rfd is not None:
            self._forget(w.rfd)
            os.close(w.rfd)
            w.rfd = None
        self._close_stdin(w)
        for o in list(w.blockers):
            o.held.discard(w)
        w.blockers.clear()
        for sid in list(w.sessions):
            s = self.sessions.pop(sid, None)
            if s is not None:
                s.owner.owned.discard(sid)
        w.sessions.clear()
        for key in list(w.keys):
            for e in self.pending.pop(key, []):
                self.npending -= 1
                log.warning("request dropped: its worker exited before answering", id=_show(key[1]), **w.ctx())
                if e.client is not None:
                    e.client.entries.discard(e)
        w.keys.clear()
        if self.id_waiters:
            self._ids_freed()
        how = f"status {os.waitstatus_to_exitcode(status)}" if os.WIFEXITED(status) \
            else f"signal {signal.Signals(os.WTERMSIG(status)).name}"
        log.info(f"worker ended ({how})", **w.ctx())
        slot = w.slot
        slot.worker = None
        for c in [c for c in self.clients if c.linger is not None]:
            if not [x for x in c.entries if x.client is c] and not c.out:
                self.close_client(c)
        self._after_exit(slot, w, status)

    def _after_exit(self, slot, w, status=None):
        if self.phase != "serve":
            if self.phase in ("eof", "drain") and not self.by_pid:
                if self.phase == "eof":
                    self.shutdown()
                else:
                    self._final()
            return
        if "no-restart-after-exit0" in self.defects and w is not None and not w.failed \
                and status is not None and os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0:
            log.info("worker finished", **w.ctx())
            return
        now = time.monotonic()
        slot.restarts = [t for t in slot.restarts if now - t < self.window]
        if len(slot.restarts) >= self.max_restarts:
            slot.given_up = True
            log.error(f"worker keeps exiting: {len(slot.restarts)} restarts within "
                      f"{self.window:g} s; not starting it again",
                      **({"worker": w.serial, "pid": w.pid} if w is not None else {}))
            return
        delay = min(BACKOFF_FIRST * 2 ** len(slot.restarts), BACKOFF_CAP)
        slot.restarts.append(now)
        log.info(f"worker restart in {delay:g} s", **({"after": w.serial} if w is not None else {}))
        slot.timer = self.later(delay, lambda: self.spawn(slot))

    # --------------------------------------------------------------- shutdown
    def _cancel_restarts(self):
        for slot in self.slots:
            if slot.timer is not None:
                slot.timer.dead = True
                slot.timer = None

    def stdio_over(self):
        """The one stdio client has finished sending (or is gone)."""
        if self.phase != "serve":
            return
        if "no-exit-on-eof-flood" in self.defects:
            self.phase = "flood"
            self._flood()
            return
        self.phase = "eof"
        self._cancel_restarts()
        for w in list(self.by_pid.values()):
            w.close_when_flushed = True
            if not w.out:
                self._close_stdin(w)
        if not self.by_pid:
            self.shutdown()
            return
        self.later(self.drain, self.shutdown)

    def _flood(self):
        if self.phase != "flood":
            return
        log.raw(b'{"fbus":"info","msg":"input closed; waiting for the client to come back"}\n' * 40)
        self.later(0.001, self._flood)

    def shutdown(self):
        if self.phase in ("drain", "final"):
            return
        self.phase = "drain"
        self._cancel_restarts()
        if self.listener is not None:
            self._forget(self.listener.fileno())
            self.listener.close()
            self.listener = None
            self.accepting = False
        for c in list(self.clients):
            self.refresh(c)   # no more reading
        for w in list(self.by_pid.values()):
            if w.state == RUNNING:
                w.state = STOPPING
            self._kill(w, signal.SIGTERM)
        if not self.by_pid:
            self._final()
            return
        self.later(self.drain, self._kill_all)

    def _kill_all(self):
        for w in list(self.by_pid.values()):
            self._kill(w, signal.SIGKILL)
        for pid, w in list(self.by_pid.items()):
            try:
                _, status = os.waitpid(pid, 0)
            except ChildProcessError:
                status = 0
            self.by_pid.pop(pid, None)
            self._exited(w, status)
        self._final()

    def _final(self):
        self.phase = "final"
        self.exit_now = True

    def _finish(self):
        """Last flush of client output (bounded), then everything closed."""
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline:
            busy = [c for c in self.clients if c.out and not c.closed]
            if not busy:
                break
            for c in busy:
                self.flush(c)
            busy = [c for c in self.clients if c.out and not c.closed]
            if busy:
                import select
                select.select([], [c.wfd for c in busy], [], max(0.0, deadline - time.monotonic()))
        for c in list(self.clients):
            self.close_client(c) if c.sock is not None else None
        if getattr(self, "unix_path", None):
            try:
                os.unlink(self.unix_path)
            except OSError:
                pass
        log.info("bye")
