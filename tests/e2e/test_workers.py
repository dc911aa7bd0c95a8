"""Worker lifecycle of our daemon: restart schedule, give-up, orphan policy,
stderr relay, environment (SB-7.1, SB-I-7..SB-I-10, SB-I-13, Extensions)."""
import json
import time

from busproc import SCALE, Daemon
from test_stdio_mode import mock_pool, read_worker_log


def starts_and_exits(log, worker):
    recs = [r for r in read_worker_log(log) if r[2] == worker]
    return [r[0] for r in recs if r[3] == "start"], recs


def test_crash_loop_backs_off_exponentially_then_gives_up_while_siblings_serve(
        daemon_bin, mock_bin, write_config, tmp_path):
    crash_log, ok_log = tmp_path / "crash.log", tmp_path / "ok.log"
    cfg = {"pools": [mock_pool(mock_bin, crash_log, 1, "crashy", ["--after", "1", "--exit-status", "3"]),
                     mock_pool(mock_bin, ok_log, 2, "ok")],
           "limits": {"max_restarts": 3, "restart_window_sec": 60,
                      "restart_backoff_ms": 200, "restart_backoff_max_ms": 10000},
           # a request may reach the crashed worker before its exit is reaped:
           # it is then answered with an error instead of lost
           "orphan_policy": "error"}
    d = Daemon(daemon_bin, write_config(cfg), tmp_path)
    try:
        by_pool = {"ok": 0, "crashy": 0}
        deadline = time.monotonic() + 20
        i = 0
        while "not restarting" not in d.stderr():
            assert time.monotonic() < deadline, d.stderr()[-2000:]
            d.send_json({"jsonrpc": "2.0", "id": i, "method": "ping"})
            msg = json.loads(d.stdout.line(timeout=10))
            assert msg["id"] == i
            i += 1
            if "result" in msg:
                by_pool[msg["result"]["pool"]] += 1
            else:
                assert msg["error"]["code"] == -32000
        # after giving up, every request lands on the siblings
        for j in range(20):
            d.send_json({"jsonrpc": "2.0", "id": f"after{j}", "method": "ping"})
            msg = json.loads(d.stdout.line(timeout=10))
            assert msg["result"]["pool"] == "ok"
        # the first start and 3 restarts each answered one message, then exited
        assert by_pool["crashy"] == 4 and by_pool["ok"] >= 4
        d.close_stdin()
        assert d.wait(10) == 0
    finally:
        d.kill()

    starts, recs = starts_and_exits(crash_log, "0")
    assert len(starts) == 4, recs
    exits = [r[0] for r in recs if r[3] == "exit"]
    delays_ms = [(starts[k + 1] - exits[k]) / 1e6 for k in range(3)]
    # SB-7.1.3-2: 200, 400, 800 ms (+ scheduling slack), each longer than the last
    for got, want in zip(delays_ms, (200, 400, 800)):
        assert want * 0.95 <= got <= want + 400 * SCALE, delays_ms
    assert delays_ms[0] < delays_ms[1] < delays_ms[2]


def test_orphaned_requests_get_error_replies_when_asked(daemon_bin, mock_bin, write_config, tmp_path):
    cfg = {"pools": [mock_pool(mock_bin, tmp_path / "w.log", 1)],
           "limits": {"restart_backoff_ms": 50}, "orphan_policy": "error"}
    d = Daemon(daemon_bin, write_config(cfg), tmp_path)
    try:
        d.send_json({"jsonrpc": "2.0", "id": 1, "method": "slow", "sessionId": "s",
                     "params": {"mock": {"delay_ms": 60000}}})
        d.send_json({"jsonrpc": "2.0", "id": 2, "method": "die", "params": {"mock": {"exit": 0}}})
        replies = {m["id"]: m for m in (json.loads(d.stdout.line()) for _ in range(2))}
        assert replies[1]["error"]["code"] == -32000 and replies[1]["sessionId"] == "s"
        assert replies[2]["error"]["message"] == "stdio_bus: worker exited"
        # SB-I-9: exit status 0 is unexpected too: the worker comes back
        d.wait_stderr("restarting in 50 ms")
        d.wait_stderr("] started", count=2)
        d.send_json({"jsonrpc": "2.0", "id": 3, "method": "ping"})
        assert json.loads(d.stdout.line())["result"]["method"] == "ping"
    finally:
        d.kill()


def test_default_policy_discards_orphans_with_a_warning(daemon_bin, mock_bin, write_config, tmp_path):
    cfg = {"pools": [mock_pool(mock_bin, tmp_path / "w.log", 1)], "limits": {"restart_backoff_ms": 50}}
    d = Daemon(daemon_bin, write_config(cfg), tmp_path)
    try:
        d.send_json({"jsonrpc": "2.0", "id": 1, "method": "slow", "params": {"mock": {"delay_ms": 60000}}})
        d.send_json({"jsonrpc": "2.0", "id": 2, "method": "die", "params": {"mock": {"signal": "KILL"}}})
        err = d.wait_stderr("discarded: worker exited", count=2)
        assert "killed by signal 9" in err
        d.wait_stderr("] started", count=2)
        d.send_json({"jsonrpc": "2.0", "id": 3, "method": "ping"})
        assert json.loads(d.stdout.line())["id"] == 3  # nothing came for 1 and 2
    finally:
        d.kill()


def test_worker_environment_and_stderr_relay(daemon_bin, mock_bin, write_config, tmp_path):
    cfg = {"pools": [mock_pool(mock_bin, tmp_path / "a.log", 1, "alpha"),
                     mock_pool(mock_bin, tmp_path / "b.log", 2, "beta")]}
    d = Daemon(daemon_bin, write_config(cfg), tmp_path)
    try:
        seen = set()
        for i in range(3):  # SB-I-11: round-robin over all pools in config order
            d.send_json({"jsonrpc": "2.0", "id": i, "method": "who"})
            r = json.loads(d.stdout.line())["result"]
            seen.add((r["worker"], r["pool"]))
        assert seen == {("0", "alpha"), ("1", "beta"), ("2", "beta")}  # SB-I-13
    finally:
        d.kill()


def test_worker_stderr_lines_are_relayed_with_the_worker_context(daemon_bin, write_config, tmp_path):
    script = "printf 'first line\\nsecond line\\npartial' >&2; exec cat"
    cfg = {"pools": [{"id": "sh", "command": "/bin/sh", "args": ["-c", script], "instances": 1}]}
    d = Daemon(daemon_bin, write_config(cfg), tmp_path)
    try:
        err = d.wait_stderr("stderr: second line")
        assert "[worker 0 pool=sh pid=" in err and "] stderr: first line" in err
        d.close_stdin()
        assert d.wait() == 0
        assert "stderr: partial" in d.stderr()  # SB-I-7: the tail is relayed at exit
        assert d.stdout.wait_eof() == b""  # never on stdout
    finally:
        d.kill()
