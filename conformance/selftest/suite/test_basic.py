"""The clause tests the self-tests run against fake_daemon.py, citing the
tiny selftest/data/SPEC.md. Each --break of the fake makes some fail."""

import pytest


@pytest.mark.clause("SB-4.3-1")
def test_malformed_line_closes_the_client(bus):
    bus.start(instances=1)
    c = bus.client()
    c.send(b"{not json\n")
    c.expect_closed()


@pytest.mark.clause("SB-4.3-2")
def test_malformed_line_is_logged(bus):
    d = bus.start(instances=1)
    c = bus.client()
    c.send(b"{not json\n")
    d.wait_stderr("malformed")


@pytest.mark.clause("SB-6.1-1")
def test_response_reaches_the_client(bus):
    bus.start(instances=2)
    c = bus.client()
    assert c.request("hello", {"x": 1})["result"]["params"] == {"x": 1}


@pytest.mark.modes("unix")
@pytest.mark.clause("SB-6.1-2")
def test_round_robin(bus):
    bus.start(instances=2)
    c = bus.client()
    pids = [c.request()["result"]["pid"] for _ in range(4)]
    assert pids[0] != pids[1] and pids[:2] == pids[2:], pids


@pytest.mark.modes("stdio", "tcp")
@pytest.mark.clause("SB-I-1")
def test_non_object_closes_the_client(bus):
    bus.start(instances=1)
    c = bus.client()
    c.send(b"[1, 2]\n")
    c.expect_closed()
