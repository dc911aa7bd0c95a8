"""fbus logs one JSON object per line on stderr, never on stdout:

    {"fbus":"warning","t":12.345,"msg":"...","worker":3,"pid":4242}

"fbus" holds the level: debug, info, warning, error (debug only with
--verbose). "t" is seconds since start (monotonic). Context members follow
the message. The words WARNING and ERROR are present as SB-I-34 asks."""

import json
import os
import time

_T0 = time.monotonic()
VERBOSE = False


def _emit(level, msg, ctx):
    rec = {"fbus": level, "t": round(time.monotonic() - _T0, 3), "msg": msg}
    rec.update(ctx)
    data = (json.dumps(rec, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8", "replace")
    view = memoryview(data)
    while view:
        try:
            n = os.write(2, view)
        except BlockingIOError:
            import select
            select.select([], [2], [], 1.0)
            continue
        except OSError:
            return  # nobody listens: logs are best effort
        view = view[n:]


def debug(msg, **ctx):
    if VERBOSE:
        _emit("debug", msg, ctx)


def info(msg, **ctx):
    _emit("info", msg, ctx)


def warning(msg, **ctx):
    _emit("warning", msg, ctx)


def error(msg, **ctx):
    _emit("error", msg, ctx)


def raw(data: bytes):
    """For the stderr flood defect: bytes as they are."""
    try:
        os.write(2, data)
    except OSError:
        pass
