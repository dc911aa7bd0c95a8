"""Our daemon against hostile peers and a hostile environment (issue 14):
workers that misbehave at exit, clients that vanish while paused, too few
file descriptors, a stderr nobody reads. Each test names the defect it
guards against; the spec-visible decisions live in
conformance/tests/test_hostile.py."""
import os
import re
import shutil
import stat

import pytest

from busproc import SCALE, WRAPPER, Daemon
from test_stdio_mode import mock_pool


def sh_pool(script, pool_id="sh", instances=1):
    return {"id": pool_id, "command": "/bin/sh", "args": ["-c", script], "instances": instances}


# -- signals only to workers not yet reaped (issue 14, item 6) --------------------------
@pytest.mark.skipif(not shutil.which("strace"), reason="needs strace")
def test_no_signal_to_a_worker_already_reaped(daemon_bin, write_config, tmp_path):
    # Each start writes a malformed line and exits at once: the exit is
    # usually reaped before the line is read, and the line then fails a
    # worker that no longer exists. Its pid may already belong to someone else.
    cfg = {"pools": [sh_pool("echo 'not json'; exit 0")],
           "limits": {"restart_backoff_ms": 20, "restart_backoff_max_ms": 20,
                      "max_restarts": 6, "restart_window_sec": 60}}
    trace = tmp_path / "kill.trace"
    d = Daemon(daemon_bin, write_config(cfg), tmp_path,
               wrap=["strace", "-qq", "-o", str(trace), "-e", "trace=kill", "-e", "signal=none"])
    try:
        d.wait_stderr("not restarting", timeout=20)
        assert d.stderr().count("malformed output") >= 1
        d.close_stdin()
        assert d.wait() == 0
    finally:
        d.kill()
    calls = trace.read_text()
    assert "ESRCH" not in calls, f"kill() aimed at a process already reaped:\n{calls}"
