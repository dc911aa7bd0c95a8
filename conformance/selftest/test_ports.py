"""The TCP ports daemons under test get (daemon/ports.py): never one an outgoing
connection can hold, never one another harness holds."""

import os
import socket
import subprocess
import sys
from pathlib import Path

from stdio_bus_conformance.daemon import ports
from stdio_bus_conformance.daemon.ports import PortLease


def test_a_leased_port_is_outside_the_ephemeral_range():
    low, high = ports._ephemeral_range()
    for _ in range(20):
        lease = PortLease("127.0.0.1")
        try:
            assert not low <= lease.port <= high
        finally:
            lease.release()


def test_a_port_leased_in_another_process_is_not_handed_out_again(monkeypatch):
    held = subprocess.Popen([sys.executable, "-c",
                             "import sys; from stdio_bus_conformance.daemon.ports import PortLease\n"
                             "leases = [PortLease('127.0.0.1') for _ in range(200)]\n"
                             "print(' '.join(str(l.port) for l in leases), flush=True); sys.stdin.read()"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                            env=dict(os.environ, PYTHONPATH=str(Path(ports.__file__).parents[2])))
    try:
        theirs = set(map(int, held.stdout.readline().split()))
        assert len(theirs) == 200
        # offered nothing but the ports the other process holds, a lease takes none of them
        monkeypatch.setattr(ports, "_candidates", lambda: sorted(theirs))
        mine = PortLease("127.0.0.1")
        mine.release()
        assert mine.port not in theirs
    finally:
        held.stdin.close()
        held.wait(10)


def test_a_port_something_listens_on_is_skipped(monkeypatch):
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        taken = listener.getsockname()[1]
        listener.listen()
        monkeypatch.setattr(ports, "_candidates", lambda: range(taken, taken + 2))
        lease = PortLease("127.0.0.1")
        try:
            assert lease.port != taken
        finally:
            lease.release()
