"""Kinds of input a worker may die on, or stop answering after, and the test
that names each as a root cause (WORKER_SPEC.md, "Preflight and root causes").

    kind_of(b"{bad\\n", mcp_only=True)   # "not-json"
    POISONS["not-json"]                   # (clause, test that names it, a line to probe with)

The preflight (worker/preflight.py) writes each probe line, then a request;
a worker that ends, or leaves that request unanswered, is poisoned by that
kind of input. The test that sends that kind of input to judge it names the
cause once, judging each of its cases on its own and restarting the worker
after each one that kills it; any other test that would write such a line is
blocked by it (WorkerRun.before_send), and the workload leaves such lines out.
"""

from __future__ import annotations

from . import rawjson as wj

# kind -> (clause, the test that names it, the line the preflight probes with)
POISONS = {
    "blank": ("SB-F-13", "test_blank_lines_are_ignored", b"\n"),
    "not-json": ("SB-J-4", "test_a_line_that_is_not_json_gets_one_parse_error_with_id_null", b"{bad\n"),
    # bytes that are not UTF-8 cannot be JSON text (RFC 8259 8.1): a parse error the stream survives
    "not-utf8": ("SB-J-5", "test_the_stream_goes_on_after_parse_errors",
                 b'{"jsonrpc":"2.0","id":"\xff","method":"ping"}\n'),
    "invalid": ("SB-J-6", "test_invalid_requests_get_invalid_request_and_the_stream_goes_on",
                b'{"jsonrpc":"2.0","id":"sb-probe-invalid","method":5}\n'),
    "empty-array": ("SB-J-14", "test_an_empty_array_gets_one_invalid_request_error", b"[]\n"),
    "response": ("SB-R-10", "test_responses_get_no_answer",
                 b'{"jsonrpc":"2.0","id":"sb-probe-nobody","result":{}}\n'),
}


# without batches (MCP from 2025-06-18), `[]` is one more invalid request: SB-J-6's case
EMPTY_ARRAY_WITHOUT_BATCHES = POISONS["invalid"][:2]


def namer(kind: str, batches: bool) -> tuple[str, str]:
    """(clause, test) that names a worker dying on this kind of input."""
    if kind == "empty-array" and not batches:
        return EMPTY_ARRAY_WITHOUT_BATCHES
    return POISONS[kind][:2]


def _valid_id(value, mcp_only: bool) -> bool:
    if isinstance(value, bool):
        return False
    if value is None:
        return not mcp_only  # MCP: never null
    return isinstance(value, (str, int, float))


def kind_of(line: bytes, mcp_only: bool) -> str:
    """The kind of one input line: "blank", "not-utf8", "not-json", "empty-array",
    "batch", "invalid", "response", "request", "notification". mcp_only: the
    worker is judged as an MCP server only (ids never null, params an
    object)."""
    if not line.strip():
        return "blank"
    if not wj.is_utf8(line):
        return "not-utf8"
    obj = wj.parse(line)
    if obj is None:
        return "not-json"
    if isinstance(obj, list):
        return "empty-array" if not obj else "batch"
    if not isinstance(obj, dict) or obj.get("jsonrpc") != "2.0":
        return "invalid"
    if "method" in obj:
        if not isinstance(obj["method"], str):
            return "invalid"
        params = obj.get("params", {})
        if not isinstance(params, dict) and not (isinstance(params, list) and not mcp_only):
            return "invalid"
        if "id" in obj and not _valid_id(obj["id"], mcp_only):
            return "invalid"
        return "request" if "id" in obj else "notification"
    if "result" in obj or "error" in obj:
        return "response" if "id" in obj and _valid_id(obj["id"], False) else "invalid"
    return "invalid"


def kinds_in(data: bytes, mcp_only: bool) -> set[str]:
    """The kinds of the complete lines in data."""
    return {kind_of(line + b"\n", mcp_only) for line in data.split(b"\n")[:-1]}
