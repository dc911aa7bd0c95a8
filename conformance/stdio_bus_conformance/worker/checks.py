"""Judgements the worker-side tests share: what a line, a response or an
error must look like, with messages that show the offending bytes."""

from __future__ import annotations

from . import rawjson as wj
from .process import Line, WorkerError

RESERVED = range(-32768, -31999)           # -32768 .. -32000
DEFINED = (-32700, -32600, -32601, -32602, -32603)
SERVER_ERRORS = range(-32099, -31999)      # -32099 .. -32000


def show(lines, limit: int = 5) -> str:
    """A few lines, as bytes, for a failure message."""
    lines = list(lines)
    shown = ", ".join(repr(getattr(x, "data", x)[:200]) for x in lines[:limit])
    return shown + (f" (+{len(lines) - limit} more)" if len(lines) > limit else "")


def complete(lines) -> list[Line]:
    return [line for line in lines if line.complete]


def answers(lines) -> list[Line]:
    """The lines that answer something: responses and arrays. Notifications
    and requests a worker writes on its own (MCP: at any time) are not
    answers (WORKER_SPEC.md, Profiles)."""
    return [line for line in lines if line.kind in ("response", "batch") or line.obj is None
            or wj.kind(line.obj) == "other"]


def messages(lines):
    """(line, object) of every line that is JSON, batch elements flattened."""
    for line in lines:
        obj = line.obj
        if isinstance(obj, list):
            for element in obj:
                yield line, element
        elif obj is not None:
            yield line, obj


def responses(lines):
    """(line, response object) of every response, batch elements included."""
    for line, obj in messages(lines):
        if wj.kind(obj) == "response":
            yield line, obj


def error_response(line: Line, code: int, what: str) -> dict:
    """The line must be one error response of this code; returns it."""
    obj = line.obj
    if not isinstance(obj, dict) or wj.kind(obj) != "response":
        raise AssertionError(f"{what}: expected an error response of code {code}, got {line.data[:300]!r}")
    got = wj.error_code(obj)
    assert got == code, f"{what}: expected error code {code}, got {got!r}: {line.data[:300]!r}"
    return obj


def one_error(before: list[Line], code: int, what: str, id_ok=None) -> dict:
    """Exactly one answer among the lines, an error response of this code;
    id_ok(obj): whether its id is right (None: not judged)."""
    before = answers(before)
    assert len(before) == 1, (f"{what}: expected one error response of code {code}, "
                              f"the worker answered {len(before)} times: {show(before)}")
    obj = error_response(before[0], code, what)
    if id_ok is not None:
        assert id_ok(obj), f"{what}: the error's id must be null, got {before[0].data[:300]!r}"
    return obj


def reserved_code_problem(code) -> str | None:
    """Why an error code breaks SB-J-11, or None."""
    if isinstance(code, int) and not isinstance(code, bool) and code in RESERVED \
            and code not in DEFINED and code not in SERVER_ERRORS:
        return f"code {code} is reserved by JSON-RPC 2.0"
    return None


def error_shape_problem(err) -> str | None:
    """Why an `error` member breaks SB-J-3, or None."""
    if not isinstance(err, dict):
        return "error is not an object"
    code = err.get("code")
    if not isinstance(code, int) or isinstance(code, bool):
        return f"error.code {code!r} is not an integer"
    if not isinstance(err.get("message"), str):
        return f"error.message {err.get('message')!r} is not a string"
    extra = set(err) - {"code", "message", "data"}
    if extra:
        return f"error has members beside code, message and data: {sorted(extra)}"
    return None


def same_session(answer: Line, sent: bytes | None) -> str | None:
    """Why an answer's sessionId is not the raw token sent (None: it is)."""
    got = answer.raw("sessionId")
    if got != sent:
        return f"sessionId {got!r}, sent {sent!r}: {answer.data[:300]!r}"
    return None


def require(cond: bool, message: str) -> None:
    """Like assert, but a WorkerError: for preconditions the worker failed
    (the test cannot go on), as opposed to the clause it judges."""
    if not cond:
        raise WorkerError(message)
