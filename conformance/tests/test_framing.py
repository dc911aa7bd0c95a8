"""Framing and pass-through (spec 4.2, 4.3, 5.1.1, Appendix C): what goes in
comes out byte for byte, malformed input closes the client that sent it and
nothing else, and stdout carries nothing but forwarded messages."""

import json
import re

import pytest

from stdio_bus_conformance import check, checking, field, pid_of, wait_timeout

# Valid JSON that a re-serialising daemon would change: spacing, member order,
# escapes, raw UTF-8 next to \u escapes, a number spelled with an exponent.
ODD = (b'{ "method" :"framing/odd" ,\t"jsonrpc":"2.0", "id" : 7,'
       b'  "params":{"s":"caf\xc3\xa9 \\u00e9 \\/ \xf0\x9f\x9a\x8c","n":1.50E+2 ,"a":[ 1,2 , {} ]}}\n')


@pytest.mark.clause("SB-5.1.1-3", "SB-5.1.1-2", "SB-3.5-4")
def test_client_line_reaches_worker_byte_for_byte(bus):
    bus.start(instances=1)
    c = bus.client()
    c.send(ODD)
    c.recv_response(7)
    rec = bus.worker_log().wait_received(b'"framing/odd"')
    assert rec.line == ODD


@pytest.mark.clause("SB-4.2.3-3", "SB-4.2.3-1", "SB-4.2.3-2")
def test_worker_line_reaches_client_byte_for_byte(bus):
    bus.start(instances=1)
    c = bus.client()
    odd = '{"result" : {"x":"caf\u00e9 \\u00e9","y":[1 ,2]},"id" :8 ,  "jsonrpc":"2.0"}\n'
    c.send_json({"jsonrpc": "2.0", "id": 8, "method": "emit", "params": {"mock": {"emit": odd}}})
    assert c.recv_line() == odd.encode()
    assert c.sync() == []


# Longer than a pipe's or socket's first write often takes, and than a
# daemon's small-line path: its newline must still follow it at once.
LONG_PAD = "x" * 20000


@pytest.mark.clause("SB-5.1.1-2")
def test_every_line_to_a_worker_ends_in_a_newline_long_or_short(bus):
    bus.start(instances=1)
    c = bus.client()
    long = json.dumps({"jsonrpc": "2.0", "id": "long", "method": "echo", "params": {"pad": LONG_PAD}},
                      separators=(",", ":")).encode() + b"\n"
    short = b'{"jsonrpc":"2.0","id":"short","method":"echo"}\n'
    c.send(long + short)
    c.sync()  # one worker: it has read everything sent before
    got = [r.line for r in bus.worker_log().select("in") if b'"long"' in r.raw or b'"short"' in r.raw]
    check("SB-5.1.1-2", got == [long, short],
          lambda: f"the worker read {[x[:60] + b'...' + x[-60:] for x in got]}: not each message on a line of its own")


@pytest.mark.clause("SB-4.2.3-2", "SB-4.2.3-1")
def test_every_line_to_a_client_ends_in_a_newline_long_or_short(bus):
    bus.start(instances=1)
    c = bus.client()
    long = json.dumps({"jsonrpc": "2.0", "id": "long", "result": {"pad": LONG_PAD}},
                      separators=(",", ":")).encode() + b"\n"
    c.send_json({"jsonrpc": "2.0", "id": "long", "method": "emit", "params": {"mock": {"emit": long.decode()}}})
    c.send_json({"jsonrpc": "2.0", "id": "short", "method": "echo"})
    first, second = c.recv_line(), c.recv_line()
    body = long[:-1]
    # the long message whole, then anything but its newline: it was not terminated
    check("SB-4.2.3-2", not first.startswith(body) or first == long,
          lambda: f"no newline after the long message: {first[len(body):][:200]!r} follows it on its line")
    check("SB-4.2.3-1", first == long,
          lambda: f"the long message did not come as one line of its own: {first[:80]!r}...{first[-80:]!r}")
    check("SB-4.2.3-1", field(json.loads(second), "id") == "short",
          lambda: f"the line after the long message is not the next message: {second[:200]!r}")


@pytest.mark.clause("SB-5.1.1-3", "SB-4.2.3-3")
def test_leading_and_trailing_whitespace_passes_through_both_ways(bus):
    # JSON allows whitespace before and after the object: a daemon that trims
    # either end of a line changes the bytes it forwards.
    bus.start(instances=1)
    c = bus.client()
    odd = '  \t {"jsonrpc":"2.0","id":"ws1","result":{"w":"  "}} \t \n'
    sent = (b'   \t  {"jsonrpc":"2.0","id":"ws1","method":"emit",'
            b'"params":{"mock":{"emit":' + json.dumps(odd).encode() + b'}}}  \t\n')
    c.send(sent)
    assert c.recv_line() == odd.encode(), "the worker's line was changed on its way to the client"
    assert bus.worker_log().wait_received(b'"id":"ws1"').line == sent, \
        "the client's line was changed on its way to the worker"
    assert c.sync() == []


@pytest.mark.clause("SB-5.1.1-3", "SB-4.2.3-3", "SB-I-26")
def test_big_payload_passes_through_both_ways(bus):
    bus.start(instances=1)
    c = bus.client()
    blob = "".join(bus.rng.choice("abcdefghij\u00e9\u4e2d") for _ in range(200_000))
    # the worker writes its answer in 8 pieces: the daemon must reassemble it
    line = c.send_json({"jsonrpc": "2.0", "id": 9, "method": "big",
                        "params": {"blob": blob, "mock": {"split": 8, "split_pause_ms": 2}}})
    # a probe to the same (only) worker: what reaches it ahead of the probe is all the
    # daemon wrote of the big line, so a line cut short shows at once, not at a deadline
    c.send_json({"jsonrpc": "2.0", "id": "after-big", "method": "echo"})
    log = bus.worker_log()
    assert log.wait_received(b'"method":"big"').line == line
    got = c.recv_line(timeout=2 * wait_timeout())
    out = log.wait_for(lambda r: r.kind == "out" and r.raw.startswith(b'{"jsonrpc":"2.0","id":9,'))
    assert got == out.line
    assert field(json.loads(got), "result", "params", "blob") == blob


@pytest.mark.clause("SB-I-26", "SB-4.2.3-1")
def test_client_gets_whole_lines_however_workers_write_them(bus):
    bus.start(instances=2)
    c = bus.client()
    homes = {}  # worker pid -> a session on it
    for i in range(8):
        homes.setdefault(pid_of(c.request(session=f"s{i}")), f"s{i}")
    assert len(homes) == 2, f"new sessions did not reach both workers: {homes}"
    first, second = homes.values()
    blob = "y" * 60_000
    # the first worker answers in 8 pieces 100 ms apart, the second 250 ms in, while the
    # first is still half written: on the client's output the two lines must not interleave
    c.send_json({"jsonrpc": "2.0", "id": "big", "method": "big", "sessionId": first,
                 "params": {"blob": blob, "mock": {"split": 8, "split_pause_ms": 100}}})
    c.send_json({"jsonrpc": "2.0", "id": "small", "method": "small", "sessionId": second,
                 "params": {"mock": {"delay_ms": 250}}})
    got = {}
    for _ in range(2):
        line = c.recv_line(timeout=2 * wait_timeout())
        try:
            msg = json.loads(line)
        except ValueError:
            raise AssertionError(f"a line of the client's output is not one whole message: "
                                 f"{line[:60]!r}...{line[-60:]!r}") from None
        got[msg.get("id")] = msg
    assert field(got["big"], "result", "params", "blob") == blob
    assert field(got["small"], "result", "method") == "small"


@pytest.mark.clause("SB-4.3-1")
def test_malformed_json_closes_the_client(bus):
    bus.start(instances=1)
    c = bus.client()
    c.send(b'{"jsonrpc":"2.0","id":1,"method":"half", "params":[\n')
    c.expect_closed()
    assert not any(b'"half"' in line for line in bus.worker_log().received())


@pytest.mark.modes("unix", "tcp")
@pytest.mark.clause("SB-4.3-1", "SB-4.1.2-3")
def test_malformed_json_leaves_other_clients_alone(bus):
    bus.start(instances=1)
    bad, good = bus.client(), bus.client()
    assert field(good.request(session="kept"), "result", "method") == "echo"
    bad.send(b"{not json}\n")
    bad.expect_closed()
    assert field(good.request(session="kept"), "sessionId") == "kept"
    # the worker got the good client's lines and nothing of the bad one
    assert not any(b"not json" in line for line in bus.worker_log().received())


@pytest.mark.stands_on("malformed")  # JSON that is not an object is malformed (SB-I-1)
@pytest.mark.clause("SB-I-1", "SB-4.3-2")
@pytest.mark.parametrize("line", [b'[{"jsonrpc":"2.0","id":1,"method":"batch"}]\n', b"42\n", b'"text"\n'],
                         ids=["array", "number", "string"])
def test_json_that_is_not_an_object_closes_the_client(bus, line):
    bus.start(instances=1)
    c = bus.client()
    c.send(line)
    c.expect_closed()
    assert line not in bus.worker_log().received()


@pytest.mark.modes("stdio")
@pytest.mark.clause("SB-C-1", "SB-4.1.1-1")
def test_stdout_carries_only_forwarded_messages(bus):
    bus.start(instances=1)
    c = bus.client()
    c.request(session="s")
    # make the daemon log: an unroutable worker line and an unknown response id
    c.send_json({"jsonrpc": "2.0", "id": "e1", "method": "emit", "sessionId": "s",
                 "params": {"mock": {"emit": '{"jsonrpc":"2.0","method":"lost"}\n'}}})
    c.send_json({"jsonrpc": "2.0", "id": "e2", "method": "x", "sessionId": "s",
                 "params": {"mock": {"reply_id": "nobody"}}})
    c.sync(session="s")
    log = bus.worker_log()
    log.wait_sent(b'"sb-sync-')  # the worker logged everything it wrote before that
    forwarded = set(log.sent())
    stray = [line for line in c.received if line not in forwarded]
    assert stray == [], "stdout carried lines that no worker wrote"


@pytest.mark.modes("unix", "tcp")
@pytest.mark.stands_on("malformed")
@pytest.mark.clause("SB-C-1")
def test_socket_mode_writes_nothing_to_stdout(bus):
    d = bus.start(instances=1)
    c = bus.client()
    c.request(session="s")
    c.send(b"{broken\n")
    c.expect_closed()
    d.signal(15)
    d.wait_exit()
    assert d.stdout_bytes() == b""


@pytest.mark.clause("SB-4.2.2-1", "SB-4.3-3", "SB-I-24")
def test_no_json_rpc_validation(bus):
    bus.start(instances=1)
    c = bus.client()
    lines = [b'{"id":1,"method":"no/jsonrpc/member"}\n',
             b'{"jsonrpc":"1.0","id":2,"method":"old/version"}\n',
             b'{"jsonrpc":"2.0","id":3,"method":"extra","extra":{"x":[1]},"x-y":true}\n',
             b'{"jsonrpc":"2.0","id":4,"method":"no/such/method/anywhere"}\n']
    for i, line in enumerate(lines, 1):
        c.send(line)
        # the first three are JSON-RPC structure (SB-4.2.2-1), the unknown method its semantics
        with checking("SB-4.3-3" if b"no/such/method" in line else "SB-4.2.2-1"):
            assert field(c.recv_response(i), "id") == i
    # no method, no params: semantics a daemon does not validate either
    methodless = b'{"jsonrpc":"2.0","id":5,"params":{"p":1}}\n'
    c.send(methodless)
    c.send(b'{"method":"bare/notification"}\n')
    c.sync()  # one worker: it has read everything sent before
    check("SB-4.3-3", bus.worker_log().received()[-3:-1] == [methodless, b'{"method":"bare/notification"}\n'],
          lambda: f"a message without method or params did not reach the worker: "
                  f"it read {bus.worker_log().received()[-3:-1]}")


@pytest.mark.clause("SB-5.1.1-1", "SB-I-26")
def test_worker_gets_whole_lines_however_clients_write_them(bus):
    bus.start(instances=1)
    a = bus.client()
    line_a = b'{"jsonrpc":"2.0","id":"a","method":"pieces","params":{"text":"' + b"x" * 3000 + b'"}}\n'
    a.send(line_a[:10])
    if bus.mode != "stdio":  # another client's whole line goes through meanwhile
        bus.client().request(params={"from": "b"})
    for i in range(10, len(line_a), 997):
        a.send(line_a[i:i + 997])
    a.recv_response("a")
    got = bus.worker_log().received()
    assert got[-1] == line_a and all(line.count(b"\n") == 1 and line.startswith(b"{") for line in got)


@pytest.mark.clause("SB-5.1.3-2")
def test_worker_stderr_never_reaches_a_client(bus):
    log = bus.workdir / "p.log"
    # the worker copies every line it reads to its stderr: a request line with
    # an id, a method and a sessionId, which would reach the client if parsed
    script = f'printf "\\377 not json {{\\n" >&2; tee /dev/stderr | exec "$0" --log "{log}"'
    bus.expect_leftovers("the worker's shell pipeline (tee, mock) ends at the end of its input, after the shell")
    bus.start(pools=[{"id": "p", "command": "/bin/sh", "args": ["-c", script, bus.ctx.mock_worker],
                      "instances": 1}])
    bus.worker_log().wait_for(lambda r: r.kind == "start")
    c = bus.client()
    c.request(session="s")
    assert c.sync(session="s") == []
    assert all(b"sb-sync" in line or b'"result"' in line for line in c.received)


@pytest.mark.clause("SB-I-7")
def test_worker_stderr_lines_are_split_only_past_2048_bytes(bus):
    # Both sides of the number, where every reading agrees: 2047 bytes stay one
    # line whether or not "longer than 2048 bytes" counts the newline; 2049 are
    # split whichever way it is counted, no piece holds more than 2048, and
    # nothing is lost: the rest follows in a line of its own.
    whole = "sbI7-whole-" + "W" * (2047 - 11)
    split = "sbI7-split-" + "Z" * (2049 - 11)
    script = 'printf "%s\\n%s\\n%s\\n" "$1" "$2" "$3" >&2; exec "$0"'
    bus.start(pools=[{"id": "p", "command": "/bin/sh",
                      "args": ["-c", script, bus.ctx.mock_worker, whole, split, "sbI7-after"], "instances": 1}])
    d = bus.daemon
    got = d.wait_stderr_line(lambda line: "sbI7-whole-" in line and line, what="with the worker's 2047-byte line")
    check("SB-I-7", whole in got, lambda: f"the 2047-byte line was cut: {len(got)} bytes logged")
    # nor split after its last byte: no piece of it alone in a line of the same shape
    shape = re.compile(re.sub(r"\\d+", r"\\d+", re.escape(got[:got.index("sbI7-whole-")].rstrip())) + r"\s*$")
    d.wait_stderr_line(lambda line: "sbI7-after" in line and line, what="with the worker's third line")
    lines = d.stderr_lines()
    start = next(i for i, line in enumerate(lines) if "sbI7-whole-" in line)
    empty = [line for line in lines[start + 1:] if shape.match(line) and "sbI7" not in line]
    check("SB-I-7", not empty, lambda: f"the 2047-byte line was split after it, an empty piece: {empty[0]!r}")
    first = d.wait_stderr_line(lambda line: "sbI7-split-" in line and line, what="with the worker's 2049-byte line")
    piece = first[first.index("sbI7-split-"):].rstrip("\r\n")
    check("SB-I-7", len(piece) <= 2048 and split.startswith(piece),
          lambda: f"the 2049-byte line was logged as one piece of {len(piece)} bytes, not split")
    rest = len(split) - len(piece)

    def rest_of_it(line):
        run = len(line) - len(line.rstrip("Z"))
        return line if "sbI7-split-" not in line and run == rest else None
    d.wait_stderr_line(rest_of_it, what=f"with the last {rest} bytes of the 2049-byte line")


# -- our readings of the framing (SPEC.md SB-I-6, SB-I-19, SB-I-36) -----------------------
@pytest.mark.clause("SB-I-6")
def test_blank_lines_are_ignored_and_a_crlf_line_is_forwarded_as_it_came(bus):
    bus.start(instances=1)
    c = bus.client()
    crlf = b'{"jsonrpc":"2.0","id":"crlf","method":"echo"}\r\n'
    c.send(b"\n \t\n" + crlf)
    c.recv_response("crlf")  # the client was kept: the blank lines were no malformed input
    assert c.sync() == [], "the blank lines got an answer"
    ins = [r.line for r in bus.worker_log().select("in")]
    check("SB-I-6", crlf in ins, lambda: f"the \\r\\n line did not reach the worker as sent: {ins[:3]}")
    check("SB-I-6", not [x for x in ins if not x.strip()], lambda: "a blank line reached the worker")


@pytest.mark.clause("SB-I-36")
def test_bytes_that_are_not_utf8_pass_unchanged_both_ways(bus):
    bus.start(instances=1)
    c = bus.client()
    up = b'{"jsonrpc":"2.0","method":"note","params":{"tag":"raw","s":"\xff\xfe caf\xc3\xa9 \x80"}}\n'
    c.send(up)
    rec = bus.worker_log().wait_received(b'"raw"')
    check("SB-I-36", rec.line == up, lambda: f"the worker read {rec.line!r}, not {up!r}")
    # the worker writes a response holding bytes that are not UTF-8 (the mock emits the string as is)
    down = b'{"jsonrpc":"2.0","id":"raw2","result":{"s":"\xff caf\xc3\xa9"}}\n'
    emit = down.decode("latin-1").replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    c.send(b'{"jsonrpc":"2.0","id":"raw2","method":"emit","params":{"mock":{"emit":"'
           + emit.encode("latin-1") + b'"}}}\n')
    got = c.recv_line()
    check("SB-I-36", got == down, lambda: f"the client read {got!r}, not {down!r}")


@pytest.mark.clause("SB-I-19")
def test_a_routing_field_given_twice_routes_by_its_first_occurrence(bus):
    bus.start(instances=2)
    c = bus.client()
    c.send(b'{"jsonrpc":"2.0","id":"dup","method":"m","sessionId":"first","sessionId":"second"}\n')
    pid = pid_of(c.recv_response("dup"))
    # the line made session "first" on its worker: "first" goes there again; had it made
    # "second", "first" would be a new session, the next worker round-robin
    again = pid_of(c.request(session="first"))
    check("SB-I-19", again == pid,
          lambda: f"sessionId \"first\" went to {again}, not to {pid}, where the line with it twice went")
