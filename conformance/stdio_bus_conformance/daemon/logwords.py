"""Reading a daemon's log without holding it to our words (issue 37 item 2).

The seed asks for a warning or an error on some events ("log a warning and
discard", "log an error with connection context", "with Worker context") and
gives no words, no format and no identifiers. So a check ties a line to its
event in two ways that need none:

* by cause: a line written after a mark, before a sync that follows the
  event, whose shape (the line with its numbers and quoted strings masked)
  no line of a control sync had: what the event made the daemon say, in
  whatever words (`caused`);
* by context: the identifiers the daemon itself uses for a worker or a
  connection in its other lines, learned from the lines that name it by
  what the harness knows (its pid, its pool): a daemon that writes
  `[conn=1] spawned worker 0 (pid 4242)` and later `[conn=1] line too long`
  named the worker in its own terms (`aliases`).
"""

from __future__ import annotations

import re

# keys a daemon uses for an identifier of a worker or a connection in its lines
# (`conn=1`, `[worker 3]`, `fd:7`, `client#2`, `slot=0`...); words for amounts
# (status, bytes, limit, restarts...) are not identifiers and are never learned
_ID_KEYS = (r"conn(?:ection)?|client|peer|fd|worker|wid|w|slot|idx|index|inst(?:ance)?|child|"
            r"proc(?:ess)?|handle|pipe|sock(?:et)?|stream|chan(?:nel)?|endpoint|ep|link")
_ID_TOKEN = re.compile(r"(?i)(?<![\w.-])(%s)(?:[ _-]?(?:id|no|num|number))?\s*[=:#]\s*#?(\d+)\b" % _ID_KEYS)
_BRACKETED = re.compile(r"(?i)\[(%s)\s*#?(\d+)\]" % _ID_KEYS)

_QUOTED = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'')
_NUMBER = re.compile(r"\d+")  # every run of digits: times, pids, ids, counts


def _relayed(line: str) -> bool:
    """A worker's own stderr that the daemon relays (the mock's lines start
    with `mock_worker[`): not the daemon's log."""
    return "mock_worker[" in line


def aliases(lines, named) -> list[re.Pattern]:
    """The identifiers the daemon gives, in `lines`, to what `named` (a
    callable: does this line name it by what the harness knows?) names: each
    `key=N` (or `key: N`, `key#N`, `[key N]`) token of an identifier key in
    a line that names it, as a pattern matching that token in any of these
    spellings."""
    found = set()
    for line in lines:
        if _relayed(line) or not named(line):
            continue
        for rx in (_ID_TOKEN, _BRACKETED):
            for m in rx.finditer(line):
                found.add((m.group(1).lower(), int(m.group(2))))
    return [re.compile(r"(?i)(?<![\w.-])%s(?:[ _-]?(?:id|no|num|number))?\s*[=:#\s]\s*#?%d\b" % (re.escape(k), n))
            for k, n in sorted(found)]


def shape(line: str) -> str:
    """The line with what varies between two lines of the same kind masked:
    quoted strings, numbers (times, pids, ids, counts), and whitespace runs."""
    line = _QUOTED.sub("#", line)   # a string id and a number id are one kind of token
    line = _NUMBER.sub("#", line)
    return " ".join(line.split())


def caused(lines, control) -> list[str]:
    """The daemon's own lines among `lines` (written after a mark, up to a
    sync after the event) of a shape no line of `control` (what the same
    sync alone made it write) had: the lines the event caused."""
    seen = {shape(line) for line in control if not _relayed(line)}
    return [line for line in lines if not _relayed(line) and shape(line) not in seen]
