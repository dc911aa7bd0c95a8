"""Connection affinity (SPEC.md SB-X-10..SB-X-16), our extension for serving
stock MCP servers over the bus: a client's messages without sessionId stick
to one worker, the worker's own messages reach that client, and a pool may
give each connection a worker of its own.

Every test requires a profile feature, so no other daemon is judged on
them: `affinity` (SB-X-10..SB-X-14) and `per_connection_spawn` (SB-X-15,
SB-X-16). The spec's default (round-robin per message, 6.1.3; worker
messages without sessionId dropped, 6.3.3) keeps its own tests in
test_routing.py, run without these keys.
"""

import json
import re
import socket
import time

import pytest

from stdio_bus_conformance import DaemonExited, field, pid_of, procinfo, wait_timeout, wait_until

MIB = 1 << 20
POLL = 0.005  # /proc and the mock's log have no change notification: poll them
AFFINITY = pytest.mark.requires("affinity")
PER_CONNECTION = pytest.mark.requires("per_connection_spawn")
SOCKETS = pytest.mark.modes("unix", "tcp")
# Workers whose SIGTERM a test checks keep running at stdin EOF (the daemon
# closes their stdin too), so the signal is what ends them.
STAY = ["--on-eof", "stay"]


# -- helpers ------------------------------------------------------------------------------
def start(bus, instances=2, args=(), spawn=None, overrides=None):
    """The daemon with one pool of mock workers bound by connection."""
    pool = bus.pool("p", instances, args)
    pool["affinity"] = "connection"
    if spawn:
        pool["spawn"] = spawn
    d = bus.start(overrides, pools=[pool], wait_workers=spawn is None)
    return d


def warnings_after(daemon, since, *needles):
    """The daemon's own WARN lines (SB-I-34) from line `since` on that name
    every needle; the mock's relayed stderr is not the daemon's log."""
    rx = re.compile(r"\bWARN(?:ING)?\b", re.I)
    return [line for line in daemon.stderr_lines()[since:]
            if rx.search(line) and "mock_worker[" not in line and all(n in line for n in needles)]


def live_workers(bus):
    """The daemon's live children: its workers."""
    return procinfo.live_children(bus.daemon.pid)


def new_start(bus, known, what):
    """Waits for a worker start not in `known` (pids); returns its pid."""
    rec = bus.worker_log().wait_for(lambda r: r.kind == "start" and r.pid not in known, wait_timeout(), what)
    return rec.pid


def progress_lines(lines):
    return [line for line in lines if b"notifications/progress" in line]


# -- SB-X-10: the configuration keys ------------------------------------------------------
BAD_CONFIGS = {
    "affinity-value": ([{"affinity": "Connection"}], "pools[0].affinity"),
    "affinity-type": ([{"affinity": True}], "pools[0].affinity"),
    "spawn-value": ([{"spawn": "lazy"}], "pools[0].spawn"),
    "per-connection-without-affinity": ([{"spawn": "per_connection", "affinity": "none"}],
                                        "pools[0].spawn"),
    "mixed-affinity": ([{"affinity": "connection"}, {}], "pools[1]"),
    "per-connection-beside-another": ([{"affinity": "connection"}, {"spawn": "per_connection"}],
                                      "pools[1]"),
}


@AFFINITY
@pytest.mark.modes("stdio")  # the file is read before any mode matters
@pytest.mark.clause("SB-X-10")
@pytest.mark.parametrize("case", sorted(BAD_CONFIGS))
def test_bad_affinity_keys_are_rejected_naming_the_field(bus, case):
    extras, needle = BAD_CONFIGS[case]
    pools = []
    for i, extra in enumerate(extras):
        p = bus.pool("pq"[i], 1)
        p.update(extra)
        pools.append(p)
    try:
        d = bus.start(raw_config=json.dumps({"pools": pools}))
    except DaemonExited:
        d = bus.daemon
    # a daemon that accepts the file spawns its workers: fail at once then;
    # the harness's wait ends with DaemonExited when it exits, as it should here
    try:
        wait_until(lambda: bus.worker_log("p").pids(), what="the daemon exiting (or spawning)")
    except DaemonExited:
        pass
    assert not bus.worker_log("p").pids(), "the configuration was accepted: workers were spawned"
    rc = d.wait_exit(wait_timeout())
    assert rc > 0, f"exit status {rc}: the configuration was accepted"
    d.wait_stderr(re.escape(needle))
    for pool in ("p", "q"):
        assert bus.worker_log(pool).pids() == [], f"pool {pool} was spawned before the rejection"


@AFFINITY
@pytest.mark.modes("stdio")
@pytest.mark.clause("SB-X-10")
def test_affinity_none_and_spawn_at_start_are_the_spec_routing(bus):
    pool = bus.pool("p", 2)
    pool.update({"affinity": "none", "spawn": "at_start"})
    d = bus.start(pools=[pool])
    c = bus.client()
    pids = [pid_of(c.request()) for _ in range(4)]
    assert len(set(pids)) == 2, f"round-robin expected with \"affinity\": \"none\": {pids}"
    assert not warnings_after(d, 0, "affinity") and not warnings_after(d, 0, "spawn"), \
        "the keys were reported as unknown"


# -- SB-X-11: a client's messages without sessionId stick to one worker -------------------
@AFFINITY
@pytest.mark.clause("SB-X-11")
def test_sessionless_messages_of_a_client_go_to_one_worker(bus):
    start(bus, instances=3)
    clients = [bus.client()] if bus.mode == "stdio" else [bus.client() for _ in range(3)]
    first = [pid_of(c.request()) for c in clients]  # each first message binds, round-robin
    if bus.mode != "stdio":
        assert len(set(first)) == 3, f"three clients were not bound to three workers: {first}"
    for round_ in range(3):
        for i, c in enumerate(clients):
            c.notify("note", {"n": f"c{i}-{round_}"})
            assert pid_of(c.request()) == first[i], f"client {i} left its worker"
    log = bus.worker_log()
    for i, c in enumerate(clients):
        c.sync()
        got = {r.pid for r in log.select("in") if f'"c{i}-'.encode() in r.raw}
        assert got == {first[i]}, f"client {i}'s notifications reached {got}, not {first[i]}"


@AFFINITY
@pytest.mark.clause("SB-X-11")
def test_a_request_whose_id_is_pending_waits_for_its_own_worker(bus):
    start(bus, instances=2)
    c = bus.client()
    pid = pid_of(c.request())
    # the spec would send the second "dup" to the other worker at once
    c.send_json({"jsonrpc": "2.0", "id": "dup", "method": "slow", "params": {"mock": {"delay_ms": 300}}})
    c.send_json({"jsonrpc": "2.0", "id": "dup", "method": "again"})
    first, second = c.recv_response("dup"), c.recv_response("dup")
    assert field(first, "result", "method") == "slow" and field(second, "result", "method") == "again"
    assert pid_of(first) == pid_of(second) == pid, "the request was moved off the client's worker"


@AFFINITY
@pytest.mark.clause("SB-X-11")
def test_messages_with_a_session_keep_the_spec_routing(bus):
    start(bus, instances=2)
    c = bus.client()
    bound = pid_of(c.request())
    on_session = pid_of(c.request(session="s"))  # a new session: the next worker round-robin
    assert on_session != bound, "a new session followed the client's binding"
    assert pid_of(c.request(session="s")) == on_session
    assert pid_of(c.request()) == bound


@AFFINITY
@pytest.mark.clause("SB-X-11")
def test_while_its_worker_is_stopping_the_client_is_not_moved(bus):
    # a worker that writes garbage is STOPPING until it exits; this one
    # ignores SIGTERM, so the window lasts drain_timeout_sec
    start(bus, instances=2, args=["--ignore-sigterm"] + STAY, overrides={"limits": {"drain_timeout_sec": 3}})
    c = bus.client()
    c.request()  # binds c to a worker
    since = len(bus.daemon.stderr_lines())
    c.send_json({"jsonrpc": "2.0", "id": "bad", "method": "x", "params": {"mock": {"emit": "garbage\n"}}})
    wait_until(lambda: [x for x in bus.daemon.stderr_lines()[since:] if "ERROR" in x and "malformed" in x],
               what="the worker's failure logged")
    c.send_json({"jsonrpc": "2.0", "id": "late", "method": "x"})
    wait_until(lambda: warnings_after(bus.daemon, since, "late"), what="a warning about the discarded message")
    others = [r for r in bus.worker_log().select("in") if b'"late"' in r.raw]
    assert others == [], f"the message went to another worker: {others}"


# -- SB-X-12: a worker's own messages go to its bound client ------------------------------
@AFFINITY
@pytest.mark.clause("SB-X-12")
def test_worker_notifications_without_session_reach_the_bound_client(bus):
    start(bus, instances=2)
    clients = [bus.client()] if bus.mode == "stdio" else [bus.client(), bus.client()]
    pids = [pid_of(c.request()) for c in clients]
    for i, c in enumerate(clients):
        c.send_json({"jsonrpc": "2.0", "id": f"work-{i}", "method": "work",
                     "params": {"mock": {"notify": 3}}})
    for i, c in enumerate(clients):
        c.recv_response(f"work-{i}")
        before = [line for line in c.received if b"notifications/progress" in line]
        sent = [r.line for r in bus.worker_log().select("out", pid=pids[i])
                if b"notifications/progress" in r.raw]
        assert before == sent, f"client {i} got {before}, its worker wrote {sent}"
        assert len(before) == 3
        # the answer came after its notifications (SB-I-42)
        answer = next(k for k, line in enumerate(c.received) if f'"work-{i}"'.encode() in line
                      and b'"result"' in line)
        assert all(c.received.index(n) < answer for n in before)


@AFFINITY
@pytest.mark.clause("SB-X-12")
def test_a_worker_without_a_bound_client_has_its_messages_discarded(bus):
    start(bus, instances=2)
    c = bus.client()
    bound = pid_of(c.request())
    # a new session goes to the other worker, which no client is bound to
    other = pid_of(c.request(session="s"))
    assert other != bound
    since = len(bus.daemon.stderr_lines())
    c.send_json({"jsonrpc": "2.0", "id": "e", "method": "emit", "sessionId": "s",
                 "params": {"mock": {"emit": '{"jsonrpc":"2.0","method":"notifications/message",'
                                             '"params":{"data":"nobody"}}\n'}}})
    assert c.sync(session="s") == [], "a message of an unbound worker reached a client"
    wait_until(lambda: warnings_after(bus.daemon, since), what="a warning for the discarded message")


# -- SB-X-13: the client's answer goes back to the worker that asked ----------------------
@AFFINITY
@pytest.mark.clause("SB-X-13", "SB-X-12")
def test_a_worker_request_is_answered_back_to_that_worker(bus):
    start(bus, instances=2)
    clients = [bus.client()] if bus.mode == "stdio" else [bus.client(), bus.client()]
    pids = [pid_of(c.request()) for c in clients]
    for i, c in enumerate(clients):  # both workers ask with the same id, "srv-1"
        c.send_json({"jsonrpc": "2.0", "id": f"ask-{i}", "method": "ask",
                     "params": {"mock": {"request": {"method": "roots/list"}}}})
    for i, c in enumerate(clients):
        line = c.recv_line()
        assert line == b'{"jsonrpc":"2.0","id":"srv-1","method":"roots/list"}\n', line
        c.send_json({"jsonrpc": "2.0", "id": "srv-1", "result": {"roots": [{"uri": f"file:///c{i}"}]}})
    for i, c in enumerate(clients):
        answer = c.recv_response(f"ask-{i}")
        assert pid_of(answer) == pids[i]
        assert field(answer, "result", "client_reply", "result", "roots")[0]["uri"] == f"file:///c{i}"


# -- SB-X-14: a worker's exit ends its clients --------------------------------------------
BURST = 1000  # lines written just before the exit: the last ones arrive with it


def exit_after_burst(c):
    """Has c's worker write BURST notifications and the answer to "last" in
    one write(), then exit."""
    note = '{"jsonrpc":"2.0","method":"notifications/message","params":{"data":"%s"}}\n' % ("x" * 100)
    c.send_json({"jsonrpc": "2.0", "id": "last", "method": "bye", "params": {"mock": {
        "emit": note * BURST + '{"jsonrpc":"2.0","id":"last","result":{}}\n', "then": "exit"}}})


def check_burst_delivered(c):
    c.expect_closed()
    lines = c.received
    assert sum(b"notifications/message" in line for line in lines) == BURST and \
        lines[-1] == b'{"jsonrpc":"2.0","id":"last","result":{}}\n', \
        "what the worker wrote before it exited was not all delivered before the close"


@AFFINITY
@pytest.mark.clause("SB-X-14")
def test_a_worker_exit_closes_its_clients_after_its_last_output(bus):
    start(bus, instances=2 if bus.mode == "stdio" else 5)
    if bus.mode == "stdio":
        c = bus.client()
        c.request()
        exit_after_burst(c)
        check_burst_delivered(c)
        assert bus.daemon.wait_exit(wait_timeout()) == 0
        return
    # four workers exit at once, so their last lines and their exits meet
    # in the daemon's poll rounds; a fifth client keeps its worker
    clients = [bus.client() for _ in range(5)]
    assert len({pid_of(c.request()) for c in clients}) == 5
    for c in clients[:4]:
        exit_after_burst(c)
    for c in clients[:4]:
        check_burst_delivered(c)
    clients[4].request()  # the other client and its worker are untouched
    assert not clients[4].closed_by_daemon


NOTE = b'{"jsonrpc":"2.0","method":"notifications/message","params":{"data":"%s"}}' % (b"x" * 40)
REPEAT = 8 * MIB // 100


@AFFINITY
@SOCKETS
@pytest.mark.clause("SB-X-14")
def test_a_client_that_is_not_reading_gets_the_last_output_before_the_close(bus):
    # drain_timeout_sec is what the daemon grants a client to read what it is owed (SB-X-14):
    # long here, so a harness slow to read 8 MB on a busy machine is not cut (the read ends
    # the wait, not the deadline)
    start(bus, instances=1, overrides={"limits": {"max_output_queue": 64 * MIB, "drain_timeout_sec": 300}})
    d = bus.daemon
    family = socket.AF_UNIX if bus.mode == "unix" else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.settimeout(wait_timeout())
        s.connect(d.address)
        # 8 MB of notifications in one write(), then the worker exits; nobody
        # reads meanwhile, so most of it waits in the daemon when the exit is seen
        s.sendall(b'{"jsonrpc":"2.0","id":"big","method":"x","params":{"mock":{"emit":"%s\\n",'
                  b'"emit_repeat":%d,"then":"exit"}}}\n' % (NOTE.replace(b'"', b'\\"'), REPEAT))
        rec = bus.worker_log().wait_for(lambda r: r.kind == "exit", wait_timeout(), "the worker's exit")
        wait_until(lambda: procinfo.state(rec.pid) is None, what="the worker exited and reaped")
        data = b""
        while True:
            chunk = s.recv(1 << 20)
            if not chunk:
                break
            data += chunk
    got = data.count(b"\n")
    assert data == (NOTE + b"\n") * REPEAT, \
        f"{got} of {REPEAT} lines before the close: the worker's last output was cut"


# -- SB-X-15, SB-X-16: one worker per connection ------------------------------------------
def wait_no_workers(bus):
    """In socket modes the readiness probe was a connection too: wait until
    its worker is gone and reaped, so its slot is free."""
    wait_until(lambda: not procinfo.children(bus.daemon.pid), what="no worker while no client is connected")


@PER_CONNECTION
@pytest.mark.clause("SB-X-15")
def test_each_connection_gets_a_worker_of_its_own(bus):
    start(bus, instances=3, spawn="per_connection")
    if bus.mode == "stdio":
        c = bus.client()
        pid = pid_of(c.request())
        assert live_workers(bus) == [pid], "more than the client's own worker runs"
        for sid in ("s1", "s2", "s3"):  # new sessions stay on it
            assert pid_of(c.request(session=sid)) == pid
        return
    wait_no_workers(bus)
    known = set(bus.worker_pids())
    clients, pids = [], []
    for i in range(2):
        clients.append(bus.client())
        pids.append(new_start(bus, known | set(pids), f"a worker started for client {i}"))
    for i, c in enumerate(clients):
        assert pid_of(c.request()) == pids[i]
        for sid in (f"s{i}-a", f"s{i}-b", f"s{i}-c"):  # never another connection's worker
            assert pid_of(c.request(session=sid)) == pids[i]
    assert sorted(live_workers(bus)) == sorted(pids)


@PER_CONNECTION
@SOCKETS
@pytest.mark.clause("SB-X-15")
def test_a_connection_beyond_instances_is_closed_with_a_warning(bus):
    start(bus, instances=1, spawn="per_connection")
    wait_no_workers(bus)
    first = bus.client()
    pid = pid_of(first.request())
    since = len(bus.daemon.stderr_lines())
    second = bus.client()
    second.expect_closed()
    wait_until(lambda: warnings_after(bus.daemon, since), what="a warning for the refused connection")
    assert pid_of(first.request()) == pid and live_workers(bus) == [pid]


@PER_CONNECTION
@SOCKETS
@pytest.mark.clause("SB-X-16")
def test_a_clients_worker_is_stopped_when_it_leaves_and_its_slot_reused(bus):
    start(bus, instances=1, args=STAY, spawn="per_connection")
    wait_no_workers(bus)
    c = bus.client()
    pid = pid_of(c.request())
    c.close()
    log = bus.worker_log()
    log.wait_for(lambda r: r.kind == "signal" and r.pid == pid, wait_timeout(), "SIGTERM to the client's worker")
    wait_until(lambda: procinfo.state(pid) is None, what="the worker exited and reaped")
    assert procinfo.children(bus.daemon.pid) == [], "the worker was restarted"
    again = bus.client()  # its slot serves the next connection
    assert pid_of(again.request()) != pid


@PER_CONNECTION
@pytest.mark.requires("restart_backoff")
@pytest.mark.clause("SB-X-16", "SB-X-14")
def test_a_per_connection_worker_that_exits_is_not_restarted(bus):
    # one slot: a restart (1 ms after the exit) would leave no slot for the next client
    start(bus, instances=1, spawn="per_connection",
          overrides={"limits": {"restart_backoff_ms": 1, "restart_backoff_max_ms": 1}})
    if bus.mode != "stdio":
        wait_no_workers(bus)
    c = bus.client()
    pid = pid_of(c.request())
    c.send_json({"jsonrpc": "2.0", "id": "last", "method": "bye", "params": {"mock": {"then": "exit"}}})
    c.expect_closed()
    if bus.mode == "stdio":
        assert bus.daemon.wait_exit(wait_timeout()) == 0
        return
    wait_until(lambda: procinfo.state(pid) is None, what="the worker exited and reaped")
    starts = len(bus.worker_log().select("start"))
    # a restart would come 1 ms after the exit: a bounded look for one, as
    # expect_silence does for lines
    deadline = time.monotonic() + 0.3
    while time.monotonic() < deadline:
        assert len(bus.worker_log().select("start")) == starts, "the exited worker was restarted"
        time.sleep(POLL)
    other = bus.client()
    pid_of(other.request())
    assert len(bus.worker_log().select("start")) == starts + 1, "the exited worker was restarted"
    assert len(live_workers(bus)) == 1
