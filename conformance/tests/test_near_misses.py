"""Lines one byte away from the shape a daemon may take a shortcut on
(issue 34 item 3). A daemon may recognise the common start of a JSON-RPC
line, `{"jsonrpc":"2.0","id":`, by comparing bytes instead of parsing them;
a line that differs from it in one byte, or stops inside it, must then be
judged like any other line: closed when it is not JSON (4.3), forwarded when
it is (4.2.2: no JSON-RPC validation beyond the routing fields). Every
reading agrees on each case: the replacements below make the line either
plainly not JSON (an unbalanced quote, a stray `+` where a token must be,
a line cut short) or JSON with other member names and values; no byte over
0x7f and no control byte, whose handling readings may differ on.
"""

import json

import pytest

from stdio_bus_conformance import NeverComes, check, pid_of

PREFIX = b'{"jsonrpc":"2.0","id":'
STRUCTURAL = set(b'{}":,')


def one_byte_off():
    """(case id, line, is JSON) for each position of PREFIX, the byte there
    replaced: a structural byte by '+', a letter or digit by 'X'."""
    out = []
    for i, b in enumerate(PREFIX):
        head = PREFIX[:i] + (b"+" if b in STRUCTURAL else b"X") + PREFIX[i + 1:]
        line = head + b'"near-%d","method":"near/miss","params":{"at":%d}}\n' % (i, i)
        try:
            valid = isinstance(json.loads(line), dict)
        except ValueError:
            valid = False
        out.append((f"byte{i}", line, valid))
    return out


def cut_short():
    """A line that stops inside PREFIX, at every length but 0 (a blank line)."""
    return [(f"cut{k}", PREFIX[:k] + b"\n", False) for k in range(1, len(PREFIX) + 1)]


@pytest.mark.modes("unix")
@pytest.mark.stands_on("malformed")
@pytest.mark.clause("SB-4.3-1", "SB-4.3-3")
def test_a_line_one_byte_off_the_common_prefix_is_judged_like_any_other(bus):
    bus.start(instances=1)
    log = bus.worker_log()
    for case, line, valid in one_byte_off() + cut_short():
        c = bus.client()
        if valid:  # JSON with other names: forwarded as it is, the client kept
            c.send(line)
            got = log.wait_received(line.split(b'"params"')[0][-30:])
            check("SB-4.3-3", got.line == line, f"{case}: the worker got {got.line!r} for {line!r}")
            c.sync()
        else:  # not JSON: the client is closed, nothing of it forwarded
            c.expect_closed_on(line, bound=forwarded_as_is(log, line, case))
        c.close()


def forwarded_as_is(log, line: bytes, case: str):
    """Ends the wait for the close once a worker received exactly `line`:
    the daemon took it for JSON (evidence.py's rule: it will not close)."""
    raw = line.rstrip(b"\n")

    def bound():
        for r in log.records():
            if r.kind == "in" and r.raw == raw:
                raise NeverComes(f"{case}: the daemon forwarded {line!r}, which is not JSON")
    return bound


@pytest.mark.modes("unix")
@pytest.mark.clause("SB-6.1.3-1", "SB-6.1.3-2")
def test_a_key_one_byte_off_sessionid_makes_no_session(bus):
    # A member whose name differs from "sessionId" in one byte is not a
    # sessionId: two such requests in a row from one client, with nothing
    # else in between, go round-robin to the two workers, as any message
    # without a session does (6.1.3), never both to one (a session made of it)
    bus.start(instances=2)
    c = bus.client()
    key = b"sessionId"
    for i in range(len(key)):
        name = key[:i] + (b"X" if key[i:i + 1] != b"X" else b"Y") + key[i + 1:]
        pids = []
        for k in range(2):
            req = f"nk-{i}-{k}"
            c.send(b'{"jsonrpc":"2.0","id":"%s","method":"near/key","%s":"near-s"}\n' % (req.encode(), name))
            pids.append(pid_of(c.recv_response(req)))
        assert pids[0] != pids[1], \
            f"two requests with a member {name.decode()!r} (not sessionId) both went to worker {pids[0]}"


def one_char_apart(longest: int):
    """(first, second) sessionId pairs, each pair new: for every length from
    1 to `longest` characters and every position, two strings of lowercase
    letters that differ only there (the second has 'Z' there, which no first
    string holds). Their raw tokens are 2 bytes longer (the quotes): the
    lengths where a daemon may switch between ways of comparing keys (8, 16,
    17 bytes...) are all among them."""
    pairs, used, count = [], set(), 0
    for n in range(1, longest + 1):
        for i in range(n):
            while True:
                count += 1
                digits, k = [], count
                for _ in range(n):
                    digits.append(chr(ord("a") + k % 26))
                    k //= 26
                first = "".join(digits)
                second = first[:i] + "Z" + first[i + 1:]
                if first not in used and second not in used:
                    break
            used.update((first, second))
            pairs.append((first, second))
    return pairs


@pytest.mark.modes("unix")
@pytest.mark.clause("SB-3.4-1", "SB-6.1.1-1")
def test_sessionids_one_byte_apart_are_two_sessions_at_every_length_and_position(bus):
    # Two new sessions in a row go to the two workers by round robin (6.1.1);
    # one taken for the other (a key compared on fewer bytes than it has) goes
    # to the first one's worker instead
    bus.start(instances=2)
    c = bus.client()
    # what this test stands on, judged on its own clause: two new sessions far apart
    a, b = pid_of(c.request(session="control-first")), pid_of(c.request(session="control-second"))
    check("SB-6.1.1-1", a != b, f"two new sessions in a row both went to worker {a} (round robin, 6.1.1)")
    for first, second in one_char_apart(17):
        a = pid_of(c.request(session=first))
        b = pid_of(c.request(session=second))
        check("SB-3.4-1", a != b, f"the new session {second!r} went to the worker of {first!r}, one byte "
                                  f"apart (raw length {len(first) + 2}): taken for the same session")
