"""Exit codes and outcomes: 0 all pass (warnings allowed), 1 a MUST failure,
2 anything that makes the run untrustworthy. Unlike h2spec, a run in which
nothing ran is never a success."""

from conftest import write_suite


def test_all_pass_exits_0_and_ends_with_the_summary_line(harness):
    run = harness()
    assert run.rc == 0, run.output
    s = run.results["summary"]
    assert s["pass"] == s["total"] == 12 and s["fail"] == 0
    assert run.last_line == "12 passed, 0 failed"


def test_must_failure_exits_1(harness):
    run = harness(breaks=["keep-malformed"])
    assert run.rc == 1, run.output
    assert run.outcome_of("test_malformed_line_closes_the_client") == {"fail"}
    # the SHOULD test that also breaks is a warning, not a failure
    assert run.outcome_of("test_malformed_line_is_logged") == {"warn"}
    assert run.last_line == "6 passed, 3 failed, 3 warned"


def test_should_failure_alone_warns_and_exits_0(harness):
    run = harness(breaks=["quiet"])
    assert run.rc == 0, run.output
    assert run.outcome_of("test_malformed_line_is_logged") == {"warn"}
    assert run.results["summary"]["warn"] == 3 and run.results["summary"]["fail"] == 0


def test_may_failure_alone_warns(harness):
    # without the preflight: its two-pools item judges round robin on the real
    # spec's MUST (SB-6.1.3-1), while this spec makes it a MAY
    run = harness("--no-preflight", breaks=["no-round-robin"])
    assert run.rc == 0, run.output
    assert run.outcome_of("test_round_robin") == {"warn"}
    assert run.results["preflight"] is None


def test_daemon_that_cannot_start_fails_and_is_not_a_harness_error(harness):
    """The preflight finds that it does not start, in each mode: one root cause
    per mode, on its own clause; every test is blocked, none fails or errs."""
    run = harness(breaks=["crash-on-start"])
    assert run.rc == 1, run.output
    assert set(run.outcomes.values()) == {"blocked"}
    causes = {rc["item"]: rc for rc in run.results["root_causes"]}
    assert set(causes) == {"start-stdio", "start-unix", "start-tcp"}
    assert "exited with status 3" in causes["start-unix"]["message"]
    assert sum(rc["blocked"] for rc in causes.values()) == 12


def test_missing_mock_worker_is_a_harness_error(harness, tmp_path):
    run = harness(mock=tmp_path / "no-such-mock")
    assert run.rc == 2, run.output
    assert set(run.outcomes.values()) == {"harness-error"}
    assert "mock worker not found" in run.results["tests"][0]["message"]


def test_missing_daemon_exits_2(harness, tmp_path):
    run = harness(daemon=tmp_path / "no-such-daemon")
    assert run.rc == 2, run.output
    assert any("daemon not found" in e for e in run.results["fatal_errors"])


def test_bug_in_test_code_is_a_harness_error_not_a_failure(harness, tmp_path):
    suite = write_suite(tmp_path / "suite", '''
@pytest.mark.clause("SB-6.1-1")
def test_buggy(bus):
    bus.start(instances=1)
    reply = bus.client().request()
    assert reply["no-such-member"]  # KeyError: the test's fault, not the daemon's
''')
    run = harness("--no-coverage-gate", tests=suite)
    assert run.rc == 2, run.output
    assert run.outcome_of("test_buggy") == {"harness-error"}
    assert "KeyError" in run.results["tests"][0]["message"]


def test_per_test_timeout_is_a_harness_error(harness, tmp_path):
    suite = write_suite(tmp_path / "suite", '''
import time

@pytest.mark.modes("stdio")
@pytest.mark.clause("SB-6.1-1")
def test_hangs(bus):
    bus.start(instances=1)
    time.sleep(30)  # a wait without a deadline: the harness's bug
''')
    run = harness("--no-coverage-gate", "--timeout", "1", tests=suite)
    assert run.rc == 2, run.output
    assert run.outcome_of("test_hangs") == {"harness-error"}


def test_unsupported_modes_are_not_passes(harness):
    run = harness(profile='modes = ["stdio"]\n')
    assert run.rc == 0, run.output
    s = run.results["summary"]
    assert s["unsupported"] == 8 and s["pass"] == 4, s
    assert run.outcome_of("[unix]") == {"unsupported"} and run.outcome_of("[tcp]") == {"unsupported"}
    assert run.last_line == "4 passed, 0 failed, 8 unsupported"


def test_nothing_ran_exits_2(harness):
    run = harness(profile="modes = []\n")
    assert run.rc == 2, run.output
    assert "no test ran" in " ".join(run.results["exit_reasons"])


def test_nothing_selected_exits_2(harness):
    run = harness("--clause", "SB-9.*")
    assert run.rc == 2, run.output
    assert run.results["summary"]["total"] == 0


def test_fewer_tests_than_min_tests_exits_2(harness):
    run = harness("--min-tests", "13")
    assert run.rc == 2, run.output
    assert "--min-tests" in " ".join(run.results["exit_reasons"])
    assert harness("--min-tests", "12").rc == 0


def test_parallel_run_gives_the_same_outcomes(harness):
    serial = harness(breaks=["keep-malformed"])
    parallel = harness(breaks=["keep-malformed"], jobs=2)
    assert parallel.rc == serial.rc == 1
    assert parallel.outcomes == serial.outcomes
    # the coverage inventory comes back from the xdist workers too
    assert parallel.results["coverage"]["sections"] == serial.results["coverage"]["sections"]
