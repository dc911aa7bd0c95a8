"""Stdio mode end to end: routing under load, pass-through, stdin EOF (SB-I-5)."""
import json
import threading
import time
from collections import defaultdict

from busproc import Daemon


def mock_pool(mock_bin, log, instances, pool_id="echo", extra=()):
    return {"id": pool_id, "command": mock_bin, "args": ["--log", str(log), *extra],
            "instances": instances}


def read_worker_log(path):
    """Mock log records: (ns, pid, worker, dir, raw line bytes).

    Workers append while we read, and a reader can catch a record half
    copied: only the records up to the last newline are whole."""
    records = []
    data = path.read_bytes()
    for raw in data[:data.rfind(b"\n") + 1].split(b"\n"):
        if not raw:
            continue
        ns, pid, worker, direction, line = raw.split(b" ", 4)
        records.append((int(ns), int(pid), worker.decode(), direction.decode(), line))
    return records


def test_10000_requests_over_4_workers_and_100_sessions(daemon_bin, mock_bin, write_config, tmp_path):
    log = tmp_path / "workers.log"
    cfg = {"pools": [mock_pool(mock_bin, log, 4)]}
    d = Daemon(daemon_bin, write_config(cfg), tmp_path)
    try:
        sent = {}
        lines = []
        for i in range(10000):
            session = f"s{i % 100}"
            # varied but valid spacing: the daemon must not reformat anything
            line = (f'{{"jsonrpc":"2.0", "id":{i},"method":"m/{i}",'
                    f' "params":{{"n":{i},"text":"ünï\\u00e9 {i}"}},"sessionId":"{session}"}}\n').encode()
            sent[i] = line
            lines.append(line)

        # At most 1,000 in flight: well under STDIO_BUS_MAX_PENDING_REQUESTS
        # (4096), beyond which requests are refused by design (SB-I-18).
        window = threading.Semaphore(1000)

        def write_all():
            for line in lines:
                window.acquire()
                d.send(line)

        writer = threading.Thread(target=write_all, daemon=True)
        writer.start()
        got = {}
        worker_of_session = defaultdict(set)
        for _ in range(10000):
            line = d.stdout.line(timeout=30)
            assert line is not None, "daemon closed stdout early"
            msg = json.loads(line)
            window.release()
            assert msg["id"] not in got, f"duplicate response for id {msg['id']}"
            got[msg["id"]] = line
            worker_of_session[msg["sessionId"]].add(msg["result"]["worker"])
            assert msg["sessionId"] == f"s{msg['id'] % 100}"
        writer.join()
        assert sorted(got) == list(range(10000))
        # SB-6.1.2-1: every session stayed on one worker; all 4 workers served
        assert all(len(ws) == 1 for ws in worker_of_session.values())
        assert len({next(iter(ws)) for ws in worker_of_session.values()}) == 4

        d.close_stdin()
        assert d.stdout.wait_eof(timeout=10) == b""  # nothing else on stdout
        assert d.wait(10) == 0
    finally:
        d.kill()

    # Byte-exact both ways (SB-4.2.3-3, SB-5.1.1-3): what each worker read is
    # exactly what was sent; what the client read is exactly what workers wrote.
    records = read_worker_log(log)
    received = sorted(r[4] + b"\n" for r in records if r[3] == "in")
    assert received == sorted(sent.values())
    written = sorted(r[4] + b"\n" for r in records if r[3] == "out")
    assert written == sorted(got.values())


def test_stdin_eof_delivers_in_flight_responses_then_exits_zero_without_spinning(
        daemon_bin, mock_bin, write_config, tmp_path):
    cfg = {"pools": [mock_pool(mock_bin, tmp_path / "w.log", 2)],
           "limits": {"drain_timeout_sec": 20}}
    d = Daemon(daemon_bin, write_config(cfg), tmp_path)
    try:
        for i in range(6):
            d.send_json({"jsonrpc": "2.0", "id": i, "method": "slow",
                         "params": {"mock": {"delay_ms": 1500}}})
        d.close_stdin()
        d.wait_stderr("stdin reached EOF", timeout=5)
        cpu_before = d.cpu_seconds()
        t0 = time.monotonic()
        got = [json.loads(d.stdout.line(timeout=10)) for _ in range(6)]
        waited = time.monotonic() - t0
        cpu_used = d.cpu_seconds() - cpu_before
        assert sorted(m["id"] for m in got) == list(range(6))
        assert d.wait(10) == 0
        # The daemon slept in poll() while the workers worked: a busy loop
        # would burn about `waited` seconds of CPU.
        assert waited > 0.5
        assert cpu_used < 0.1, f"daemon used {cpu_used:.3f}s CPU while waiting {waited:.2f}s"
    finally:
        d.kill()


def test_stdout_carries_only_forwarded_messages(daemon_bin, mock_bin, write_config, tmp_path):
    cfg = {"pools": [mock_pool(mock_bin, tmp_path / "w.log", 1)]}
    d = Daemon(daemon_bin, write_config(cfg), tmp_path, args=["--log-level", "debug"])
    try:
        req = d.send_json({"jsonrpc": "2.0", "id": "a", "method": "x"})
        d.send(b'{"jsonrpc":"2.0","method":"note"}\n')
        resp = d.stdout.line()
        assert json.loads(resp)["id"] == "a"
        d.close_stdin()
        assert d.stdout.wait_eof() == b""
        assert d.wait() == 0
        err = d.stderr()
        assert " DEBUG " in err and " INFO " in err  # the logs went to stderr
        # the worker got the request byte for byte (its log: "<ns> <pid> <id> in <raw>")
        records = [r.split(b" ", 4) for r in (tmp_path / "w.log").read_bytes().splitlines()]
        received = [r[4] + b"\n" for r in records if len(r) == 5 and r[3] == b"in"]
        assert req in received, f"the worker did not receive {req!r}: {received}"
    finally:
        d.kill()
