"""What the daemon does with hostile or unusual peers and signals (issue 14):
signals other than SIGTERM/SIGINT (SB-I-45), a socket path another daemon
took over (SB-I-22), a client that half-closes (SB-I-41), a worker that
closes its stdout and keeps running (SB-I-46), requests left behind by
clients that disconnected (SB-I-47)."""

import os
import signal

import pytest

from stdio_bus_conformance import procinfo


# -- SB-I-45 signals that do not stop the daemon, and SIGQUIT -----------------------------
@pytest.mark.clause("SB-I-45")
@pytest.mark.parametrize("signo", [signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2],
                         ids=["SIGHUP", "SIGUSR1", "SIGUSR2"])
def test_hup_and_usr_signals_change_nothing(bus, signo):
    d = bus.start(pools=[bus.pool("p", 2, args=["--on-eof", "stay"])])
    c = bus.client()
    first = c.request(session="kept")["result"]["pid"]
    d.signal(signo)
    # The signal is delivered before the daemon can read anything more: an
    # answer now proves it survived, the same worker proves the session did.
    assert c.request(session="kept")["result"]["pid"] == first
    d.signal(signo)
    assert c.request(session="kept")["result"]["pid"] == first
    assert d.running
    assert bus.worker_log().select("signal") == [], "a worker was signalled"


@pytest.mark.clause("SB-I-45", "SB-10.2-2", "SB-10.2-6")
def test_sigquit_is_a_graceful_shutdown(bus):
    d = bus.start(pools=[bus.pool("p", 2, args=["--on-eof", "stay"])])
    bus.client().request()
    pids = bus.worker_pids()
    d.signal(signal.SIGQUIT)
    assert d.wait_exit() == 0, "SIGQUIT did not end the daemon like SIGTERM"
    got = {r.pid: r.raw for r in bus.worker_log().select("signal") if r.pid in pids}
    assert sorted(got) == sorted(pids) and set(got.values()) == {b"TERM"}, \
        f"workers that logged a signal: {got} of {pids}"
    assert [p for p in pids if procinfo.exists(p)] == [], "a worker outlived the daemon"
    if d.mode == "unix":
        assert not os.path.lexists(d.socket_path), "the socket file is left behind"


# -- SB-I-22 the socket file is removed only while it is still the daemon's own --------
@pytest.mark.modes("unix")
@pytest.mark.clause("SB-I-22")
def test_socket_path_taken_over_by_another_daemon_is_left_to_it(bus):
    first = bus.start(pools=[bus.pool("first", 1)])
    os.unlink(first.socket_path)  # someone removed the file...
    second = bus.start(pools=[bus.pool("second", 1)])  # ...and another daemon took the path
    assert first.socket_path == second.socket_path
    first.signal(signal.SIGTERM)
    assert first.wait_exit() == 0
    assert os.path.lexists(second.socket_path), \
        "the daemon that exited removed the socket file of the daemon now on that path"
    assert bus.client().request()["result"]["pool"] == "second"
    second.signal(signal.SIGTERM)
    assert second.wait_exit() == 0
    assert not os.path.lexists(second.socket_path), "the socket file is left behind"
