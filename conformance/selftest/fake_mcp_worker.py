#!/usr/bin/python3
"""A stand-in for ref_worker, for the harness self-tests only: a small MCP
tool server over NDJSON (tools echo, add, slow, sample) that meets every
clause of WORKER_SPEC.md, so the worker-side suite passes against it. Each
`--break NAME` switches one behaviour off (BREAKS below), so the self-tests
can show that the worker-side tests of that clause fail.

Options that are not breaks but what a strict MCP server on its own may do
(STRICT below): `--strict-members` (drops messages with a top-level member
outside the JSON-RPC envelope, as the TypeScript SDK's validator does),
`--strict-lifecycle` (refuses requests but ping before initialize),
`--mcp-messages` (MCP's narrowing of JSON-RPC: an array is an invalid
request, as batches went in 2025-06-18; a null id is invalid), `--chatty`
(a notification after every answer, a roots/list request after
notifications/initialized). Judged as `mcp` alone it passes with all four.
`--slow-initialize MS`: its first `initialize` is answered MS ms late, and
nothing is read meanwhile (a server that loads a large bundle first): the
suite's verdict must be the same as at 0 (issue 37).

Single-threaded: a select() loop over stdin and a signal wakeup pipe, with
timers for `slow` calls. Ids, sessionIds and progress tokens are copied as
their raw tokens."""

import heapq
import itertools
import json
import math
import os
import select
import signal
import sys
import time

from fake_json import raw_members

BREAKS = {
    "log-stdout": "a log line on stdout at the first request",
    "verbose-stdout": "with --verbose, log lines on stdout",
    "banner": "a JSON-RPC notification at start, before any input",
    "hello-json": "a JSON object that is not JSON-RPC at the first request",
    "array-out": "answers ping with an array holding the response",
    "latin1": "writes the text of echo in Latin-1",
    "echo-bad-utf8": "a line that is not UTF-8 is handled, its bytes echoed",
    "no-final-newline": "the last line before exiting has no newline",
    "unescape-newlines": "\\n escapes in ids, sessionIds and texts are written as raw newlines",
    "no-reassembly": "each chunk read is handled as a line, complete or not",
    "drop-every-5th": "every fifth input line is ignored",
    "double-answer": "every third request is answered twice",
    "stray-response": "a response with an id no request had, at the first request",
    "no-result": "ping is answered without result or error",
    "no-session": "results carry no sessionId",
    "no-session-on-errors": "error responses carry no sessionId",
    "notify-no-session": "a notification without sessionId at every ping",
    "ids-as-values": "ids re-serialized from their values (1.0 becomes 1)",
    "session-as-value": "sessionIds re-serialized from their values",
    "copy-any-session": "sessionIds that are not strings are copied too",
    "ignore-term": "SIGTERM is ignored",
    "term-exit-1": "SIGTERM and SIGINT exit with status 1",
    "term-drops": "SIGTERM exits at once, dropping calls in flight",
    "eof-stay": "keeps running at end of input",
    "eof-drops": "handles lines 50 ms after reading them; at end of input, exits at once",
    "close-stdin": "closes its stdin after the second request",
    "die-on-long-line": "exits on a line longer than 1 MiB",
    "no-jsonrpc-member": "error responses have no jsonrpc member",
    "result-and-error": "error responses also carry result: null",
    "error-code-string": "error codes are strings",
    "reserved-code": "unknown methods get code -32500",
    "parse-error-id": "parse errors carry id 0",
    "poisoned": "the line after a parse error is ignored",
    "invalid-as-params": "invalid requests get -32602",
    "invalid-id-null": "-32600 errors always carry id null and no sessionId",
    "unknown-method-result": "unknown methods get an empty result",
    "params-ok": "initialize without protocolVersion and bad tool arguments are accepted",
    "internal-as-params": "a sum that overflows gets -32602",
    "answer-notifications": "notifications of unknown methods get -32601 with id null",
    "answer-responses": "responses get a -32600 error",
    "params-32602": "params that are not structured get -32602",
    "lenient-json": "leading zeros, raw tabs and lone surrogates are accepted",
    "blank-lines-error": "blank lines get an invalid-request error",
    "batch-per-line": "a batch is answered one line per response",
    "empty-batch-array": "a batch without requests gets []",
    "empty-array-as-array": "[] gets an array holding the error",
    "batch-one-error": "a batch of invalid elements gets one error",
    "slow-answers": "unknown methods and tools/list are answered after 4 s",
    "ask-blocks": "while a call waits for the client, nothing but responses is read",
    "no-server-info": "initialize has no serverInfo",
    "fixed-version": "initialize offers the version asked for, known or not",
    "no-tools-cap": "capabilities has no tools",
    "answer-initialized": "notifications/initialized gets an empty result with id null",
    "schema-no-type": "inputSchema has no type",
    "content-string": "tool results hold content as a string",
    "unknown-tool-result": "an unknown tool gets an isError result",
    "one-initialize": "a second initialize gets an error",
    "serial": "slow calls block the loop",
    "interleave": "every second line is written in the middle of the one before",
    "silent": "writes nothing at all",
    "die-on-term": "SIGTERM kills it (the signal's default action)",
    "progress-shrinks": "progress counts down",
    "progress-always": "progress is sent without a token too (token null)",
    "late-progress": "one more progress after a slow call's answer",
    "progress-no-session": "progress carries no sessionId",
    "ignore-cancel": "notifications/cancelled is ignored",
    "cancel-by-id-only": "notifications/cancelled cancels every call with that id, whatever its session",
    "answer-cancel": "notifications/cancelled gets an empty result with id null",
    "reuse-ask-id": "every request to the client has id \"fake-1\"",
    "ask-no-session": "requests to the client carry no sessionId",
    "ignore-client-error": "an error from the client leaves the call waiting",
    "ask-hangs-at-end": "calls waiting for the client get no answer at the end",
    "die-on-bad-json": "exits with status 1 on a line that is not JSON",
    "no-string-ids": "requests with a string id are dropped",
    "digit-ids-as-numbers": "a string id of digits (\"7\") is answered as a number (7)",
    "print-on-term": "SIGTERM prints a line of text on stdout, as some launchers do, before the exit",
}

STRICT = ("--strict-members", "--strict-lifecycle", "--mcp-messages", "--chatty")
ENVELOPE = ("jsonrpc", "id", "method", "params", "result", "error")
LATEST = "2025-11-25"
VERSIONS = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")
MESSAGES = {-32700: "Parse error", -32600: "Invalid Request", -32601: "Method not found",
            -32602: "Invalid params", -32603: "Internal error"}
_RO = {"readOnlyHint": True, "openWorldHint": False}
TOOLS = [{"name": "echo", "annotations": _RO,
          "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}},
         {"name": "add", "annotations": _RO,
          "inputSchema": {"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
                          "required": ["a", "b"]}},
         {"name": "slow", "annotations": _RO,
          "inputSchema": {"type": "object", "properties": {"ms": {"type": "integer"}, "steps": {"type": "integer"}},
                          "required": ["ms"]}},
         {"name": "sample", "annotations": {"readOnlyHint": False},
          "inputSchema": {"type": "object", "properties": {"prompt": {"type": "string"}}, "required": ["prompt"]}}]


def broken(name):
    return name in STATE.breaks


class State:
    def __init__(self):
        self.breaks = set()
        self.strict = set()            # STRICT options, without their dashes
        self.ready = False             # notifications/initialized received
        self.roots_asked = set()       # ids of our roots/list requests (--chatty)
        self.verbose = False
        self.slow_initialize = 0.0     # s the first initialize takes (--slow-initialize MS)
        self.lines_seen = 0
        self.requests_seen = 0
        self.timers = []               # heap of (due, seq, fn)
        self.seq = itertools.count()
        self.slow = {}                 # (session key, id key) -> call
        self.asks = {}                 # raw id of our request -> call
        self.ask_n = 0
        self.initialized = False
        self.skip_next = False
        self.reading = True
        self.ending = None             # None, "eof" or "signal"
        self.last_line = b""
        self.held = b""                # "interleave": the second half of a line
        self.deferred = []             # "ask-blocks": lines read while a call waits


STATE = State()


# -- output ---------------------------------------------------------------------------------
def write(data: bytes):
    view = memoryview(data)
    while view:
        try:
            n = os.write(1, view)
        except BlockingIOError:
            select.select([], [1], [])
            continue
        except BrokenPipeError:
            os._exit(1)
        view = view[n:]


def out(line: str):
    """One message line (str with surrogate escapes for raw bytes)."""
    if broken("silent"):
        return
    data = line.encode("utf-8", "surrogateescape")
    if broken("unescape-newlines"):
        data = data.replace(b"\\n", b"\n")
    if broken("latin1"):
        data = data.decode("utf-8", "surrogateescape").encode("latin-1", "replace")
    STATE.last_line = data
    data += b"\n"
    if broken("interleave"):
        if not STATE.held:
            write(data[:len(data) // 2])
            STATE.held = data[len(data) // 2:]
            return
        data, STATE.held = data + STATE.held, b""
    write(data)


def flush_held():
    if STATE.held:
        write(STATE.held)
        STATE.held = b""


def log(text: str):
    if broken("verbose-stdout") and STATE.verbose:
        write(f"fake_mcp_worker: {text}\n".encode())
    os.write(2, f"fake_mcp_worker[{os.getpid()}]: {text}\n".encode())


def tok(value) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def is_id(value) -> bool:
    return value is None or isinstance(value, str) or (isinstance(value, (int, float)) and not isinstance(value, bool))


def id_key(value):
    return ("s", value) if isinstance(value, str) else ("n", value) if value is not None else ("null",)


class Msg:
    """A message and the raw tokens of its members."""

    def __init__(self, obj, raw: dict):
        self.obj, self.raw = obj, raw

    def id_tok(self):
        if "id" in self.obj and is_id(self.obj["id"]):
            if broken("ids-as-values"):
                return tok(self.obj["id"])
            if broken("digit-ids-as-numbers") and isinstance(self.obj["id"], str) and self.obj["id"].isdigit():
                return self.obj["id"]
            return self.raw["id"]
        return "null"

    def sid_tok(self):
        sid = self.obj.get("sessionId")
        if isinstance(sid, str) or (broken("copy-any-session") and "sessionId" in self.obj):
            return tok(sid) if broken("session-as-value") else self.raw["sessionId"]
        return None


def envelope(id_tok, member, value, sid_tok, error=False):
    line = '{"jsonrpc":"2.0",' if not (error and broken("no-jsonrpc-member")) else "{"
    line += f'"id":{id_tok},"{member}":{value}'
    if error and broken("result-and-error"):
        line += ',"result":null'
    if sid_tok is not None and not (error and broken("no-session-on-errors")) \
            and not (not error and broken("no-session")):
        line += f',"sessionId":{sid_tok}'
    return line + "}"


def result(msg: Msg, value) -> str:
    return envelope(msg.id_tok(), "result", tok(value), msg.sid_tok())


def error(msg: Msg | None, code: int, data: str) -> str:
    if code == -32600 and broken("invalid-as-params"):
        code = -32602
    if code == -32601 and broken("reserved-code"):
        code = -32500
    id_tok = msg.id_tok() if msg is not None else "null"
    sid_tok = msg.sid_tok() if msg is not None else None
    if code == -32700 and broken("parse-error-id"):
        id_tok = "0"
    if code == -32600 and broken("invalid-id-null"):
        id_tok, sid_tok = "null", None
    err = {"code": str(code) if broken("error-code-string") else code, "message": MESSAGES.get(code, "Error"),
           "data": data}
    return envelope(id_tok, "error", tok(err), sid_tok, error=True)


def text_result(text, is_error=False):
    if broken("content-string"):
        return {"content": text}
    res = {"content": [{"type": "text", "text": text}]}
    if is_error:
        res["isError"] = True
    return res


# -- timers -----------------------------------------------------------------------------------
def at(delay_s, fn):
    heapq.heappush(STATE.timers, (time.monotonic() + delay_s, next(STATE.seq), fn))


def run_timers():
    now = time.monotonic()
    while STATE.timers and STATE.timers[0][0] <= now:
        _, _, fn = heapq.heappop(STATE.timers)
        fn()


# -- tools ---------------------------------------------------------------------------------
def progress_line(call, i):
    token = call["token"]
    value = call["steps"] - i + 1 if broken("progress-shrinks") else i
    line = '{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":%s,"progress":%d,' \
           '"total":%d}' % (token, value, call["steps"])
    if call["msg"].sid_tok() is not None and not broken("progress-no-session"):
        line += ',"sessionId":%s' % call["msg"].sid_tok()
    return line + "}"


def start_slow(msg: Msg, args: dict, token):
    ms, steps = args.get("ms"), args.get("steps", 1)
    if not isinstance(ms, int) or isinstance(ms, bool) or not 0 <= ms <= 20000:
        return error(msg, -32602, "slow: ms must be an integer from 0 to 20000")
    if not isinstance(steps, int) or isinstance(steps, bool) or not 0 <= steps <= 1000:
        return error(msg, -32602, "slow: steps must be an integer from 0 to 1000")
    if token is None and broken("progress-always"):
        token = "null"
    call = {"msg": msg, "token": token, "steps": steps, "live": True}
    key = (msg.obj.get("sessionId") if isinstance(msg.obj.get("sessionId"), str) else None, id_key(msg.obj["id"]))
    STATE.slow[key] = call
    if broken("serial"):
        time.sleep(ms / 1000)
        STATE.slow.pop(key, None)
        return result(msg, text_result(f"slept {ms} ms in {steps} steps"))

    def step(i):
        if not call["live"]:
            return
        if call["token"] is not None:
            out(progress_line(call, i))

    def finish():
        if not call["live"]:
            return
        call["live"] = False
        STATE.slow.pop(key, None)
        out(result(msg, text_result(f"slept {ms} ms in {steps} steps")))
        if broken("late-progress") and call["token"] is not None:
            out(progress_line(call, steps + 1))

    for i in range(1, steps + 1):
        at(ms * i / steps / 1000, lambda i=i: step(i))
    at(ms / 1000, finish)
    return None


def start_sample(msg: Msg, args: dict):
    if not isinstance(args.get("prompt"), str):
        return error(msg, -32602, "sample: prompt must be a string")
    STATE.ask_n += 1
    ask_id = '"fake-1"' if broken("reuse-ask-id") else f'"fake-{STATE.ask_n}"'
    line = '{"jsonrpc":"2.0","id":%s,"method":"sampling/createMessage","params":%s' % (
        ask_id, tok({"messages": [{"role": "user", "content": {"type": "text", "text": args["prompt"]}}],
                     "maxTokens": 100}))
    if msg.sid_tok() is not None and not broken("ask-no-session"):
        line += ',"sessionId":%s' % msg.sid_tok()
    STATE.asks[ask_id] = {"msg": msg}
    out(line + "}")
    return None


def tools_call(msg: Msg, params):
    if not isinstance(params, dict):
        return error(msg, -32602, "params must be an object")
    name, args = params.get("name"), params.get("arguments", {})
    if not isinstance(name, str):
        return error(msg, -32602, "name must be a string")
    if not isinstance(args, dict):
        if not broken("params-ok"):
            return error(msg, -32602, "arguments must be an object")
        args = {}
    if name == "echo":
        text = args.get("text")
        if not isinstance(text, str):
            if not broken("params-ok"):
                return error(msg, -32602, "echo: text must be a string")
            text = str(text)
        return result(msg, text_result(text))
    if name == "add":
        a, b = args.get("a"), args.get("b")
        if not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in (a, b)):
            return error(msg, -32602, "add: a and b must be numbers")
        total = a + b
        if isinstance(total, float) and not math.isfinite(total):
            return error(msg, -32602 if broken("internal-as-params") else -32603, "add: the sum is not finite")
        return result(msg, text_result(str(total)))
    if name == "slow":
        meta = params.get("_meta")
        token = None
        if isinstance(meta, dict) and "progressToken" in meta:
            token = raw_members(raw_members(msg.raw["params"].encode("utf-8", "surrogateescape"))["_meta"]
                                .encode("utf-8", "surrogateescape"))["progressToken"]
        return start_slow(msg, args, token)
    if name == "sample":
        return start_sample(msg, args)
    if broken("unknown-tool-result"):
        return result(msg, text_result(f"unknown tool: {name}", is_error=True))
    return error(msg, -32602, f"unknown tool: {name}")


def request(msg: Msg):
    """The answer line of a request, or None when it comes later."""
    STATE.requests_seen += 1
    method, params = msg.obj["method"], msg.obj.get("params")
    if STATE.requests_seen == 1:
        if broken("log-stdout"):
            write(b"fake_mcp_worker: serving\n")
        if broken("hello-json"):
            write(b'{"hello":1}\n')
        if broken("stray-response"):
            out('{"jsonrpc":"2.0","id":"stray","result":{}}')
    if STATE.requests_seen == 2 and broken("close-stdin"):
        os.close(0)
        STATE.reading = False
    if method == "initialize":
        if STATE.slow_initialize:  # loading: reads nothing meanwhile, as a bundle being parsed
            time.sleep(STATE.slow_initialize)
            STATE.slow_initialize = 0.0
        if STATE.initialized and broken("one-initialize"):
            return error(msg, -32600, "already initialized")
        STATE.initialized = True
        STATE.ready = False
        pv = params.get("protocolVersion") if isinstance(params, dict) else None
        if not isinstance(pv, str) and not broken("params-ok"):
            return error(msg, -32602, "protocolVersion must be a string")
        version = pv if pv in VERSIONS or broken("fixed-version") else LATEST
        res = {"protocolVersion": version, "capabilities": {} if broken("no-tools-cap") else {"tools": {}}}
        if not broken("no-server-info"):
            res["serverInfo"] = {"name": "fake_mcp_worker", "version": "0.1"}
        return result(msg, res)
    if method == "ping":
        if broken("notify-no-session"):
            out('{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"ping"}}')
        if broken("no-result"):
            return envelope(msg.id_tok(), "note", '"no result"', msg.sid_tok())
        line = result(msg, {})
        if broken("array-out"):
            return "[" + line + "]"
        return line
    if "strict-lifecycle" in STATE.strict and not STATE.ready:
        return error(msg, -32600, "the session is not initialized")
    if method == "tools/list":
        if broken("slow-answers"):
            at(4.0, lambda: out(result(msg, {"tools": TOOLS})))
            return None
        tools = [dict(t, inputSchema={"required": t["inputSchema"]["required"]}) if broken("schema-no-type") else t
                 for t in TOOLS]
        return result(msg, {"tools": tools})
    if method == "tools/call":
        return tools_call(msg, params)
    if broken("unknown-method-result"):
        return result(msg, {})
    if broken("slow-answers"):
        at(4.0, lambda: out(error(msg, -32601, f"unknown method: {method}")))
        return None
    return error(msg, -32601, f"unknown method: {method}")


def notification(msg: Msg):
    method, params = msg.obj["method"], msg.obj.get("params")
    if method == "notifications/initialized":
        STATE.ready = STATE.initialized
        if "chatty" in STATE.strict:
            rid = f'"fake-roots-{len(STATE.roots_asked) + 1}"'
            STATE.roots_asked.add(rid)
            out('{"jsonrpc":"2.0","id":%s,"method":"roots/list"}' % rid)
        return '{"jsonrpc":"2.0","id":null,"result":{}}' if broken("answer-initialized") else None
    if method == "notifications/cancelled":
        if broken("answer-cancel"):
            return '{"jsonrpc":"2.0","id":null,"result":{}}'
        rid = params.get("requestId") if isinstance(params, dict) else None
        if broken("ignore-cancel") or not is_id(rid):
            return None
        sid = msg.obj.get("sessionId") if isinstance(msg.obj.get("sessionId"), str) else None
        for key, call in list(STATE.slow.items()):
            if key[1] == id_key(rid) and (key[0] == sid or broken("cancel-by-id-only")):
                call["live"] = False
                del STATE.slow[key]
                log(f"cancelled {rid!r}")
                if not broken("cancel-by-id-only"):
                    break
        for ask_id, call in list(STATE.asks.items()):
            o = call["msg"].obj
            if id_key(o["id"]) == id_key(rid) and (o.get("sessionId") == sid or broken("cancel-by-id-only")):
                del STATE.asks[ask_id]
        return None
    if broken("answer-notifications") and method.startswith("sb/"):
        return '{"jsonrpc":"2.0","id":null,"error":{"code":-32601,"message":"Method not found"}}'
    return None


def response(msg: Msg):
    if msg.raw.get("id") in STATE.roots_asked:
        STATE.roots_asked.discard(msg.raw["id"])
        log(f"roots: {tok(msg.obj.get('result'))}")
        return None
    call = STATE.asks.get(msg.raw.get("id"))
    if call is None:
        log(f"response to no request of ours: {msg.raw.get('id')}")
        return None
    if "error" in msg.obj and broken("ignore-client-error"):
        return None
    del STATE.asks[msg.raw["id"]]
    if STATE.deferred and not STATE.asks:
        lines, STATE.deferred = STATE.deferred, []
        for line in lines:
            at(0, lambda line=line: handle_line(line))
    res = msg.obj.get("result")
    if "error" in msg.obj:
        err = msg.obj["error"]
        text = f"sampling failed: {err.get('message') if isinstance(err, dict) else err}"
        return result(call["msg"], text_result(text, is_error=True))
    content = res.get("content") if isinstance(res, dict) else None
    text = content.get("text") if isinstance(content, dict) else None
    return result(call["msg"], text_result(text if isinstance(text, str) else tok(res)))


def message(obj, raw: dict, in_batch=False):
    """The answer line of one message (str), or None."""
    bogus = Msg({}, {})
    if not isinstance(obj, dict):
        return error(bogus, -32600, "not an object")
    msg = Msg(obj, raw)
    foreign = [k for k in obj if k not in ENVELOPE]
    if foreign and "strict-members" in STATE.strict and ("method" in obj or "result" in obj or "error" in obj):
        log(f"member {foreign[0]!r} is not JSON-RPC: message dropped")
        return None
    if "method" in obj:
        if obj.get("jsonrpc") != "2.0":
            return error(msg, -32600, 'jsonrpc must be "2.0"')
        if not isinstance(obj["method"], str):
            return error(msg, -32600, "method must be a string")
        if "id" in obj and not is_id(obj["id"]):
            return error(msg, -32600, "id must be a string, a number or null")
        if "id" in obj and obj["id"] is None and "mcp-messages" in STATE.strict:
            return error(msg, -32600, "an MCP request id is never null")
        if "params" in obj and not isinstance(obj["params"], (dict, list)):
            return error(msg, -32602 if broken("params-32602") else -32600, "params must be an object or an array")
        if "id" not in obj:
            return notification(msg)
        if broken("no-string-ids") and isinstance(obj["id"], str):
            log("a string id: request dropped")
            return None
        if in_batch and obj["method"] == "tools/call":
            return error(msg, -32603, "tools/call in a batch is not supported by this fake")
        return request(msg)
    if "result" in obj or "error" in obj:
        if broken("answer-responses"):
            return error(msg, -32600, "a response")
        return response(msg)
    return error(msg, -32600, "neither a request nor a response")


def raw_elements(text: str) -> list:
    """Raw text of each element of a JSON array."""
    dec = json.JSONDecoder()
    i = text.index("[") + 1
    out_ = []
    while True:
        while text[i] in " \t\r\n,":
            i += 1
        if text[i] == "]":
            return out_
        _, end = dec.raw_decode(text, i)
        out_.append(text[i:end])
        i = end


def _lone_surrogate(value) -> bool:
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return True
        return False
    if isinstance(value, dict):
        return any(_lone_surrogate(k) or _lone_surrogate(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_lone_surrogate(v) for v in value)
    return False


def _no_constants(name):
    raise ValueError(name)


def parse(body: bytes):
    """The value of a line, or raises ValueError with the reason."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        if not broken("echo-bad-utf8"):
            raise ValueError("not UTF-8") from None
        text = body.decode("utf-8", "surrogateescape")
    if broken("lenient-json"):
        import re
        text = re.sub(r'(?<=[:\[,])0+(\d)', r"\1", text).replace("\t", "\\t")
    value = json.loads(text, parse_constant=_no_constants, strict=True)
    if _lone_surrogate(value) and not (broken("lenient-json") or broken("echo-bad-utf8")):
        raise ValueError("unpaired surrogate")
    return value, text


def handle_line(line: bytes):
    if broken("ask-blocks") and STATE.asks and b'"result"' not in line and b'"error"' not in line:
        STATE.deferred.append(line)
        return
    STATE.lines_seen += 1
    if broken("drop-every-5th") and STATE.lines_seen % 5 == 0:
        return
    if STATE.skip_next:
        STATE.skip_next = False
        return
    body = line[:-1] if line.endswith(b"\n") else line
    if body.endswith(b"\r"):
        body = body[:-1]
    if not body.strip(b" \t\r"):
        if broken("blank-lines-error"):  # one parse error would be SB-J-4's answer: accepted
            out(error(None, -32600, "blank line"))
        return
    try:
        value, text = parse(body)
    except ValueError as exc:
        log(f"parse error: {exc}")
        if broken("die-on-bad-json"):
            sys.exit(1)
        out(error(None, -32700, str(exc) or "not valid JSON"))
        if broken("poisoned"):
            STATE.skip_next = True
        return
    if isinstance(value, list) and value and "mcp-messages" in STATE.strict:
        out(error(None, -32600, "batches are not supported (MCP 2025-06-18)"))
        return
    if isinstance(value, list):
        if not value:
            line = error(None, -32600, "empty batch")
            out("[" + line + "]" if broken("empty-array-as-array") else line)
            return
        if broken("batch-one-error") and not any(isinstance(e, dict) for e in value):
            out(error(None, -32600, "a batch of nothing valid"))
            return
        answers = []
        for elem, raw_text in zip(value, raw_elements(text)):
            raw = raw_members(raw_text.encode("utf-8", "surrogateescape")) if isinstance(elem, dict) else {}
            a = message(elem, raw, in_batch=True)
            if a is not None:
                answers.append(a)
        if broken("batch-per-line"):
            for a in answers:
                out(a)
        elif answers or broken("empty-batch-array"):
            out("[" + ",".join(answers) + "]")
        return
    raw = raw_members(text.encode("utf-8", "surrogateescape")) if isinstance(value, dict) else {}
    answer = message(value, raw)
    if answer is not None:
        out(answer)
        if "chatty" in STATE.strict:
            out('{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}')
        if broken("double-answer") and STATE.requests_seen % 3 == 0 and isinstance(value, dict) and "id" in value:
            out(answer)


# -- the end ----------------------------------------------------------------------------------
def end(why: str):
    """Stop reading; calls waiting for the client get an error; slow calls
    run to their end (the loop exits once none is left)."""
    if STATE.ending is not None:
        return
    STATE.ending = why
    STATE.reading = False
    if broken("ask-hangs-at-end"):
        STATE.asks.clear()
    for ask_id, call in list(STATE.asks.items()):
        del STATE.asks[ask_id]
        reason = "input closed before the client answered" if why == "eof" else "shutting down"
        out(error(call["msg"], -32603, reason))


def main():
    args = sys.argv[1:]
    while args:
        a = args.pop(0)
        if a == "--break":
            name = args.pop(0)
            if name not in BREAKS:
                sys.stderr.write(f"unknown break {name}; known: {', '.join(sorted(BREAKS))}\n")
                sys.exit(2)
            STATE.breaks.add(name)
        elif a in ("--verbose", "-v"):
            STATE.verbose = True
        elif a == "--slow-initialize":
            STATE.slow_initialize = int(args.pop(0)) / 1000
        elif a in STRICT:
            STATE.strict.add(a[2:])
        else:
            sys.stderr.write(f"unknown argument {a}\n")
            sys.exit(2)
    rfd, wfd = os.pipe()
    os.set_blocking(wfd, False)
    signal.set_wakeup_fd(wfd)
    got = []
    signal.signal(signal.SIGTERM, lambda s, f: got.append(s) if not broken("ignore-term") else None)
    if broken("die-on-term"):
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, lambda s, f: got.append(s))
    if broken("banner"):
        out('{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"hello"}}')
    buf = b""
    while True:
        if got:
            got.clear()
            if broken("term-exit-1"):
                os._exit(1)
            if broken("print-on-term"):
                os.write(1, b"Shutting down...\n")
            if broken("term-drops") or STATE.ending == "stay":
                os._exit(0)
            end("signal")
        if STATE.ending in ("eof", "signal") and not STATE.slow:
            if STATE.ending == "eof" and broken("eof-stay"):
                STATE.ending = "stay"
            else:
                break
        timeout = max(0.0, STATE.timers[0][0] - time.monotonic()) if STATE.timers else None
        if STATE.held:  # "interleave": nothing more to mix it with now
            timeout = 0.001 if timeout is None else min(timeout, 0.001)
            ready, _, _ = select.select([0] if STATE.reading else [], [], [], 0.001)
            if not ready:
                flush_held()
        fds = [rfd] + ([0] if STATE.reading else [])
        ready, _, _ = select.select(fds, [], [], timeout)
        if rfd in ready:
            os.read(rfd, 512)
        if 0 in ready and STATE.reading:
            data = os.read(0, 65536)
            if not data:
                STATE.reading = False
                if buf and not broken("eof-drops"):
                    handle_line(buf)
                buf = b""
                if broken("eof-drops"):
                    os._exit(0)
                end("eof")
            elif broken("no-reassembly"):
                for piece in data.split(b"\n"):
                    if piece:
                        handle_line(piece + b"\n")
            else:
                buf += data
                if broken("die-on-long-line") and len(buf) > 1024 * 1024 and b"\n" not in buf:
                    os._exit(3)
                while b"\n" in buf:
                    line, buf = buf.split(b"\n", 1)
                    if broken("eof-drops"):
                        at(0.05, lambda line=line: handle_line(line + b"\n"))
                    else:
                        handle_line(line + b"\n")
        run_timers()
    flush_held()
    if broken("no-final-newline"):
        write(b'{"jsonrpc":"2.0","method":"notifications/message","params":{"data":"bye"}}')
    os._exit(0)


if __name__ == "__main__":
    main()
