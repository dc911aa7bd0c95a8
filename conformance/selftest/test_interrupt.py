"""Ctrl-C during a run (issue 13 item 6), and SIGTERM (issue 22 item 8: what
a CI sends on cancel, to the harness or to its whole group): exit 2, the
tests that did not finish are `unfinished` (never `pass`), the reports are
written, and no process is left behind (daemons, mock workers, xdist
workers)."""

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


def in_session(sid: int) -> list[int]:
    """Processes of the session sid (the run was started as its leader):
    whatever the harness started, xdist workers included, unless it left the
    session on purpose."""
    out = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[3]) == sid and fields[0] != "Z":
            out.append(int(name))
    return out


def session_gone(sid: int, timeout: float = 5.0) -> list[int]:
    deadline = time.monotonic() + timeout
    while (left := in_session(sid)) and time.monotonic() < deadline:
        time.sleep(0.01)  # /proc has no change notification: poll it until the deadline
    return left


@pytest.mark.parametrize("jobs,how", [(1, "ctrl-c"), (2, "ctrl-c"), (1, "sigterm"), (2, "sigterm"),
                                      (2, "sigterm-group")])
def test_interrupted_run_exits_2_and_never_reports_an_unfinished_test_as_passed(tmp_path, fakes, jobs, how):
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
            seen.update(set(leftovers(str(fake))) - {p.pid})  # run.py's own command line names it too
            time.sleep(0.02)  # /proc has no change notification: poll it until the deadline
        assert len(seen) > jobs, f"daemons seen: {sorted(seen)}"
        if how == "ctrl-c":       # a terminal's Ctrl-C reaches the whole group
            os.killpg(p.pid, signal.SIGINT)
        elif how == "sigterm":    # a CI's cancel to the harness alone
            os.kill(p.pid, signal.SIGTERM)
        else:                     # a CI's cancel to the job's process group
            os.killpg(p.pid, signal.SIGTERM)
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
    assert session_gone(p.pid) == []
