"""JSON as a worker writes it: strict parsing, raw tokens, message shapes.

The worker-side clauses judge bytes, not values: an id must come back as the
exact token sent (SB-R-1), a line must be UTF-8 (SB-T-2) and one JSON object
(SB-W-2). So a line is looked at three ways, independently, and each test
judges only the view its clause is about:

* ``syntax(line)``: the JSON value of the line, or why it is not JSON. Bytes
  that are not UTF-8 are carried through (surrogateescape), so a line with a
  bad byte inside a string is still JSON here and fails only SB-T-2.
* ``is_utf8(line)``.
* ``members(line)``: the raw bytes of each top-level member of an object.

``id_key`` gives ids and request ids a comparable value: numbers compare as
numbers (``1.0`` names ``1``), strings as strings, so a test can find the
answer to a request even when the worker mangled its id, and then judge the
token itself.
"""

from __future__ import annotations

import json
from decimal import Decimal, InvalidOperation

_WS = b" \t\r\n"


class NotJson(ValueError):
    """The line is not one JSON value."""


def _constant(name):
    raise ValueError(f"{name} is not JSON")


def syntax(line: bytes):
    """The JSON value of one line (its trailing newline and JSON whitespace
    allowed around it). Raises NotJson. NaN/Infinity are rejected; invalid
    UTF-8 is not this function's business (see is_utf8)."""
    text = line.decode("utf-8", "surrogateescape")
    if not text.strip(" \t\r\n"):
        raise NotJson("blank line")
    try:
        return json.loads(text, parse_constant=_constant)
    except ValueError as exc:
        raise NotJson(str(exc)) from None


def parse(line: bytes):
    """The JSON value, or None when the line is not JSON."""
    try:
        return syntax(line)
    except NotJson:
        return None


def is_utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8", "strict")
    except UnicodeDecodeError:
        return False
    return True


# -- raw tokens -------------------------------------------------------------------
def _skip_ws(b: bytes, i: int) -> int:
    while i < len(b) and b[i] in _WS:
        i += 1
    return i


def _end_of_string(b: bytes, i: int) -> int:
    """b[i] is a quote: the index just past the closing quote."""
    i += 1
    while i < len(b):
        c = b[i]
        if c == 0x5C:  # backslash: skip the escaped character
            i += 2
            continue
        if c == 0x22:
            return i + 1
        i += 1
    raise NotJson("unterminated string")


def _end_of_value(b: bytes, i: int) -> int:
    if i >= len(b):
        raise NotJson("missing value")
    c = b[i]
    if c == 0x22:
        return _end_of_string(b, i)
    if c in b"{[":
        depth = 0
        while i < len(b):
            c = b[i]
            if c == 0x22:
                i = _end_of_string(b, i)
                continue
            if c in b"{[":
                depth += 1
            elif c in b"}]":
                depth -= 1
                if depth == 0:
                    return i + 1
            i += 1
        raise NotJson("unterminated structure")
    j = i
    while j < len(b) and b[j] not in b",}] \t\r\n":
        j += 1
    if j == i:
        raise NotJson("missing value")
    return j


def members(line: bytes) -> dict[str, bytes] | None:
    """Raw token of each top-level member of a JSON object line, by decoded
    key (the last one wins, like most parsers); None when the line is not a
    JSON object."""
    if not isinstance(parse(line), dict):
        return None
    b = bytes(line)
    out: dict[str, bytes] = {}
    i = _skip_ws(b, 0) + 1  # past "{"
    while True:
        i = _skip_ws(b, i)
        if b[i] == 0x7D:  # "}"
            return out
        end = _end_of_string(b, i)
        key = json.loads(b[i:end].decode("utf-8", "surrogateescape"))
        i = _skip_ws(b, end) + 1  # past ":"
        i = _skip_ws(b, i)
        vend = _end_of_value(b, i)
        out[key] = b[i:vend]
        i = _skip_ws(b, vend)
        if b[i] == 0x2C:  # ","
            i += 1


def raw(line: bytes, key: str) -> bytes | None:
    """Raw token of one top-level member, or None."""
    m = members(line)
    return None if m is None else m.get(key)


# -- comparable ids ---------------------------------------------------------------
def key_of(value):
    """A hashable key for an id value: numbers by numeric value, strings as
    strings, null as null; None for anything that cannot be an id."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float, Decimal)):
        try:
            return ("n", Decimal(str(value)).normalize())
        except InvalidOperation:
            return None
    if isinstance(value, str):
        return ("s", value)
    if value is None:
        return ("null",)
    return None


def id_key(token: bytes | str):
    """key_of the value a raw id token denotes (exact for big numbers)."""
    if isinstance(token, str):
        token = token.encode()
    try:
        value = json.loads(token.decode("utf-8", "surrogateescape"),
                           parse_float=Decimal, parse_int=Decimal, parse_constant=_constant)
    except ValueError:
        return None
    return key_of(value)


def token(value) -> bytes:
    """A compact JSON token for a Python value (non-ASCII kept as UTF-8)."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


# -- message shapes (the words of WORKER_SPEC.md) -----------------------------------
def kind(obj) -> str:
    """'request', 'notification', 'response', 'batch' or 'other'."""
    if isinstance(obj, list):
        return "batch"
    if not isinstance(obj, dict):
        return "other"
    if "method" in obj:
        return "request" if "id" in obj else "notification"
    if "result" in obj or "error" in obj:
        return "response"
    return "other"


def error_code(obj):
    """The error code of an error response, or None."""
    if isinstance(obj, dict) and isinstance(obj.get("error"), dict):
        return obj["error"].get("code")
    return None


def looks_like_a_message(line: bytes) -> bool:
    """A line that is not JSON but is a piece of a message (cut, or two
    messages' bytes mixed): it starts like a JSON structure or carries a
    member of the JSON-RPC envelope."""
    body = line.lstrip(b" \t")
    return body[:1] in (b"{", b"[") or b'"jsonrpc"' in line or b'"id":' in line
