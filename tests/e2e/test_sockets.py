"""Socket modes of our daemon (spec 4.1, SB-I-18, SB-I-22)."""
import json
import os
import resource
import socket
import stat
import subprocess

import pytest

from busproc import Daemon, SocketClient
from test_stdio_mode import mock_pool


@pytest.mark.parametrize("mode", ["unix", "tcp"])
def test_200_concurrent_clients_each_get_exactly_their_own_responses(
        daemon_bin, mock_bin, write_config, tmp_path, mode):
    cfg = {"pools": [mock_pool(mock_bin, tmp_path / "w.log", 4)]}
    d = Daemon(daemon_bin, write_config(cfg), tmp_path, mode=mode)
    try:
        clients = [d.connect() for _ in range(200)]
        # Every client uses the same ids: only the connection tells them apart (SB-I-3).
        for n, c in enumerate(clients):
            for i in range(5):
                c.send_json({"jsonrpc": "2.0", "id": i, "method": f"c{n}", "sessionId": f"c{n}-{i % 2}"})
        for n, c in enumerate(clients):
            got = sorted((m["id"], m["result"]["method"]) for m in (json.loads(c.line()) for _ in range(5)))
            assert got == [(i, f"c{n}") for i in range(5)]
        for c in clients:
            c.close()
        assert d.stop() == 0
    finally:
        d.kill()


def test_unix_socket_is_owner_only_and_removed_at_exit(daemon_bin, mock_bin, write_config, tmp_path):
    cfg = {"pools": [mock_pool(mock_bin, tmp_path / "w.log", 1)]}
    d = Daemon(daemon_bin, write_config(cfg), tmp_path, mode="unix")
    try:
        d.connect().close()
        assert stat.S_IMODE(os.stat(d.address).st_mode) == 0o600
        assert d.stop() == 0
        assert not os.path.exists(d.address)
    finally:
        d.kill()


def test_stale_socket_file_does_not_block_a_restart_but_a_live_daemon_does(
        daemon_bin, mock_bin, write_config, tmp_path):
    cfg = write_config({"pools": [mock_pool(mock_bin, tmp_path / "w.log", 1)]})
    path = str(tmp_path / "bus.sock")
    stale = socket.socket(socket.AF_UNIX)
    stale.bind(path)  # a socket file nobody listens on: a dead daemon's leftover
    stale.close()
    d = Daemon(daemon_bin, cfg, tmp_path, mode="unix")
    try:
        c = d.connect()
        c.send_json({"jsonrpc": "2.0", "id": 1, "method": "ping"})
        assert json.loads(c.line())["id"] == 1
        second = subprocess.run([daemon_bin, "--config", cfg, "--unix", path],
                                capture_output=True, timeout=10)
        assert second.returncode != 0
        assert b"another process is listening on it" in second.stderr
        c.send_json({"jsonrpc": "2.0", "id": 2, "method": "ping"})  # the first one is untouched
        assert json.loads(c.line())["id"] == 2
    finally:
        d.kill()


def test_tcp_binds_exactly_the_host_given(daemon_bin, mock_bin, write_config, tmp_path):
    cfg = {"pools": [mock_pool(mock_bin, tmp_path / "w.log", 1)]}
    d = Daemon(daemon_bin, write_config(cfg), tmp_path, mode="tcp")
    try:
        d.connect().close()
        port = d.address[1]
        d.wait_stderr(f"listening on tcp:127.0.0.1:{port}")
        other = socket.socket()
        with pytest.raises(OSError):
            other.connect(("127.0.0.2", port))  # 127.0.0.2 is loopback too, but not bound
        other.close()
    finally:
        d.kill()


def test_tcp_ipv6_literal(daemon_bin, mock_bin, write_config, tmp_path):
    cfg = write_config({"pools": [mock_pool(mock_bin, tmp_path / "w.log", 1)]})
    probe = socket.socket(socket.AF_INET6)
    try:
        probe.bind(("::1", 0))
    except OSError:
        pytest.skip("no IPv6 loopback on this machine")
    port = probe.getsockname()[1]
    probe.close()
    p = subprocess.Popen([daemon_bin, "--config", cfg, "--tcp", f"[::1]:{port}"],
                         stderr=subprocess.PIPE)
    try:
        import time
        deadline = time.monotonic() + 10
        while True:
            s = socket.socket(socket.AF_INET6)
            try:
                s.connect(("::1", port))
                break
            except ConnectionRefusedError:
                s.close()
                assert time.monotonic() < deadline
                time.sleep(0.01)
        c = SocketClient(s)
        c.send_json({"jsonrpc": "2.0", "id": 1, "method": "v6"})
        assert json.loads(c.line())["result"]["method"] == "v6"
    finally:
        p.terminate()
        assert p.wait(10) == 0


def test_connections_beyond_max_connections_are_closed_and_the_rest_served(
        daemon_bin, mock_bin, write_config, tmp_path):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard < 1200:
        pytest.skip("needs 1200 fds")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 1200), hard))
    cfg = {"pools": [mock_pool(mock_bin, tmp_path / "w.log", 1)]}
    d = Daemon(daemon_bin, write_config(cfg), tmp_path, mode="unix")
    try:
        clients = [d.connect() for _ in range(1024)]
        extra = d.connect()
        assert extra.reader.wait_eof(timeout=10) == b""  # accepted, then closed at once
        d.wait_stderr("MAX_CONNECTIONS (1024)")
        for n in (0, 511, 1023):
            clients[n].send_json({"jsonrpc": "2.0", "id": n, "method": "still"})
            assert json.loads(clients[n].line())["id"] == n
        clients[5].close()  # a slot frees up: a new client is served again
        d.wait_stderr("disconnected")
        again = d.connect()
        again.send_json({"jsonrpc": "2.0", "id": "again", "method": "x"})
        assert json.loads(again.line())["id"] == "again"
    finally:
        d.kill()
