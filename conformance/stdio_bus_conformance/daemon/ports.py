"""TCP ports for daemons under test, leased so that no two harnesses on the
machine hand out the same one while it is in use.

A port taken with bind(port 0) and given back comes from the kernel's
ephemeral range, the range every outgoing connection's local port comes from
too: on a busy machine another test's client could take it before the daemon
binds it (seen in CI: "Address already in use" in a daemon of one run, a
verdict that depended on the machine's load). So a port is chosen below that
range, where the kernel never puts an outgoing connection, and leased with a
lock file under the temporary directory: the lock is held until the daemon is
finished (or the harness process ends, which releases it), so parallel test
workers and parallel runs (the busy runs, CI's lanes) never pick the same one.
A port something else on the machine listens on fails the probe bind and is
skipped.
"""

from __future__ import annotations

import fcntl
import os
import random
import socket
import tempfile
from pathlib import Path

LEASE_DIR = Path(tempfile.gettempdir()) / "stdio-bus-conformance-ports"
LOWEST = 20000      # below: ports services and other tools are more likely to use


def _ephemeral_range() -> tuple[int, int]:
    try:
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return 32768, 60999  # Linux's default


def _candidates() -> range | None:
    low, high = _ephemeral_range()
    if low - LOWEST >= 1000:
        return range(LOWEST, low)
    if 65535 - high >= 1000:
        return range(high + 1, 65536)
    return None


def bindable(host: str, port: int) -> bool:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


class PortLease:
    """One port, free when leased and not handed to anyone else until release()."""

    def __init__(self, host: str):
        self.port = 0
        self._fd: int | None = None
        ports = _candidates()
        if ports is not None:
            LEASE_DIR.mkdir(exist_ok=True)
            start = random.randrange(len(ports))
            for i in range(min(len(ports), 500)):
                port = ports[(start + i) % len(ports)]
                if self._lock(port) and bindable(host, port):
                    self.port = port
                    return
                self.release()
        # no range outside the ephemeral one, or all of it busy: the kernel's choice
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        with socket.socket(family, socket.SOCK_STREAM) as s:
            s.bind((host, 0))
            self.port = s.getsockname()[1]

    def _lock(self, port: int) -> bool:
        fd = os.open(LEASE_DIR / f"{port}.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            return False
        self._fd = fd
        return True

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
