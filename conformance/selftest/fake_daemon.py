#!/usr/bin/python3
"""A tiny stdio Bus daemon in Python, for the harness self-tests only.

    fake_daemon.py --config PATH [--stdio | --unix PATH | --tcp HOST:PORT] [--break NAME ...]

It implements what the suite's framing and routing tests check, so that the
harness can be proven without the C daemon; each --break switches one
behaviour off, so a self-test can show that the matching tests fail:

  reserialize          forward re-serialised JSON instead of the bytes received
  trim-whitespace      forward lines without the whitespace around the object
  split-long-lines     forward a worker line over 16 KiB to its client as two lines
  keep-malformed       ignore invalid JSON instead of closing the client
  accept-non-object    ignore JSON that is not an object instead of closing
  broadcast-responses  send every response to every client
  forward-unknown      send responses with an unknown id to the newest client
  no-affinity          route session messages round-robin like the others
  session-copied       also send each session message to a worker not bound to the session
  no-round-robin       send every new message to the first worker
  notify-broadcast     send session notifications to every client
  validate-jsonrpc     drop client messages without "jsonrpc":"2.0" or a method
  drop-unknown-cancel  drop a notifications/cancelled naming no pending request
  forward-partial      forward client bytes to the first worker as they arrive
  forward-worker-partial  forward worker bytes to the newest client as they arrive
  stderr-as-stdout     read worker stderr as worker output
  ids-by-value         key pending requests by id value (1 == 1.0), not raw token
  ids-not-per-worker   key pending requests by id alone, not by worker and id
  methodless-not-tracked  do not track a client message with an id but no method
  nested-fields        take a sessionId from params when the top level has none
  notification-no-session  route session notifications round-robin, creating nothing
  worker-request-dropped   discard worker messages with an id, a method and a sessionId
  route-response-by-session  route a response by its sessionId when it has one
  unroutable-broadcast send unroutable worker messages to every client
  log-stdout           write log lines to stdout as well as stderr
  quiet                write no log lines at all
  crash-on-start       exit 3 at once
  no-restart           never restart a worker that exited
  truncate-full-pipe   drop what a worker's full stdin pipe does not take at once
  exit-1               exit with status 1 after a clean shutdown
Hostile ones, for the harness's own bounds (time, disk, processes):
  segv-on-malformed    die of SIGSEGV right after a malformed client line (closing nothing first)
  segv-after-close     close the client of a malformed line, then die of SIGSEGV
  crash-on-sigterm     die of SIGSEGV on SIGTERM/SIGINT instead of shutting down
  ignore-sigterm       ignore SIGTERM and SIGINT, with a child doing "work" in a session of its own
  flood-stderr         write to stderr as fast as the reader takes it, for ever
  flood-forever        never answer; write lines to stdout, stderr and every client socket as
                       fast as they are taken, for ever; ignore SIGTERM and SIGINT
  leaves-tmp-files     create a file and a directory in $TMPDIR and leave them there at exit
  fork-escape          fork children that leave for sessions of their own and never exit
  never-serve          listen (or hold stdin) and never read a byte: no answer, ever
"""

import argparse
import json
import os
import selectors
import signal
import socket
import subprocess
import sys
import threading
import time

from fake_json import loads, raw_members

BREAKS = set()
MODE = "stdio"


def relay_stderr(pipe, name):
    """SB-I-7: each line of a worker's stderr into ours, prefixed, in pieces
    of at most 2048 bytes."""
    prefix = f"[{name}] stderr: ".encode()
    while piece := pipe.readline(2048):
        if "quiet" not in BREAKS:
            os.write(2, f"{time.strftime('%H:%M:%S')} INFO ".encode() + prefix + piece.rstrip(b"\n") + b"\n")


def log(level, text):
    if "quiet" in BREAKS:
        return
    line = f"{time.strftime('%H:%M:%S')} {level} {text}\n".encode()
    os.write(2, line)
    if "log-stdout" in BREAKS:
        try:
            os.write(1, line)
        except OSError:
            pass


def segv():
    """Dies of SIGSEGV, like a C daemon reading through a bad pointer."""
    signal.signal(signal.SIGSEGV, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGSEGV)
    time.sleep(10)


def flood():
    chunk = b"fake_daemon: flooding stderr " + b"x" * 200 + b"\n"
    chunk *= 256
    while True:
        try:
            os.write(2, chunk)
        except OSError:
            return


def flood_fd(fd, what):
    """Writes lines to fd as fast as the reader takes them, for ever (until
    the other end is gone)."""
    chunk = (b'{"jsonrpc":"2.0","method":"flood","params":{"to":"' + what.encode() + b'","pad":"'
             + b"x" * 160 + b'"}}\n') * 256
    while True:
        try:
            os.write(fd, chunk)
        except OSError:
            return


def flood_forever(config, mode, address):
    """The flood-forever break: workers started, the address bound, then
    nothing but lines to stdout, stderr and every client, and no exit."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    d = Daemon(config, mode, address)
    d.spawn()
    d.listen()
    log("INFO", "ready (and flooding)")
    for fd, what in ((1, "stdout"), (2, "stderr")):
        threading.Thread(target=flood_fd, args=(fd, what), daemon=True).start()
    if d.listener is None:
        while True:
            time.sleep(3600)
    d.listener.setblocking(True)
    socks = []
    while True:
        sock, _ = d.listener.accept()
        socks.append(sock)  # never closed: the flood goes on while the client reads
        threading.Thread(target=flood_fd, args=(sock.fileno(), "client"), daemon=True).start()


def leave_tmp_files():
    tmp = os.environ.get("TMPDIR", "/tmp")
    with open(os.path.join(tmp, f"fake_daemon.{os.getpid()}.tmp"), "w") as f:
        f.write("left behind on purpose\n")
    os.makedirs(os.path.join(tmp, f"fake_daemon.{os.getpid()}.d"), exist_ok=True)


def escape(n):
    """Forks n processes that leave for sessions of their own (double fork,
    so their parent is gone) and sleep for ever."""
    for _ in range(n):
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                signal.signal(signal.SIGTERM, signal.SIG_IGN)
                while True:
                    time.sleep(3600)
            os._exit(0)
        os.wait()


class Endpoint:
    def __init__(self, kind, name, rfd, wfd, sock=None, proc=None):
        self.kind, self.name = kind, name
        self.rfd, self.wfd, self.sock, self.proc = rfd, wfd, sock, proc
        self.inbuf = b""
        self.out = b""       # socket clients: what the socket did not take yet (an output queue)
        self.closed = False

    def write(self, data):
        if self.sock is not None:
            self.out += data
            return self.flush()
        view = memoryview(data)
        drop = "truncate-full-pipe" in BREAKS and self.kind == "worker"
        if drop:
            os.set_blocking(self.wfd, False)
        while view:
            try:
                n = os.write(self.wfd, view)
            except BlockingIOError:
                if drop:
                    return True
                time.sleep(0.001)
                continue
            except OSError:
                return False
            view = view[n:]
        return True

    def flush(self):
        while self.out and not self.closed:
            try:
                n = self.sock.send(self.out, socket.MSG_DONTWAIT)
            except BlockingIOError:
                return True
            except OSError:
                return False
            self.out = self.out[n:]
        return True


class Daemon:
    def __init__(self, config, mode, address):
        self.sel = selectors.DefaultSelector()
        self.workers, self.clients = [], []
        self.sessions = {}   # sid -> (worker, owner client)
        self.pending = {}    # (worker, id token) -> client
        self.worker_requests = {}  # (client, id token) -> worker that asked the client
        self.cursor = 0
        self.stop = False
        self.listener = None
        self.mode, self.address = mode, address
        self.config = config
        self.nclients = 0
        self.restarts = {}   # worker slot -> restart times in the window
        self.timers = []     # (when, dead worker endpoint) restarts due

    # -- setup ------------------------------------------------------------------
    def spawn(self):
        for pool in self.config["pools"]:
            for _ in range(int(pool["instances"])):
                self.workers.append(self.spawn_one(pool, len(self.workers)))

    def spawn_one(self, pool, wid):
        env = dict(os.environ, STDIO_BUS_WORKER_ID=str(wid), STDIO_BUS_POOL_ID=pool["id"])
        proc = subprocess.Popen([pool["command"]] + list(pool.get("args", [])), env=env,
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0,
                                stderr=subprocess.STDOUT if "stderr-as-stdout" in BREAKS else subprocess.PIPE)
        w = Endpoint("worker", f"worker {wid}", proc.stdout.fileno(), proc.stdin.fileno(), proc=proc)
        if proc.stderr is not None:
            threading.Thread(target=relay_stderr, args=(proc.stderr, f"worker {wid} pool={pool['id']}"),
                             daemon=True).start()
        w.pool, w.wid = pool, wid
        self.sel.register(w.rfd, selectors.EVENT_READ, w)
        log("INFO", f"[{w.name} pid={proc.pid}] started")
        return w

    def worker_gone(self, w):
        """A worker's stdout ended: it exited. Restarted after a short delay
        (at most max_restarts times within restart_window_sec)."""
        try:
            w.proc.wait(1)
        except subprocess.TimeoutExpired:
            pass
        for sid in [s for s, (wk, _) in self.sessions.items() if wk is w]:
            del self.sessions[sid]
        limits = self.config.get("limits", {})
        now = time.monotonic()
        window = [t for t in self.restarts.get(w.wid, []) if now - t < limits.get("restart_window_sec", 60)]
        if "no-restart" in BREAKS or self.stop or len(window) >= limits.get("max_restarts", 5):
            log("ERROR" if not self.stop else "INFO", f"[{w.name}] exited: not restarted")
            return
        self.restarts[w.wid] = window + [now]
        self.timers.append((now + 0.05 * 2 ** len(window), w))

    def run_timers(self):
        now = time.monotonic()
        due = [t for t in self.timers if t[0] <= now]
        self.timers = [t for t in self.timers if t[0] > now]
        for _, old in due:
            if not self.stop:
                self.workers[old.wid] = self.spawn_one(old.pool, old.wid)

    def listen(self):
        if self.mode == "stdio":
            c = Endpoint("client", "client stdio", 0, 1)
            self.clients.append(c)
            self.sel.register(0, selectors.EVENT_READ, c)
            return
        if self.mode == "unix":
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.bind(self.address)
        else:
            host, port = self.address.rsplit(":", 1)
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind((host, int(port)))
        s.listen(64)
        s.setblocking(False)
        self.listener = s
        self.sel.register(s.fileno(), selectors.EVENT_READ, "listener")
        log("INFO", f"listening on {self.address}")

    # -- routing ------------------------------------------------------------------
    def next_worker(self):
        live = [w for w in self.workers if not w.closed]
        if not live:
            return None
        if "no-round-robin" in BREAKS:
            return live[0]
        w = live[self.cursor % len(live)]
        self.cursor += 1
        return w

    @staticmethod
    def key(w, token):
        """The pending table key of a request id token on a worker."""
        if "ids-by-value" in BREAKS:
            token = json.dumps(json.loads(token))
            token = json.dumps(float(token)) if token.replace(".", "", 1).lstrip("-").isdigit() else token
        return token if "ids-not-per-worker" in BREAKS else (w, token)

    def encode(self, msg, raw):
        if "trim-whitespace" in BREAKS:
            raw = raw.strip(b" \t\r\n") + b"\n"
        return json.dumps(msg).encode() + b"\n" if "reserialize" in BREAKS else raw

    def from_client(self, c, line):
        if not line.strip():
            return
        try:
            msg = loads(line)
        except ValueError:
            if "segv-on-malformed" in BREAKS:
                segv()
            if "keep-malformed" in BREAKS:
                return
            log("WARN", f"[{c.name}] malformed JSON: closing")
            self.close_client(c)
            if "segv-after-close" in BREAKS:
                segv()
            return
        if not isinstance(msg, dict):
            if "accept-non-object" in BREAKS:
                return
            log("WARN", f"[{c.name}] not a JSON object: closing")
            return self.close_client(c)
        raw = raw_members(line)
        sid, rid = raw.get("sessionId"), raw.get("id")
        if "nested-fields" in BREAKS and sid is None and isinstance(msg.get("params"), dict) \
                and "sessionId" in msg["params"]:
            sid = json.dumps(msg["params"]["sessionId"])
        if "validate-jsonrpc" in BREAKS and (msg.get("jsonrpc") != "2.0" or "method" not in msg):
            log("WARN", f"[{c.name}] not JSON-RPC 2.0: dropped")
            return
        if "drop-unknown-cancel" in BREAKS and msg.get("method") == "notifications/cancelled":
            named = json.dumps((msg.get("params") or {}).get("requestId"))
            if named not in {k[1] if isinstance(k, tuple) else k for k in self.pending}:
                log("WARN", f"[{c.name}] cancellation of no pending request: dropped")
                return
        if "notification-no-session" in BREAKS and rid is None:
            sid = None
        data = self.encode(msg, line)
        if ("result" in msg or "error" in msg) and "method" not in msg:
            # a client's response to a worker's request (SB-I-14)
            w = self.worker_requests.pop((c, rid), None)
            if w is None and sid in self.sessions:
                w = self.sessions[sid][0]
            if w is None:
                log("WARN", f"[{c.name}] response for no worker: discarded")
            else:
                w.write(data)
            return
        if sid is not None and "no-affinity" not in BREAKS:
            if sid in self.sessions:
                w = self.sessions[sid][0]
            else:
                w = self.next_worker()
                self.sessions[sid] = (w, c)
        else:
            w = self.next_worker()
        if w is None:
            log("WARN", "no worker running: message discarded")
            return
        if rid is not None and not ("methodless-not-tracked" in BREAKS and "method" not in msg):
            self.pending[self.key(w, rid)] = c
        w.write(data)
        if sid is not None and "session-copied" in BREAKS:
            # its answer matches nothing pending on that worker: the client sees one answer
            others = [x for x in self.workers if not x.closed and x is not w]
            if others:
                others[0].write(data)

    def from_worker(self, w, line):
        try:
            msg = loads(line)
            raw = raw_members(line)
        except ValueError:
            log("ERROR", f"[{w.name}] malformed output")
            return
        rid, sid = raw.get("id"), raw.get("sessionId")
        data = self.encode(msg, line)
        if "split-long-lines" in BREAKS and len(data) > 16384:
            data = data[:8192] + b"\n" + data[8192:]
        live = [c for c in self.clients if not c.closed]
        if ("result" in msg or "error" in msg) and "route-response-by-session" in BREAKS and sid in self.sessions:
            self.sessions[sid][1].write(data)
        elif "result" in msg or "error" in msg:
            c = self.pending.pop(self.key(w, rid), None) if rid is not None else None
            if "broadcast-responses" in BREAKS and c is not None:
                for other in live:
                    other.write(data)
            elif c is not None and not c.closed:
                c.write(data)
            elif "forward-unknown" in BREAKS and live:
                live[-1].write(data)
            else:
                log("WARN", f"[{w.name}] response with unknown or no id {rid}: discarded")
        elif sid is not None:
            entry = self.sessions.get(sid)
            if "notify-broadcast" in BREAKS:
                for other in live:
                    other.write(data)
            elif rid is not None and "worker-request-dropped" in BREAKS:
                log("WARN", f"[{w.name}] worker request: dropped")
            elif entry is not None and not entry[1].closed:
                if rid is not None:  # a request to the client (SB-I-15)
                    self.worker_requests[(entry[1], rid)] = w
                entry[1].write(data)
            else:
                log("WARN", f"[{w.name}] notification for unknown session: discarded")
        elif "unroutable-broadcast" in BREAKS:
            for other in live:
                other.write(data)
        else:
            log("WARN", f"[{w.name}] unroutable message: discarded")

    # -- connections ----------------------------------------------------------------
    def close_client(self, c):
        c.closed = True
        try:
            self.sel.unregister(c.rfd)
        except (KeyError, ValueError):
            pass
        if c.sock is not None:
            c.sock.close()
        else:
            for fd in (c.rfd, c.wfd):
                try:
                    os.close(fd)
                except OSError:
                    pass
        for sid in [s for s, (_, owner) in self.sessions.items() if owner is c]:
            del self.sessions[sid]
        for key in [k for k, owner in self.pending.items() if owner is c]:
            del self.pending[key]

    def on_readable(self, ep):
        if ep == "listener":
            sock, _ = self.listener.accept()
            sock.setblocking(True)
            self.nclients += 1
            c = Endpoint("client", f"client {self.nclients}", sock.fileno(), sock.fileno(), sock=sock)
            self.clients.append(c)
            self.sel.register(c.rfd, selectors.EVENT_READ, c)
            return
        try:
            data = os.read(ep.rfd, 65536)
        except OSError:
            data = b""
        if not data:
            if ep.kind == "client":
                log("INFO", f"[{ep.name}] disconnected")
                self.close_client(ep)
                if self.mode == "stdio":
                    self.stop = True
            else:
                ep.closed = True
                self.sel.unregister(ep.rfd)
                self.worker_gone(ep)
            return
        if "forward-partial" in BREAKS and ep.kind == "client":
            self.workers[0].write(data)
            ep.inbuf += data  # lines are still read, to route the answers back
            while b"\n" in ep.inbuf:
                line, ep.inbuf = ep.inbuf.split(b"\n", 1)
                rid = raw_members(line + b"\n").get("id") if line.strip().startswith(b"{") else None
                if rid is not None:
                    self.pending[self.key(self.workers[0], rid)] = ep
            return
        if "forward-worker-partial" in BREAKS and ep.kind == "worker":
            live = [c for c in self.clients if not c.closed]
            if live:
                live[-1].write(data)
            ep.inbuf += data  # lines are still read, to retire the requests they answer
            while b"\n" in ep.inbuf:
                line, ep.inbuf = ep.inbuf.split(b"\n", 1)
                rid = raw_members(line + b"\n").get("id") if line.strip().startswith(b"{") else None
                if rid is not None:
                    self.pending.pop(self.key(ep, rid), None)
            return
        ep.inbuf += data
        while b"\n" in ep.inbuf and not ep.closed:
            line, ep.inbuf = ep.inbuf.split(b"\n", 1)
            (self.from_client if ep.kind == "client" else self.from_worker)(ep, line + b"\n")

    def run(self):
        while not self.stop:
            queued = [c for c in self.clients if c.out and not c.closed]
            for c in queued:
                c.flush()
            for key, _ in self.sel.select(0.001 if queued else 0.02):
                self.on_readable(key.data)
            self.run_timers()
        self.shutdown()

    def shutdown(self):
        log("INFO", "shutting down")
        if self.listener is not None:
            self.listener.close()
            if self.mode == "unix":
                try:
                    os.unlink(self.address)
                except OSError:
                    pass
        for w in self.workers:
            if w.proc.poll() is None:
                w.proc.terminate()
        deadline = time.monotonic() + float(self.config.get("limits", {}).get("drain_timeout_sec", 30))
        for w in self.workers:
            try:
                w.proc.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                w.proc.kill()
                w.proc.wait()
        log("INFO", "shutdown complete")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--config", required=True)
    g = p.add_mutually_exclusive_group()
    g.add_argument("--stdio", action="store_true")
    g.add_argument("--unix")
    g.add_argument("--tcp")
    p.add_argument("--break", dest="breaks", action="append", default=[])
    a = p.parse_args()
    BREAKS.update(a.breaks)
    if "crash-on-start" in BREAKS:
        sys.stderr.write("fake_daemon: crashing on purpose\n")
        return 3
    if "fork-escape" in BREAKS:
        escape(3)
    if "flood-stderr" in BREAKS:
        threading.Thread(target=flood, daemon=True).start()
    with open(a.config) as f:
        config = json.load(f)
    mode, address = ("unix", a.unix) if a.unix else ("tcp", a.tcp) if a.tcp else ("stdio", None)
    if "flood-forever" in BREAKS:
        flood_forever(config, mode, address)
    if "leaves-tmp-files" in BREAKS:
        leave_tmp_files()
    d = Daemon(config, mode, address)

    def on_signal(signo, frame):
        if "crash-on-sigterm" in BREAKS:
            segv()
        d.stop = True
    signal.signal(signal.SIGTERM, signal.SIG_IGN if "ignore-sigterm" in BREAKS else on_signal)
    signal.signal(signal.SIGINT, signal.SIG_IGN if "ignore-sigterm" in BREAKS else on_signal)
    if "ignore-sigterm" in BREAKS:
        escape(1)
    d.spawn()
    d.listen()
    if "never-serve" in BREAKS:
        log("INFO", "ready (and never serving)")
        while True:
            time.sleep(3600)
    log("INFO", f"ready: {len(d.workers)} worker(s), {mode} mode")
    d.run()
    return 1 if "exit-1" in BREAKS else 0


if __name__ == "__main__":
    sys.exit(main())
