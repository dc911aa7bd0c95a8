"""Clients that reuse ids (SB-I-3, SB-I-45): every JSON-RPC client counts its
ids from 0 or 1, so two clients of one daemon send the same id all the time.
A worker's answer carries only the id (and a sessionId when it chooses to),
so the daemon must never leave two requests with one id pending on one
worker: each client gets its own answer, never the other's.

The scenarios: one worker; every worker already holding the id; with and
without sessions, the worker echoing the sessionId or not; and a client slot
freed and reused while the departed client's request is still pending."""

import pytest

from stdio_bus_conformance import check, evidence, field

SLOW_MS = 300


def ask(client, req_id, who, *, delay_ms=0, session=None, **mock):
    """A request whose answer carries `who`, so its recipient can tell whose it is."""
    msg = {"jsonrpc": "2.0", "id": req_id, "method": "m",
           "params": {"who": who, "mock": {"delay_ms": delay_ms, **mock}}}
    if session is not None:
        msg["sessionId"] = session
    client.send_json(msg)


def whose(response):
    return field(response, "result", "params", "who")


def expect_own(client, req_id, who, clause="SB-6.3.1-2"):
    """The client's answer to req_id. Getting another client's answer is a
    data leak that seed 6.3.1 ("route the Response to the originating
    Client") forbids under every reading: SB-6.3.1-2. Getting none at all
    (a daemon that keyed the table by id alone lost it) is SB-I-3's, the
    test's first clause."""
    got = whose(client.recv_response(req_id))
    check(clause, got == who, f"{client.name} received the answer meant for {got!r}")


def expect_no_more(client, who):
    """Nothing more arrives for the client: an answer carrying another
    client's name is SB-6.3.1-2's; anything else extra is SB-I-3's."""
    extra = client.sync()
    crossed = [x for x in extra if b'"who":' in x and b'"who":"%s"' % who.encode() not in x]
    check("SB-6.3.1-2", crossed == [], f"{client.name} received answers meant for another client: {crossed}")
    assert extra == [], f"{client.name} received more than its own answers: {extra}"


@pytest.mark.modes("unix", "tcp")
@pytest.mark.clause("SB-I-3", "SB-6.3.1-2")
@pytest.mark.parametrize("req_id", [7, 0, "1"], ids=["id-7", "id-0", "id-string-1"])
def test_two_clients_one_worker_same_id_each_get_their_own_answer(bus, req_id):
    bus.start(instances=1)
    a, b = bus.client(), bus.client()
    ask(a, req_id, "a", delay_ms=SLOW_MS)
    bus.worker_log().wait_received(b'"who":"a"')
    ask(b, req_id, "b")  # the worker would answer this one first
    expect_own(a, req_id, "a")
    expect_own(b, req_id, "b")
    expect_no_more(a, "a")
    expect_no_more(b, "b")


@pytest.mark.modes("unix", "tcp")
@pytest.mark.clause("SB-I-3", "SB-6.3.1-2")
@pytest.mark.parametrize("instances", [2, 3])
def test_same_id_when_every_worker_holds_it(bus, instances):
    bus.start(instances=instances)
    holders = [bus.client() for _ in range(instances)]
    for i, c in enumerate(holders):
        ask(c, 7, f"holder{i}", delay_ms=SLOW_MS)
    log = bus.worker_log()
    for i in range(instances):
        log.wait_received(b'"who":"holder%d"' % i)
    late = bus.client()
    ask(late, 7, "late")
    for i, c in enumerate(holders):
        expect_own(c, 7, f"holder{i}")
    expect_own(late, 7, "late")
    for i, c in enumerate(holders):
        expect_no_more(c, f"holder{i}")
    expect_no_more(late, "late")


@pytest.mark.modes("unix", "tcp")
@pytest.mark.clause("SB-I-3", "SB-6.3.1-2", "SB-6.1.2-1")
@pytest.mark.parametrize("echo_session", [True, False], ids=["session-echoed", "session-not-echoed"])
def test_same_id_in_two_sessions_on_one_worker(bus, echo_session):
    """SB-5.2.2-1 (echo the sessionId) is only a SHOULD for workers: without
    it the two answers differ in nothing the daemon can see."""
    bus.start(instances=1)
    a, b = bus.client(), bus.client()
    extra = {} if echo_session else {"reply_session": None}
    ask(a, 1, "a", delay_ms=SLOW_MS, session="sa", **extra)
    bus.worker_log().wait_received(b'"who":"a"')
    ask(b, 1, "b", session="sb", **extra)
    expect_own(a, 1, "a")
    expect_own(b, 1, "b")
    expect_no_more(a, "a")
    expect_no_more(b, "b")


@pytest.mark.modes("unix", "tcp")
@pytest.mark.clause("SB-I-3", "SB-6.3.1-2")
def test_one_client_session_and_another_without_share_an_id(bus):
    bus.start(instances=1)
    a, b = bus.client(), bus.client()
    ask(a, 3, "a", delay_ms=SLOW_MS, session="sa")
    bus.worker_log().wait_received(b'"who":"a"')
    ask(b, 3, "b")
    expect_own(a, 3, "a")
    expect_own(b, 3, "b")


@pytest.mark.modes("unix", "tcp")
@pytest.mark.clause("SB-I-23", "SB-7.2-2", "SB-I-3", "SB-6.3.1-2")
@pytest.mark.parametrize("instances", [1, 2])
def test_newcomer_reusing_a_departed_clients_id_gets_its_own_answer(bus, instances):
    """A sends a slow request and leaves; B (maybe on A's fd) sends the same
    id. B gets B's answer; A's late answer reaches no one."""
    bus.start(instances=instances)
    olds = [bus.client() for _ in range(instances)]
    for i, c in enumerate(olds):  # with two workers, both hold id 5
        ask(c, 5, f"gone{i}", delay_ms=SLOW_MS)
    log = bus.worker_log()
    for i in range(instances):
        log.wait_received(b'"who":"gone%d"' % i)
    for c in olds:
        c.close()
    b = bus.client()
    ask(b, 5, "b")
    expect_own(b, 5, "b")
    # wait until the workers have written every late answer, then look
    log.wait_count(lambda r: r.kind == "out" and b'"who":"gone' in r.raw, instances,
                   what="with the departed clients' late answers")
    b.sync()
    check("SB-6.3.1-2", not any(b"gone" in line for line in b.received), "a departed client's answer reached B")


@pytest.mark.modes("unix", "tcp")
@pytest.mark.clause("SB-I-45")
def test_ids_a_worker_would_write_alike_are_kept_apart(bus):
    """A worker that parses and re-serialises JSON answers id 1.0 as 1 (the
    mock's reply_id plays one). B's request must not be pending beside A's:
    otherwise its answer, id 1, reaches A."""
    bus.start(instances=1)
    a, b = bus.client(), bus.client()
    a.send(b'{"jsonrpc":"2.0","id":1,"method":"m","params":{"who":"a","mock":{"delay_ms":%d}}}\n'
           % SLOW_MS)
    bus.worker_log().wait_received(b'"who":"a"')
    b.send(b'{"jsonrpc":"2.0","id":1.0,"method":"m","params":{"who":"b","mock":{"reply_id":1}}}\n')
    # B's worker answers with A's token: the daemon routing it by its token is
    # not a 6.3.1 violation, keeping the two apart is SB-I-45's
    expect_own(a, 1, "a", clause="SB-I-45")
    assert not any(b'"who":"b"' in line for line in a.sync()), "B's answer reached A"


@pytest.mark.modes("unix", "tcp")
@pytest.mark.clause("SB-I-45", "SB-6.3.1-2")
def test_held_request_keeps_its_clients_order(bus):
    """B's request waits for A's id; B's next request, with a free id, waits
    behind it: B's messages reach the worker in the order B sent them."""
    bus.start(instances=1)
    a, b = bus.client(), bus.client()
    ask(a, 9, "a", delay_ms=SLOW_MS)
    bus.worker_log().wait_received(b'"who":"a"')
    ask(b, 9, "b-first")
    ask(b, 10, "b-second")
    expect_own(a, 9, "a")
    expect_own(b, 9, "b-first")
    expect_own(b, 10, "b-second")
    received = [r.raw for r in bus.worker_log().select("in") if b'"who":"b-' in r.raw]
    assert [b"b-first" in x for x in received] == [True, False], received


@pytest.mark.modes("unix", "tcp")
@pytest.mark.clause("SB-I-45", "SB-I-54", "SB-6.3.1-2")
def test_client_whose_id_is_squatted_waits_past_backpressure_timeout_and_is_served(bus):
    # Issue 32 item 3: another client's request holds id 4 on the only worker;
    # b's id 4 waits, and its next request behind it, past
    # backpressure_timeout_sec: b is not closed, and is served once id 4 is free.
    bus.start({"limits": {"backpressure_timeout_sec": 1}}, instances=1)
    a, b, other = bus.client(), bus.client(), bus.client()
    ask(a, 4, "a", delay_ms=3000)  # id 4 pending for 3 s
    bus.worker_log().wait_received(b'"who":"a"')
    ask(b, 4, "b")
    ask(b, 1000, "b-next")
    assert other.request()["result"]["method"] == "echo"
    expect_own(a, 4, "a")
    expect_own(b, 4, "b")
    expect_own(b, 1000, "b-next")
    assert not b.closed_by_daemon
