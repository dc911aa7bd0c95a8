"""Raw JSON tokens for the self-test fakes: the top-level members of an
object line as the exact text of each value, so ids like 1, 1.0, 1e0 and
"1" stay distinct, as a conforming daemon and the mock worker keep them."""

import json
import re

_WS = re.compile(r"[ \t\n\r]*")
_DECODER = json.JSONDecoder()


def loads(line: bytes):
    """json.loads of a line whose strings may hold bytes that are not UTF-8
    (SB-I-36: they pass unchanged, so the fakes keep them as surrogates)."""
    return json.loads(line.decode("utf-8", "surrogateescape"))


def raw_members(line: bytes) -> dict:
    """{name (unescaped): raw value text} of the top-level object in line;
    the first occurrence of a name wins. Raises ValueError on bad JSON."""
    text = line.decode("utf-8", "surrogateescape")
    i = _WS.match(text, 0).end()
    if text[i:i + 1] != "{":
        raise ValueError("not an object")
    i += 1
    out = {}
    while True:
        i = _WS.match(text, i).end()
        if text[i:i + 1] == "}":
            return out
        if text[i:i + 1] != '"':
            raise ValueError("member name expected")
        name, i = json.decoder.scanstring(text, i + 1)
        i = _WS.match(text, i).end()
        if text[i:i + 1] != ":":
            raise ValueError("':' expected")
        i = _WS.match(text, i + 1).end()
        _, end = _DECODER.raw_decode(text, i)
        out.setdefault(name, text[i:end])
        i = _WS.match(text, end).end()
        if text[i:i + 1] == ",":
            i += 1
