"""Ctrl-C during a run (issue 13 item 6): exit 2, the tests that did not
finish are `unfinished` (never `pass`), the reports are written, and no
process of the daemon is left behind."""

import json
import os
import signal
import subprocess
import time

import pytest

from conftest import PYTHON, RUN_PY, SPEC, write_suite
from test_bounds import leftovers, no_leftovers, private_fake

SLOW = '''
from stdio_bus_conformance import DaemonTimeout, wait_until

@pytest.mark.modes("unix")
@pytest.mark.clause("SB-6.1-1")
@pytest.mark.parametrize("n", range(8))
def test_slow(bus, n):
    bus.start(instances=1)
    bus.client().request()
    with pytest.raises(DaemonTimeout):  # a wait that lasts 1.5 s
        wait_until(lambda: False, 1.5)
'''


@pytest.mark.parametrize("jobs", [1, 2])
def test_ctrl_c_exits_2_and_never_reports_an_unfinished_test_as_passed(tmp_path, fakes, jobs):
    fake = private_fake(tmp_path)
    suite = write_suite(tmp_path / "suite", SLOW)
    prof = tmp_path / "p.toml"
    prof.write_text('name = "fake"\n')
    res = tmp_path / "res"
    cmd = [PYTHON, str(RUN_PY), "--daemon", str(fake), "--mock-worker", str(fakes["fake_worker.py"]),
           "--profile", str(prof), "--spec", str(SPEC), "--tests-dir", str(suite), "--report-dir", str(res),
           "-j", str(jobs), "--no-coverage-gate", "--no-preflight"]
    # its own session, like a shell job: Ctrl-C reaches the whole group
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=tmp_path,
                         start_new_session=True)
    try:
        # each test starts its own daemon: once more daemons than jobs have
        # been seen, at least one test has finished and the run is in another
        seen, deadline = set(), time.monotonic() + 60
        while len(seen) <= jobs and p.poll() is None and time.monotonic() < deadline:
            seen.update(leftovers(str(fake)))
            time.sleep(0.02)  # /proc has no change notification: poll it until the deadline
        assert len(seen) > jobs, f"daemons seen: {sorted(seen)}"
        os.killpg(p.pid, signal.SIGINT)
        out, _ = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
    assert p.returncode == 2, out
    data = json.loads((res / "results.json").read_text())
    outcomes = [t["outcome"] for t in data["tests"]]
    assert len(outcomes) < 8, outcomes  # it did stop
    assert "unfinished" in outcomes, outcomes
    assert outcomes.count("pass") + outcomes.count("unfinished") == len(outcomes), outcomes
    assert any("interrupted" in r for r in data["exit_reasons"]), data["exit_reasons"]
    assert no_leftovers(str(fake)) == []
