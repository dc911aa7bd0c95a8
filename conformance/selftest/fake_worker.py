#!/usr/bin/python3
"""A stand-in for the mock worker, for the harness self-tests only: the echo
mode and the --log/--pidfile formats of build/mock_workers/mock_worker, with
the directives the suite's framing and routing tests use (emit, reply_id,
reply_session, no_reply, notify, split, split_pause_ms, delay_ms, request).
Ids and sessionIds are echoed as their raw tokens, like the mock's."""

import json
import os
import signal
import sys
import time

from fake_json import loads, raw_members

PID = os.getpid()
WID = os.environ.get("STDIO_BUS_WORKER_ID")
POOL = os.environ.get("STDIO_BUS_POOL_ID")
LOG = None


def log(kind, raw=b""):
    if LOG is not None:
        os.write(LOG, b"%d %d %s %s %s\n" % (time.monotonic_ns(), PID, (WID or "-").encode(),
                                              kind.encode(), raw))


def out(data, pieces=1, pause_ms=0):
    for line in data.split(b"\n")[:-1]:
        log("out", line)
    step = max(1, -(-len(data) // pieces))
    for i in range(0, len(data), step):
        os.write(1, data[i:i + step])
        if pause_ms and i + step < len(data):
            time.sleep(pause_ms / 1000)


def on_term(signo, frame):
    log("signal", b"TERM")
    log("exit", b"0")
    os._exit(0)


WAITING = {}  # server-to-client request id -> the request that waits for the reply
SRV_SEQ = [0]


def answer(raw, msg, mock, client_reply=None):
    if mock.get("no_reply"):
        return
    rid = json.dumps(mock["reply_id"]) if "reply_id" in mock else raw["id"]
    result = {"method": msg["method"], "params": msg.get("params"), "worker": WID, "pool": POOL, "pid": PID}
    if client_reply is not None:
        result["client_reply"] = client_reply
    if "big" in mock:
        result["pad"] = "x" * int(mock["big"])
    body = json.dumps(result, separators=(",", ":"), ensure_ascii=False)
    data = '{"jsonrpc":"2.0","id":%s,"result":%s' % (rid, body)
    if "reply_session" in mock:
        if mock["reply_session"] is not None:
            data += ',"sessionId":%s' % json.dumps(mock["reply_session"])
    elif "sessionId" in raw:
        data += ',"sessionId":%s' % raw["sessionId"]
    out((data + "}\n").encode("utf-8", "surrogateescape"), int(mock.get("split", 1)),
        mock.get("split_pause_ms", 0))


def handle(line):
    try:
        msg = loads(line)
        raw = raw_members(line)
    except ValueError:
        return
    if not isinstance(msg, dict):
        return
    if "method" not in msg and ("result" in msg or "error" in msg):
        waiting = WAITING.pop(raw.get("id"), None)
        if waiting is not None:
            answer(*waiting, client_reply=msg)
        return
    if not isinstance(msg.get("method"), str):
        return
    params = msg.get("params")
    mock = params.get("mock", {}) if isinstance(params, dict) else {}
    if not isinstance(mock, dict):
        mock = {}
    sid = raw.get("sessionId")
    if isinstance(mock.get("request"), dict) and "id" in msg:
        SRV_SEQ[0] += 1
        srv = '"srv-%d"' % SRV_SEQ[0]
        spec = mock["request"]
        data = '{"jsonrpc":"2.0","id":%s,"method":%s' % (srv, json.dumps(spec.get("method", "mock/request")))
        if "params" in spec:
            data += ',"params":%s' % json.dumps(spec["params"])
        if sid is not None:
            data += ',"sessionId":%s' % sid
        out((data + "}\n").encode())
        WAITING[srv] = (raw, msg, mock)
        return
    if mock.get("delay_ms"):
        time.sleep(mock["delay_ms"] / 1000)
    for i in range(int(mock.get("notify", 0))):
        note = '{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":%s,' \
               '"progress":%d,"total":%d}' % (raw.get("id", "null"), i + 1, mock["notify"])
        if sid is not None:
            note += ',"sessionId":%s' % sid
        out((note + "}\n").encode("utf-8", "surrogateescape"))
    if "emit" in mock:
        out(mock["emit"].encode("utf-8", "surrogateescape"), int(mock.get("split", 1)), mock.get("split_pause_ms", 0))
        return
    if "id" in msg:
        answer(raw, msg, mock)


def main():
    global LOG
    args = sys.argv[1:]
    for i, a in enumerate(args):
        if a == "--log":
            LOG = os.open(args[i + 1], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        elif a == "--pidfile":
            fd = os.open(args[i + 1], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            os.write(fd, b"%d\n" % PID)
            os.close(fd)
    signal.signal(signal.SIGTERM, on_term)
    log("start", " ".join(sys.argv).encode())
    if "--stall" in args and args[args.index("--stall") + 1:][:1] == ["read"]:  # as mock_worker: reads nothing
        while True:                                       # (the preflight's full-pipe item)
            signal.pause()
    stdin = sys.stdin.buffer
    while True:
        line = stdin.readline()
        if not line:
            break
        log("in", line.rstrip(b"\n"))
        handle(line)
    log("exit", b"0")


if __name__ == "__main__":
    main()
