#!/usr/bin/python3
"""Tiny JSON-RPC worker for testing rsbus. Behaviour by method name."""
import json, os, signal, sys, time

PID = os.getpid()
TAG = os.environ.get("WORKER_TAG", "")

def on_term(signum, frame):
    sys.stderr.write("echo_worker %d got SIGTERM\n" % PID)
    sys.stderr.flush()
    marker = os.environ.get("TERM_MARKER_DIR")
    if marker:
        open(os.path.join(marker, "term.%d" % PID), "w").close()
    if os.environ.get("IGNORE_TERM"):
        return
    sys.exit(0)

signal.signal(signal.SIGTERM, on_term)

def send(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()

for line in sys.stdin:
    line = line.strip()
    if not line:
        continue
    msg = json.loads(line)
    mid = msg.get("id")
    method = msg.get("method")
    sid = msg.get("sessionId")
    params = msg.get("params")
    if method is None or mid is None:
        if method == "notify_me" and sid is not None:
            send({"jsonrpc": "2.0", "method": "note", "sessionId": sid, "params": {"pid": PID}})
        continue
    resp = {"jsonrpc": "2.0", "id": mid}
    if sid is not None:
        resp["sessionId"] = sid
    if method == "crash":
        sys.exit(3)
    elif method == "garbage":
        sys.stdout.write("this is not json\n"); sys.stdout.flush(); continue
    elif method == "notify":
        send({"jsonrpc": "2.0", "method": "progress", "sessionId": sid, "params": {"pid": PID}})
        send({"jsonrpc": "2.0", "method": "nosession"})
    elif method == "sleep":
        time.sleep(float(params.get("sec", 1)))
    elif method == "wrongid":
        resp["id"] = "no-such-id"
    elif method == "big":
        resp["result"] = {"pid": PID, "data": "x" * int(params.get("n", 1000))}
        send(resp); continue
    elif method == "reply_then_exit":
        resp["result"] = {"pid": PID}
        send(resp); sys.exit(0)
    resp["result"] = {"pid": PID, "tag": TAG, "method": method, "params": params}
    send(resp)
