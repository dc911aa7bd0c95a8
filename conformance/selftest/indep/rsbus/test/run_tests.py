#!/usr/bin/python3
"""Self-written tests for rsbus. Usage: python3 test/run_tests.py [name-filter]"""
import json, os, signal, socket, subprocess, sys, tempfile, time

HERE = os.path.dirname(os.path.abspath(__file__))
BIN = os.path.join(os.path.dirname(HERE), "rsbus")
WORKER = os.path.join(HERE, "echo_worker.py")
TMP = tempfile.mkdtemp(prefix="rsbus-test-")
results = []

def cfg(instances=2, command=WORKER, args=None, **limits):
    lim = {"drain_timeout_sec": 2, "backpressure_timeout_sec": 2, "max_restarts": 3, "restart_window_sec": 10}
    lim.update(limits)
    pool = {"id": "echo", "command": command, "instances": instances}
    if args is not None:
        pool["args"] = args
    path = os.path.join(TMP, "cfg%d.json" % len(results))
    with open(path, "w") as f:
        json.dump({"pools": [pool], "limits": lim}, f)
    return path

def start(mode_args, config, env=None):
    e = dict(os.environ)
    e.update(env or {})
    errf = open(os.path.join(TMP, "stderr%d.log" % len(results)), "w+")
    p = subprocess.Popen([BIN, "--config", config] + mode_args, stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=errf, env=e)
    p.errf = errf
    return p

def stderr_of(p):
    p.errf.flush(); p.errf.seek(0); return p.errf.read()

def wait_for(pred, timeout=5.0):
    end = time.time() + timeout
    while time.time() < end:
        if pred(): return True
        time.sleep(0.05)
    return pred()

def unix_path():
    return os.path.join(TMP, "bus%d.sock" % len(results))

class Conn:
    def __init__(self, sock):
        self.s = sock; self.buf = b""; self.s.settimeout(5)
    def send(self, obj):
        self.s.sendall((json.dumps(obj) + "\n").encode())
    def sendraw(self, b): self.s.sendall(b)
    def recv(self, timeout=5):
        self.s.settimeout(timeout)
        while b"\n" not in self.buf:
            d = self.s.recv(65536)
            if not d: raise EOFError("connection closed")
            self.buf += d
        line, self.buf = self.buf.split(b"\n", 1)
        return json.loads(line)
    def at_eof(self, timeout=5):
        self.s.settimeout(timeout)
        try:
            while True:
                d = self.s.recv(65536)
                if not d: return True
        except (socket.timeout, TimeoutError):
            return False
        except ConnectionResetError:
            return True
    def close(self): self.s.close()

def uconnect(path):
    end = time.time() + 5
    while True:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.connect(path); return Conn(s)
        except (FileNotFoundError, ConnectionRefusedError):
            s.close()
            if time.time() > end: raise
            time.sleep(0.05)

def free_port():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close(); return p

def stop(p, sig=signal.SIGTERM, timeout=8):
    if p.poll() is None:
        p.send_signal(sig)
    try:
        return p.wait(timeout)
    except subprocess.TimeoutExpired:
        p.kill(); p.wait(); return "timeout"

TESTS = []
def test(fn): TESTS.append(fn); return fn

def check(cond, what):
    if not cond: raise AssertionError(what)

# ------------------------------------------------------------------ stdio
@test
def stdio_roundtrip_rr_session_eof():
    p = start(["--stdio"], cfg(2))
    lines = [{"jsonrpc": "2.0", "id": i, "method": "echo"} for i in range(1, 5)]
    lines += [{"jsonrpc": "2.0", "id": "s%d" % i, "method": "echo", "sessionId": "A"} for i in range(3)]
    inp = "".join(json.dumps(l) + "\n" for l in lines) + "\n   \n"
    out, _ = p.communicate(inp.encode(), timeout=10)
    check(p.returncode == 0, "exit code %r" % p.returncode)
    resp = [json.loads(l) for l in out.decode().splitlines()]
    check(len(resp) == 7, "got %d responses" % len(resp))
    byid = {r["id"]: r for r in resp}
    pids = [byid[i]["result"]["pid"] for i in range(1, 5)]
    check(pids[0] != pids[1] and pids[0] == pids[2] and pids[1] == pids[3], "round robin pids %r" % pids)
    spids = {byid["s%d" % i]["result"]["pid"] for i in range(3)}
    check(len(spids) == 1, "session affinity %r" % spids)
    check(all(byid["s0"]["sessionId"] == "A" for _ in [0]), "sessionId preserved")

@test
def stdio_pending_answered_after_eof():
    p = start(["--stdio"], cfg(1))
    t0 = time.time()
    out, _ = p.communicate(b'{"jsonrpc":"2.0","id":9,"method":"sleep","params":{"sec":0.7}}\n', timeout=10)
    check(p.returncode == 0, "exit %r" % p.returncode)
    check(json.loads(out)["id"] == 9, "late response delivered")
    check(time.time() - t0 >= 0.6, "waited for the response")

@test
def stdio_final_line_without_newline():
    p = start(["--stdio"], cfg(1))
    out, _ = p.communicate(b'{"id":1,"method":"echo"}', timeout=10)
    check(json.loads(out)["id"] == 1, "unterminated last line processed")

@test
def stdio_malformed_client_input_closes():
    p = start(["--stdio"], cfg(1))
    p.stdin.write(b'{"id":1,"method":"echo"}\n{not json}\n'); p.stdin.flush()
    rc = p.wait(10)
    err = stderr_of(p)
    check(rc == 1, "exit code %r" % rc)
    check("malformed JSON" in err, "logged")
    p.stdout.read()

@test
def stdio_routing_field_error_closes():
    p = start(["--stdio"], cfg(1))
    out, _ = p.communicate(b'{"id":{"x":1},"method":"echo"}\n', timeout=10)
    check(p.returncode == 1, "exit code %r" % p.returncode)
    check("routing fields" in stderr_of(p), "logged")
    p2 = start(["--stdio"], cfg(1))
    out, _ = p2.communicate(b'[{"id":1,"method":"echo"}]\n', timeout=10)
    check(p2.returncode == 1 and out == b"", "batch rejected")

@test
def stdio_notifications_and_unroutable():
    p = start(["--stdio"], cfg(1))
    out, _ = p.communicate(b'{"id":1,"method":"notify","sessionId":"S"}\n{"id":2,"method":"wrongid"}\n{"id":3,"method":"echo"}\n', timeout=10)
    msgs = [json.loads(l) for l in out.decode().splitlines()]
    methods = [m.get("method") for m in msgs]
    check("progress" in methods, "session notification routed: %r" % msgs)
    check("nosession" not in methods, "notification without session discarded")
    check(sorted(m["id"] for m in msgs if "id" in m) == [1, 3], "wrong-id response discarded: %r" % msgs)
    err = stderr_of(p)
    check("not found in pending" in err and "unroutable" in err, "warnings logged")

@test
def stdio_sigterm_exit0():
    p = start(["--stdio"], cfg(2, drain_timeout_sec=5), env={"TERM_MARKER_DIR": TMP})
    p.stdin.write(b'{"id":1,"method":"echo"}\n{"id":2,"method":"echo"}\n'); p.stdin.flush()
    json.loads(p.stdout.readline()); json.loads(p.stdout.readline())
    rc = stop(p)
    check(rc == 0, "exit %r" % rc)
    check(stderr_of(p).count("got SIGTERM") == 2, "workers got SIGTERM")

# ------------------------------------------------------------------ unix
@test
def unix_two_clients_same_id_and_sessions():
    path = unix_path()
    p = start(["--unix", path], cfg(2))
    try:
        a = uconnect(path); b = uconnect(path)
        a.send({"id": 1, "method": "echo", "params": "A"})
        b.send({"id": 1, "method": "echo", "params": "B"})
        ra = a.recv(); rb = b.recv()
        check(ra["result"]["params"] == "A" and rb["result"]["params"] == "B", "per-client id 1 routing")
        # sessions: owner gets notifications
        a.send({"id": 2, "method": "notify", "sessionId": "sa"})
        got = [a.recv(), a.recv()]
        check({g.get("method") for g in got} >= {"progress"}, "notification to owner %r" % got)
        # b uses a's session -> routed to same worker, notification still to owner a
        pid_a = [g for g in got if "result" in g][0]["result"]["pid"]
        b.send({"id": 3, "method": "echo", "sessionId": "sa"})
        check(b.recv()["result"]["pid"] == pid_a, "same worker for existing session")
        b.send({"method": "notify_me", "sessionId": "sa"})
        check(a.recv()["method"] == "note", "notification goes to owner a")
        # a disconnects: session invalidated; b now creates it and owns it
        a.close()
        check(wait_for(lambda: "invalidated 1 session(s) owned" in stderr_of(p)), "session invalidated on disconnect")
        b.send({"method": "notify_me", "sessionId": "sa"})
        check(b.recv()["method"] == "note", "new owner b")
        b.close()
    finally:
        rc = stop(p)
    check(rc == 0, "exit %r" % rc)
    check(not os.path.exists(path), "socket unlinked")

@test
def unix_half_close_gets_responses():
    path = unix_path()
    p = start(["--unix", path], cfg(1))
    try:
        c = uconnect(path)
        c.send({"id": 1, "method": "sleep", "params": {"sec": 0.3}})
        c.s.shutdown(socket.SHUT_WR)
        check(c.recv()["id"] == 1, "response after half-close")
        check(c.at_eof(), "closed after response")
    finally:
        stop(p)

@test
def unix_malformed_closes_only_that_client():
    path = unix_path()
    p = start(["--unix", path], cfg(1))
    try:
        a = uconnect(path); b = uconnect(path)
        a.sendraw(b"garbage\n")
        check(a.at_eof(), "bad client closed")
        b.send({"id": 5, "method": "echo"})
        check(b.recv()["id"] == 5, "other client fine")
        check(p.poll() is None, "daemon alive")
    finally:
        stop(p)

@test
def unix_input_overflow():
    path = unix_path()
    p = start(["--unix", path], cfg(1, max_input_buffer=1000))
    try:
        a = uconnect(path)
        a.send({"id": 1, "method": "echo", "params": "x" * 900})
        check(a.recv()["id"] == 1, "line under limit ok")
        a.sendraw(b'{"id":2,"params":"' + b"y" * 2000)
        check(a.at_eof(), "closed on overflow")
        check("overflow" in stderr_of(p), "logged")
    finally:
        stop(p)

# ------------------------------------------------------------------ tcp
@test
def tcp_roundtrip_and_half_close():
    port = free_port()
    p = start(["--tcp", "127.0.0.1:%d" % port], cfg(2))
    try:
        wait_for(lambda: "listening on tcp" in stderr_of(p))
        s = socket.create_connection(("127.0.0.1", port)); c = Conn(s)
        for i in range(4):
            c.send({"jsonrpc": "2.0", "id": "t%d" % i, "method": "echo"})
        rs = [c.recv() for _ in range(4)]
        check(sorted(r["id"] for r in rs) == ["t0", "t1", "t2", "t3"], "4 responses")
        check(len({r["result"]["pid"] for r in rs}) == 2, "both workers used")
        c.send({"id": 99, "method": "sleep", "params": {"sec": 0.3}})
        s.shutdown(socket.SHUT_WR)
        check(c.recv()["id"] == 99, "response after FIN")
        c.close()
    finally:
        rc = stop(p, signal.SIGINT)
    check(rc == 0, "exit on SIGINT %r" % rc)

# ------------------------------------------------------------------ failures
@test
def restart_after_crash():
    path = unix_path()
    p = start(["--unix", path], cfg(1))
    try:
        c = uconnect(path)
        c.send({"id": 1, "method": "echo"}); pid1 = c.recv()["result"]["pid"]
        c.send({"id": 2, "method": "crash", "sessionId": "z"})
        check(wait_for(lambda: "exited unexpectedly" in stderr_of(p)), "exit seen")
        c.send({"id": 3, "method": "echo", "sessionId": "z"})  # sent during backoff: held until restart
        r = c.recv()
        check(r["id"] == 3 and r["result"]["pid"] != pid1, "served by restarted worker: %r" % r)
        err = stderr_of(p)
        check("exited unexpectedly" in err and "discarding pending request id 2" in err, "logged")
    finally:
        stop(p)

@test
def max_restarts_gives_up():
    p = start(["--stdio"], cfg(1, command="/bin/false", max_restarts=2))
    ok = wait_for(lambda: "exceeded max_restarts" in stderr_of(p), 5)
    check(ok, "gave up")
    check(stderr_of(p).count("will be restarted") == 2, "exactly 2 restarts")
    p.stdin.write(b'{"id":1,"method":"echo"}\n'); p.stdin.close()
    check(p.wait(5) == 0, "exits after EOF")
    check(p.stdout.read() == b"", "nothing forwarded")

@test
def worker_garbage_terminated_and_restarted():
    path = unix_path()
    p = start(["--unix", path], cfg(1))
    try:
        c = uconnect(path)
        c.send({"id": 1, "method": "echo"}); pid1 = c.recv()["result"]["pid"]
        c.send({"id": 2, "method": "garbage"})
        check(wait_for(lambda: "malformed JSON on stdout" in stderr_of(p)), "logged")
        time.sleep(0.3)
        c.send({"id": 3, "method": "echo"})
        r = c.recv()
        check(r["id"] == 3 and r["result"]["pid"] != pid1, "restarted")
    finally:
        stop(p)

@test
def reply_then_exit_is_delivered():
    path = unix_path()
    p = start(["--unix", path], cfg(1))
    try:
        c = uconnect(path)
        c.send({"id": 1, "method": "reply_then_exit"})
        check(c.recv()["id"] == 1, "final output of exiting worker forwarded")
    finally:
        stop(p)

# ------------------------------------------------------------------ backpressure
@test
def backpressure_slow_reader_loses_nothing():
    path = unix_path()
    p = start(["--unix", path], cfg(1, max_output_queue=8192, backpressure_timeout_sec=5))
    try:
        c = uconnect(path)
        c.s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        N = 150
        for i in range(N):
            c.send({"id": i, "method": "big", "params": {"n": 20000}})
        check(wait_for(lambda: "applying backpressure" in stderr_of(p), 5), "backpressure applied")
        time.sleep(0.5)
        ids = set()
        for _ in range(N):
            ids.add(c.recv()["id"])
        check(ids == set(range(N)), "all %d responses arrived" % N)
        check("releasing backpressure" in stderr_of(p), "released")
    finally:
        stop(p)

@test
def backpressure_timeout_closes_client():
    path = unix_path()
    p = start(["--unix", path], cfg(1, max_output_queue=4096, backpressure_timeout_sec=1))
    try:
        c = uconnect(path)
        c.s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        for i in range(60):
            c.send({"id": i, "method": "big", "params": {"n": 50000}})
        check(wait_for(lambda: "backpressure timeout" in stderr_of(p), 6), "closed after timeout")
        d = uconnect(path)
        d.send({"id": 1, "method": "echo"})
        check(d.recv()["id"] == 1, "daemon still serves others")
    finally:
        stop(p)

# ------------------------------------------------------------------ shutdown
@test
def shutdown_kills_stubborn_worker():
    path = unix_path()
    p = start(["--unix", path], cfg(1, drain_timeout_sec=1), env={"IGNORE_TERM": "1"})
    wait_for(lambda: "started" in stderr_of(p))
    time.sleep(0.3)
    t0 = time.time(); rc = stop(p); dt = time.time() - t0
    check(rc == 0, "exit 0, got %r" % rc)
    check(0.8 <= dt < 4, "took %.2fs" % dt)
    check("SIGKILL" in stderr_of(p), "SIGKILL logged")

@test
def config_and_usage_errors():
    bad = [
        {"pools": []},
        {"pools": [{"id": "a", "command": WORKER, "instances": 0}]},
        {"pools": [{"id": "a", "command": "/nonexistent/x", "instances": 1}]},
        {"pools": [{"id": "a", "command": WORKER, "instances": 1}, {"id": "a", "command": WORKER, "instances": 1}]},
        {"pools": [{"id": "a", "command": WORKER, "instances": 1}], "limits": {"max_input_buffer": "big"}},
    ]
    for i, c in enumerate(bad):
        path = os.path.join(TMP, "bad%d.json" % i)
        with open(path, "w") as f: json.dump(c, f)
        r = subprocess.run([BIN, "--config", path], input=b"", capture_output=True, timeout=5)
        check(r.returncode == 1 and r.stdout == b"", "bad config %d -> %r" % (i, r.returncode))
    for argv in [[], ["--config"], ["--config", cfg(1), "--unix", "/tmp/x", "--tcp", "1:2"], ["--config", cfg(1), "--bogus"]]:
        r = subprocess.run([BIN] + argv, input=b"", capture_output=True, timeout=5)
        check(r.returncode == 1, "usage error %r -> %r" % (argv, r.returncode))
    r = subprocess.run([BIN, "--config", cfg(1), "--tcp", "127.0.0.1:notaport"], capture_output=True, timeout=5)
    check(r.returncode == 1, "bad tcp addr")

@test
def shell_worker_bare_command_with_args():
    p = start(["--stdio"], cfg(1, command="sh", args=[os.path.join(HERE, "sh_worker.sh"), "argOK"]))
    out, _ = p.communicate(b'{"jsonrpc":"2.0","id":41,"method":"x"}\n', timeout=10)
    r = json.loads(out)
    check(p.returncode == 0 and r["id"] == 41 and r["who"] == "argOK", "sh worker: %r" % out)

@test
def many_pipelined_requests_no_loss():
    p = start(["--stdio"], cfg(2))
    inp = "".join(json.dumps({"id": i, "method": "echo", "sessionId": "s%d" % (i % 50)}) + "\n" for i in range(20000))
    out, _ = p.communicate(inp.encode(), timeout=60)
    ids = [json.loads(l)["id"] for l in out.decode().splitlines()]
    check(p.returncode == 0 and sorted(ids) == list(range(20000)), "got %d responses" % len(ids))

@test
def worker_stdin_backpressure_pauses_client():
    import threading
    p = start(["--stdio"], cfg(1, max_output_queue=2000, backpressure_timeout_sec=5))
    got = []
    def reader():
        for l in p.stdout: got.append(json.loads(l)["id"])
    t = threading.Thread(target=reader, daemon=True); t.start()
    p.stdin.write(b'{"id":0,"method":"sleep","params":{"sec":1}}\n')
    big = "z" * 10000
    for i in range(1, 30):
        p.stdin.write((json.dumps({"id": i, "method": "echo", "params": big}) + "\n").encode())
    p.stdin.close()
    rc = p.wait(20); t.join(5)
    check(rc == 0 and sorted(got) == list(range(30)), "rc %r, got %d" % (rc, len(got)))
    check("applying backpressure" in stderr_of(p), "backpressure logged")

@test
def round_robin_across_two_pools():
    path = os.path.join(TMP, "twopools.json")
    sh = os.path.join(HERE, "sh_worker.sh")
    with open(path, "w") as f:
        json.dump({"pools": [{"id": "a", "command": sh, "args": ["A"], "instances": 1},
                             {"id": "b", "command": sh, "args": ["B"], "instances": 2}]}, f)
    p = start([], path)
    inp = "".join('{"id":%d,"method":"m"}\n' % i for i in range(6))
    out, _ = p.communicate(inp.encode(), timeout=10)
    who = {json.loads(l)["id"]: json.loads(l)["who"] for l in out.decode().splitlines()}
    check([who[i] for i in range(6)] == ["A", "B", "B", "A", "B", "B"], "rr order %r" % who)

@test
def backoff_doubles():
    p = start(["--stdio"], cfg(1, command="/bin/false", max_restarts=3))
    check(wait_for(lambda: "exceeded max_restarts" in stderr_of(p), 5), "gave up")
    err = stderr_of(p)
    check("in 100 ms" in err and "in 200 ms" in err and "in 400 ms" in err, "delays 100/200/400")
    p.stdin.close(); p.wait(5)

def main():
    flt = sys.argv[1] if len(sys.argv) > 1 else ""
    passed = failed = 0
    for t in TESTS:
        if flt not in t.__name__: continue
        t0 = time.time()
        try:
            t(); passed += 1; print("ok   %-45s %.2fs" % (t.__name__, time.time() - t0))
        except Exception as e:
            failed += 1; print("FAIL %-45s %s: %s" % (t.__name__, type(e).__name__, e))
        results.append(t.__name__)
    import shutil
    if not failed: shutil.rmtree(TMP, ignore_errors=True)
    print("%d passed, %d failed" % (passed, failed))
    sys.exit(1 if failed else 0)

if __name__ == "__main__":
    main()
