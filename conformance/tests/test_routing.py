"""Routing (spec 6): responses go back to the client that asked, sessions
stick to their worker, messages without a session go round-robin, worker
messages nobody is waiting for are dropped."""

import json
import re

import pytest

from stdio_bus_conformance import check, checking, field, pid_of

# What a daemon's line about a worker message it discarded says, in any
# daemon's words (the level word is SB-I-34's alone).
DROPPED = re.compile(r"(?i)discard|drop|unroutable|not routed|no route|unknown|ignor|orphan|stray"
                     r"|unmatched|no (?:such|matching|pending|owner|session|client)|not found")


def discard_logged(d, clause, control, since, *tokens):
    """Seed 6.3.x "log a warning and discard", in any words: a daemon stderr
    line written after stderr_mark() `since` (taken before the event) that
    names one of its `tokens`, says it was dropped, or has a shape no line
    of the sync between marks `control` and `since` had (the event caused
    it: Daemon.wait_caused); judged on `clause`. Called after a sync through
    the same worker, so the daemon has read the line; a daemon that logs
    nothing costs one wait deadline."""
    with checking(clause):
        d.wait_caused(control, since, list(tokens) + [DROPPED],
                      what=f"about the discarded worker message ({', '.join(tokens)}), in any words")


@pytest.mark.clause("SB-6.2-1", "SB-6.2-2", "SB-6.3.1-5", "SB-6.3.1-2", "SB-4.1.2-2")
def test_each_response_goes_to_the_client_that_asked(bus):
    bus.start(instances=2)
    clients = [bus.client()] if bus.mode == "stdio" else [bus.client() for _ in range(3)]
    for round_ in range(4):  # interleave the clients' requests
        for i, c in enumerate(clients):
            c.send_json({"jsonrpc": "2.0", "id": f"c{i}-r{round_}", "method": "echo",
                         "params": {"mock": {"delay_ms": (3 - i) * 3}}})
    for i, c in enumerate(clients):
        for round_ in range(4):
            assert field(c.recv_response(f"c{i}-r{round_}"), "result", "method") == "echo"
    for c in clients:
        assert c.sync() == [], f"{c.name} received responses meant for another client"


@pytest.mark.clause("SB-6.3.1-5", "SB-6.3.1-2")
def test_error_response_is_looked_up_like_a_result(bus):
    # seed 6.3.1: a worker message with an id and a result *or* an error is a
    # response, whose id is looked up in the pending table
    bus.start(instances=1)
    c = bus.client()
    err = '{"jsonrpc":"2.0","id":"e1","error":{"code":-32601,"message":"no such method"}}\n'
    c.send_json({"jsonrpc": "2.0", "id": "e1", "method": "emit", "params": {"mock": {"emit": err}}})
    c.sync()  # one worker: it wrote the error before its answer to the sync
    check("SB-6.3.1-5", err.encode() in c.received,
          lambda: f"the worker's error response to e1 did not reach the client that asked: got {c.received}")


@pytest.mark.clause("SB-6.3.1-4")
def test_response_with_unknown_id_is_discarded(bus):
    d = bus.start(instances=2)
    c = bus.client()
    control = d.stderr_mark()
    c.sync(session="s")  # what a sync alone makes the daemon write: not about the discard
    since = d.stderr_mark()
    c.send_json({"jsonrpc": "2.0", "id": 1, "method": "x", "sessionId": "s",
                 "params": {"mock": {"reply_id": "nobody-asked"}}})
    # the sentinel goes to the same worker, after the stray response
    assert c.sync(session="s") == []
    discard_logged(d, "SB-6.3.1-4", control, since, "nobody-asked")


@pytest.mark.clause("SB-6.3.1-3", "SB-6.3.1-4")
def test_second_response_with_the_same_id_is_discarded(bus):
    bus.start(instances=1)
    c = bus.client()
    reply = '{"jsonrpc":"2.0","id":"twice","result":"%s","sessionId":"s"}\n'
    c.send_json({"jsonrpc": "2.0", "id": "twice", "method": "x", "sessionId": "s",
                 "params": {"mock": {"emit": reply % "first" + reply % "second"}}})
    assert field(c.recv_response("twice"), "result") == "first"
    assert c.sync(session="s") == []


@pytest.mark.clause("SB-6.1.2-1", "SB-6.1.2-2", "SB-6.1.1-2", "SB-3.4-2")
def test_session_sticks_to_its_worker(bus):
    bus.start(instances=3)
    c = bus.client()
    answered = {"s1": [], "s2": []}
    for i in range(12):
        for sid in answered:
            answered[sid].append(pid_of(c.request(session=sid)))
        if i % 2:  # sessionless traffic moves the round-robin cursor, not the sessions
            c.request()
    # Told apart by what each break leaves: messages not routed by their
    # session scatter to the end (SB-6.1.2-1); a session moved once stays on
    # its new worker (SB-6.1.2-2); one whose entry names another worker than
    # the one its first message went to is stable from its second (SB-6.1.1-2).
    check("SB-6.1.2-1", all(len(set(pids[-4:])) == 1 for pids in answered.values()),
          f"a session's last messages reached several workers: {answered}")
    check("SB-6.1.2-2", all(len(set(pids[1:])) == 1 for pids in answered.values()),
          f"a session moved to another worker: {answered}")
    check("SB-6.1.1-2", all(pids[1] == pids[0] for pids in answered.values()),
          f"a session's later messages did not reach the worker its first message went to: {answered}")
    seen = {sid: set(pids) for sid, pids in answered.items()}
    # the worker log agrees: every line of a session went to one pid
    for sid in seen:
        needle = f'"sessionId":"{sid}"'.encode()
        check("SB-3.4-2", {r.pid for r in bus.worker_log().select("in") if needle in r.raw} == seen[sid],
              lambda: f"the lines of session {sid} reached workers "
                      f"{ {r.pid for r in bus.worker_log().select('in') if needle in r.raw} }, "
                      f"not only {seen[sid]}")


@pytest.mark.clause("SB-6.1.3-1", "SB-B-2")
def test_requests_without_session_go_round_robin(bus):
    bus.start(instances=3)
    c = bus.client()
    pids = [pid_of(c.request()) for _ in range(9)]
    assert len(set(pids[:3])) == 3, f"the first three requests did not reach three workers: {pids}"
    assert pids == pids[:3] * 3, f"not a round-robin cycle: {pids}"
    assert set(pids) == set(bus.worker_pids())


@pytest.mark.clause("SB-6.1.1-1", "SB-6.1.1-2")
def test_new_sessions_are_spread_round_robin(bus):
    bus.start(instances=3)
    c = bus.client()
    pids = [pid_of(c.request(session=f"new-{i}")) for i in range(6)]
    assert len(set(pids[:3])) == 3 and pids[3:] == pids[:3], pids


@pytest.mark.modes("unix", "tcp")
@pytest.mark.clause("SB-6.3.2-1", "SB-6.3.2-2", "SB-6.1.1-3", "SB-3.4-3")
def test_notifications_go_to_the_session_owner_only(bus):
    bus.start(instances=2)
    other = bus.client()
    other.request(session="others")  # the first connection: the owner is not it
    owner = bus.client()
    owner.send_json({"jsonrpc": "2.0", "id": "n", "method": "work", "sessionId": "mine",
                     "params": {"mock": {"notify": 3}}})
    owner.recv_response("n")  # the worker wrote its notifications first: they have been routed
    notes = [json.loads(line) for line in owner.received if b"notifications/progress" in line]
    check("SB-6.3.2-2", len(notes) == 3 and all(n.get("sessionId") == "mine" for n in notes),
          lambda: f"the session's owner got {notes}, not its 3 notifications; the other client got "
                  f"{[x for x in other.received if b'notifications/progress' in x]}")
    owner.sync(session="mine")  # everything that worker wrote before has been routed
    assert other.sync(session="others") == [], "a notification reached a client that does not own the session"


def emit(c, text, session="s", id="emitter"):
    """Has the worker of `session` write `text` (raw) instead of an answer."""
    c.send_json({"jsonrpc": "2.0", "id": id, "method": "emit", "sessionId": session,
                 "params": {"mock": {"emit": text}}})


@pytest.mark.clause("SB-6.3.2-3")
def test_notification_for_unknown_session_is_discarded(bus):
    d = bus.start(instances=1)
    c = bus.client()
    control = d.stderr_mark()
    c.sync(session="s")  # what a sync alone makes the daemon write: not about the discard
    since = d.stderr_mark()
    emit(c, '{"jsonrpc":"2.0","method":"notifications/message","sessionId":"ghost"}\n')
    assert c.sync(session="s") == []
    discard_logged(d, "SB-6.3.2-3", control, since, "ghost")


@pytest.mark.clause("SB-6.3.3-1", "SB-6.3.3-2", "SB-I-15")
def test_unroutable_worker_messages_are_discarded(bus):
    d = bus.start(instances=1)
    c = bus.client()
    control = d.stderr_mark()
    c.sync(session="s")  # what a sync alone makes the daemon write: not about the discard
    since = d.stderr_mark()
    # no sessionId anywhere: a sessionId under params is not top level (SB-I-28),
    # but a daemon may read it there (ACP keeps it in params), so it is left out
    emit(c, '{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info"}}\n'
            '{"jsonrpc":"2.0","id":"srv-x","method":"ask/without/session"}\n')
    got = c.sync(session="s")
    check("SB-6.3.3-2", got == [], f"a message with neither a response id nor a sessionId reached a client: {got}")
    assert bus.daemon.running
    discard_logged(d, "SB-6.3.3-1", control, since, "srv-x", "ask/without/session", "notifications/message")


@pytest.mark.clause("SB-I-32", "SB-6.3.1-4")
def test_response_without_id_is_discarded_not_routed_by_session(bus):
    bus.start(instances=1)
    c = bus.client()
    emit(c, '{"jsonrpc":"2.0","result":{"orphan":true},"sessionId":"s"}\n'
            '{"jsonrpc":"2.0","error":{"code":1,"message":"orphan"},"sessionId":"s"}\n')
    assert c.sync(session="s") == []


@pytest.mark.modes("unix", "tcp")
@pytest.mark.clause("SB-I-32", "SB-6.3.1-2")
def test_response_is_routed_by_id_even_when_it_names_another_session(bus):
    bus.start(instances=1)
    asker, owner = bus.client(), bus.client()
    owner.request(session="owned-by-other")
    asker.send_json({"jsonrpc": "2.0", "id": "q", "method": "x", "sessionId": "mine",
                     "params": {"mock": {"reply_session": "owned-by-other"}}})
    assert field(asker.recv_response("q"), "sessionId") == "owned-by-other"
    assert owner.sync(session="owned-by-other") == []


@pytest.mark.clause("SB-I-3", "SB-6.2-3")
def test_response_from_another_worker_does_not_match(bus):
    # Seed 6.2 associates the id with its worker but 6.3.1 looks it up by id:
    # matching on (worker, id) is our reading, SB-I-3. The spec-tier
    # consequence of 6.2-3 is test_failure.py::test_response_for_a_request_of_an_exited_worker_matches_nothing.
    bus.start(instances=2)
    c = bus.client()
    pa, pb = pid_of(c.request(session="a")), pid_of(c.request(session="b"))
    assert pa != pb, "two new sessions should start on two workers"
    c.send_json({"jsonrpc": "2.0", "id": "x", "method": "slow", "sessionId": "a",
                 "params": {"mock": {"delay_ms": 300}}})
    # worker b answers its own request with id "x", pending on worker a only
    c.send_json({"jsonrpc": "2.0", "id": "y", "method": "fake", "sessionId": "b",
                 "params": {"mock": {"reply_id": "x"}}})
    assert c.sync(session="b") == [], "worker b's response matched a request pending on worker a"
    assert pid_of(c.recv_response("x")) == pa


@pytest.mark.clause("SB-I-3", "SB-6.3.1-5")
def test_ids_match_as_exact_tokens(bus):
    bus.start(instances=1)
    c = bus.client()
    tokens = [b"1", b'"1"', b"1.0", b"1e0", b'"\\u0031"']
    for n, tok in enumerate(tokens):  # all pending at once on the one worker
        c.send(b'{"jsonrpc":"2.0","id":' + tok + b',"method":"m","params":{"mock":{"delay_ms":%d}}}\n'
               % (200 - 40 * n))
    got = sorted(c.recv_line() for _ in tokens)
    assert sorted(line.split(b',"result"')[0] for line in got) == \
        sorted(b'{"jsonrpc":"2.0","id":' + tok for tok in tokens)
    assert c.sync() == []


@pytest.mark.modes("unix", "tcp")
@pytest.mark.clause("SB-I-3", "SB-6.3.1-2")
def test_clients_reusing_the_same_id_each_get_their_own_response(bus):
    # an answer that reaches the other client breaks seed 6.3.1 under every
    # reading (SB-6.3.1-2); an answer lost is SB-I-3's (the first clause)
    bus.start(instances=2)
    a, b = bus.client(), bus.client()
    a.send_json({"jsonrpc": "2.0", "id": 1, "method": "m", "params": {"who": "a", "mock": {"delay_ms": 150}}})
    b.send_json({"jsonrpc": "2.0", "id": 1, "method": "m", "params": {"who": "b", "mock": {"delay_ms": 50}}})
    got_b = field(b.recv_response(1), "result", "params", "who")
    check("SB-6.3.1-2", got_b == "b", f"b received the answer meant for {got_b!r}")
    got_a = field(a.recv_response(1), "result", "params", "who")
    check("SB-6.3.1-2", got_a == "a", f"a received the answer meant for {got_a!r}")
    extra = a.sync() + b.sync()
    check("SB-6.3.1-2", not any(b'"who"' in x for x in extra), f"answers crossed: {extra}")
    assert extra == []


@pytest.mark.modes("unix", "tcp")
@pytest.mark.clause("SB-I-15", "SB-6.3.2-2")
def test_worker_request_goes_to_the_session_owner(bus):
    bus.start(instances=1)
    owner, other = bus.client(), bus.client()
    other.request(session="others")
    owner.send_json({"jsonrpc": "2.0", "id": "ask", "method": "m", "sessionId": "mine",
                     "params": {"mock": {"request": {"method": "sampling/createMessage"}}}})
    req = owner.recv_json()
    assert req.get("method") == "sampling/createMessage" and req.get("sessionId") == "mine" and "id" in req
    assert other.sync(session="others") == []


@pytest.mark.clause("SB-I-14")
def test_client_response_to_a_worker_request_reaches_that_worker(bus):
    bus.start(instances=2)
    c = bus.client()
    c.send_json({"jsonrpc": "2.0", "id": "ask", "method": "m", "sessionId": "s",
                 "params": {"mock": {"request": {"method": "roots/list"}}}})
    req = c.recv_json()
    c.send_json({"jsonrpc": "2.0", "id": field(req, "id"), "result": {"roots": []}, "sessionId": "s"})
    assert field(c.recv_response("ask"), "result", "client_reply", "result") == {"roots": []}


@pytest.mark.clause("SB-I-28")
def test_routing_fields_are_read_at_top_level_after_unescaping(bus):
    bus.start(instances=2)
    c = bus.client()
    # a sessionId inside params is not the message's: these go round-robin
    nested = [pid_of(c.request(params={"sessionId": "nested"})) for _ in range(4)]
    assert nested[0] != nested[1] and nested[:2] == nested[2:], nested
    # an escaped member name is the routing field itself
    pids = set()
    for i in range(4):
        c.send(b'{"jsonrpc":"2.0","id":"e%d","method":"m","sessi\\u006fnId":"esc"}\n' % i)
        pids.add(pid_of(c.recv_response(f"e{i}")))
        pids.add(pid_of(c.request(session="esc")))
    assert len(pids) == 1, pids


@pytest.mark.clause("SB-I-24", "SB-6.2-1")
def test_client_message_with_id_but_no_method_is_tracked(bus):
    bus.start(instances=1)
    c = bus.client()
    c.send(b'{"jsonrpc":"2.0","id":"m1","sessionId":"s","params":{}}\n')
    emit(c, '{"jsonrpc":"2.0","id":"m1","result":"for the methodless request"}\n')
    assert field(c.recv_response("m1"), "result") == "for the methodless request"


@pytest.mark.clause("SB-I-24", "SB-6.1.1-2")
def test_notification_with_new_session_creates_the_session(bus):
    bus.start(instances=3)
    c = bus.client()
    c.notify("hello", session="by-notification")
    rec = bus.worker_log().wait_received(b'"by-notification"')
    for _ in range(4):
        c.request()  # move the round-robin cursor
    assert pid_of(c.request(session="by-notification")) == rec.pid


@pytest.mark.clause("SB-I-44")
def test_cancellation_of_a_request_the_daemon_never_saw_is_forwarded(bus):
    # The daemon does not inspect notifications/cancelled: one naming a request
    # it never carried goes to the session's worker like any session notification.
    bus.start(instances=2)
    c = bus.client()
    home = pid_of(c.request(session="s"))
    line = c.notify("notifications/cancelled", params={"requestId": "never-sent", "reason": "test"}, session="s")
    c.sync(session="s")  # the session's worker has read everything sent before
    got = [(r.pid, r.line) for r in bus.worker_log().select("in") if b'"never-sent"' in r.raw]
    assert got == [(home, line)], f"the cancellation reached {got}, not (only) the session's worker {home}"


# -- our readings of the round-robin (SPEC.md SB-I-11, SB-I-30) ----------------------------
def periodic_distinct(seq, period):
    """seq repeats with this period, and each period holds distinct items."""
    return all(seq[i] == seq[i + period] for i in range(len(seq) - period)) and \
        len(set(seq[:period])) == period


@pytest.mark.clause("SB-I-30")
def test_new_sessions_and_messages_without_one_share_one_cursor(bus):
    bus.start(instances=3)
    c = bus.client()
    picks = []
    for k in range(3):  # a new session, then a message without one, in turn
        picks.append(pid_of(c.request(session=f"cursor-{k}")))
        picks.append(pid_of(c.request()))
    check("SB-I-30", periodic_distinct(picks, 3),
          lambda: f"workers chosen in turn {picks}: not one cursor over three workers")


@pytest.mark.clause("SB-I-11")
def test_the_round_robin_goes_through_the_pools_in_configuration_order(bus):
    # three pools of one worker: with two, any order of pools is a rotation of the other
    bus.start(pools=[bus.pool("a", 1), bus.pool("b", 1), bus.pool("c", 1)])
    c = bus.client()
    pids = [pid_of(c.request()) for _ in range(6)]
    owner = {pid: name for name in "abc" for pid in bus.worker_log(name).pids()}
    pools = "".join(owner.get(pid, "?") for pid in pids)
    check("SB-I-11", pools in ("abcabc", "bcabca", "cabcab"),
          lambda: f"pools chosen in turn {pools}: not a, b, c in their configuration order")


@pytest.mark.clause("SB-I-11")
def test_several_pools_are_one_round_robin_in_configuration_order(bus):
    bus.start(pools=[bus.pool("p", 2), bus.pool("q", 1)])
    c = bus.client()
    pids = [pid_of(c.request()) for _ in range(6)]
    q = set(bus.worker_log("q").pids())
    pools = ["q" if pid in q else "p" for pid in pids]
    rotations = [["p", "p", "q"][i:] + ["p", "p", "q"][:i] for i in range(3)]
    check("SB-I-11", periodic_distinct(pids, 3) and pools[:3] in rotations,
          lambda: f"workers chosen {pids} (pools {pools}): not one round-robin over p's two and q's one")
