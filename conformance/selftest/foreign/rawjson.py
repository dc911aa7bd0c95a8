"""Reading one NDJSON line: strict JSON validation plus the raw token of the
top-level "id" member.

Validation is the json module's (C accelerated), made strict: NaN/Infinity
are refused, the text must be UTF-8 (fbus rejects invalid UTF-8 as not JSON,
which SB-I-36 allows). Routing fields come from the top level only, member
names after unescaping; when a name occurs twice the LAST occurrence wins
(the json module's own rule: a choice SB-I-19 leaves open)."""

import json
import re

_WS = re.compile(rb"[ \t\r\n]*")
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.S)
_TOKEN = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]', re.S)
_SCALAR = re.compile(rb"[^ \t\r\n,\]}]+")


class Number:
    """Placeholder for a JSON number: routing never needs its value."""
    __slots__ = ()


_NUMBER = Number()


def _number(_text):
    return _NUMBER


def _constant(name):
    raise ValueError(f"{name} is not JSON")


class BadLine(Exception):
    """kind: 'syntax' (not JSON), 'shape' (not an object), 'field' (a routing
    field of an unusable type)."""

    def __init__(self, kind, why):
        super().__init__(why)
        self.kind = kind


class Message:
    __slots__ = ("obj", "rid", "sid", "has_result")

    def __init__(self, obj, rid, sid):
        self.obj = obj
        self.rid = rid            # raw bytes of the id token, or None
        self.sid = sid            # decoded sessionId string, or None
        self.has_result = "result" in obj or "error" in obj


def blank(line: bytes) -> bool:
    return not line.strip(b" \t\r\n")


def parse(line: bytes) -> Message:
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadLine("syntax", f"not UTF-8 at byte {exc.start}") from None
    try:
        obj = json.loads(text, parse_int=_number, parse_float=_number, parse_constant=_constant)
    except (ValueError, RecursionError) as exc:
        raise BadLine("syntax", str(exc).split(":")[0]) from None
    if not isinstance(obj, dict):
        raise BadLine("shape", f"a JSON {type(obj).__name__ if not isinstance(obj, Number) else 'number'}, not an object")
    sid = obj.get("sessionId")
    if "sessionId" in obj and not isinstance(sid, str):
        raise BadLine("field", "sessionId is not a string")
    rid = None
    if "id" in obj:
        if isinstance(obj["id"], (dict, list, bool)):
            raise BadLine("field", "id is neither a string, a number nor null")
        rid = id_token(line)
    return Message(obj, rid, sid)


def _skip(data: bytes, pos: int) -> int:
    """End of the JSON value that starts at pos (the data is known valid)."""
    c = data[pos:pos + 1]
    if c == b'"':
        return _STRING.match(data, pos).end()
    if c in (b"{", b"["):
        depth = 0
        for m in _TOKEN.finditer(data, pos):
            t = m.group()
            if t in (b"{", b"["):
                depth += 1
            elif t in (b"}", b"]"):
                depth -= 1
                if depth == 0:
                    return m.end()
        raise ValueError("unbalanced")
    return _SCALAR.match(data, pos).end()


def id_token(data: bytes) -> bytes | None:
    """Raw bytes of the value of the last top-level member named "id"."""
    pos = _WS.match(data, 0).end() + 1  # past "{"
    found = None
    while True:
        pos = _WS.match(data, pos).end()
        if data[pos:pos + 1] == b"}":
            return found
        end = _STRING.match(data, pos).end()
        key = data[pos:end]
        pos = _WS.match(data, end).end() + 1  # past ":"
        pos = _WS.match(data, pos).end()
        vend = _skip(data, pos)
        if key == b'"id"' or (b"\\" in key and json.loads(key) == "id"):
            found = data[pos:vend]
        pos = _WS.match(data, vend).end()
        if data[pos:pos + 1] == b",":
            pos += 1
        else:
            return found
