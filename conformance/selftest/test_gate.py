"""Gate on the spec (issue 22 item 2): a failure of our interpretations
(SB-I, our readings where the seed is silent) is reported everywhere but
does not fail the run of a daemon that is not held to our readings; --strict
or the profile's gate_interpretations = true (ours) gates it. The decision
is a plain function of plain data (reports/outcomes.py), tested first
without a run, then end to end."""

import xml.etree.ElementTree as ET

import pytest

from conftest import write_suite
from stdio_bus_conformance.reports.outcomes import EXIT_FAIL, EXIT_OK, gates, ungated_failures, verdict


# -- the plain functions ---------------------------------------------------------------
def test_only_interpretations_are_left_ungated():
    assert not gates("interpretation", gate_interpretations=False)
    assert gates("interpretation", gate_interpretations=True)
    for t in ("spec", "extension", None):
        assert gates(t, gate_interpretations=False)


def test_ungated_failures_counts_interpretation_fails_only():
    pairs = [("fail", "interpretation"), ("fail", "spec"), ("warn", "interpretation"),
             ("xfail", "interpretation"), ("fail", "interpretation")]
    assert ungated_failures(pairs, gate_interpretations=False) == 2
    assert ungated_failures(pairs, gate_interpretations=True) == 0


def _verdict(fail, ungated, **kw):
    return verdict({"pass": 3, "fail": fail}, collection_errors=0, fatal=[], stale=[], gate_failures=[],
                   min_tests=0, nothing_selected=False, ungated=ungated, **kw)


def test_a_run_whose_only_failures_are_ungated_exits_0_and_says_why():
    v = _verdict(2, 2)
    assert v.exit_code == EXIT_OK and v.reasons == []
    assert v.notes and "2 failure(s) of our interpretations" in v.notes[0] and "not gated" in v.notes[0]


def test_gated_failures_still_fail_beside_ungated_ones():
    v = _verdict(3, 2)
    assert v.exit_code == EXIT_FAIL and v.reasons == ["1 failure(s)"] and v.notes


def test_no_failure_no_note():
    v = _verdict(0, 0)
    assert v.exit_code == EXIT_OK and v.notes == []


# -- end to end ------------------------------------------------------------------------
INTERPRETATION_FAILS = '''
@pytest.mark.modes("unix")
@pytest.mark.clause("SB-I-1")
def test_our_reading_not_met(bus):
    bus.start(instances=1)
    bus.client().request()
    assert False, "the daemon reads the seed otherwise"

@pytest.mark.modes("unix")
@pytest.mark.clause("SB-6.1-1")
def test_spec_met(bus):
    bus.start(instances=1)
    bus.client().request()
'''


@pytest.fixture
def suite(tmp_path):
    return write_suite(tmp_path / "gate_suite", INTERPRETATION_FAILS)


def test_interpretation_failure_is_reported_but_does_not_fail_another_daemon(harness, suite):
    run = harness("--no-coverage-gate", tests=suite, profile='modes = ["unix"]\n')
    assert run.rc == 0, run.output
    t = {x["nodeid"].split("::")[1]: x for x in run.results["tests"]}
    fail = t["test_our_reading_not_met[unix]"]
    assert (fail["outcome"], fail["clause"], fail["tier"], fail["gated"]) == \
        ("fail", "SB-I-1", "interpretation", False)
    assert t["test_spec_met[unix]"]["gated"] is True
    assert run.results["gate"] == {"interpretations": False, "why": "default: reported, not gated"}
    assert run.results["exit_reasons"] == [] and "not gated" in run.results["exit_notes"][0]
    # the tier verdict line still counts it, and says it is not gated
    line = run.results["verdict"]["lines"][0]
    assert line.startswith("our interpretations") and "1 MUST clause fails" in line and "not gated" in line
    assert line in run.output and "note: 1 failure(s) of our interpretations" in run.output
    md = (run.report_dir / "report.md").read_text()
    assert "- note: 1 failure(s) of our interpretations" in md and "SB-I-1" in md
    # JUnit agrees with the exit status: no <failure>, the finding in <system-err> and a property
    root = ET.parse(run.report_dir / "junit.xml").getroot()
    case = next(c for c in root.iter("testcase") if c.get("name") == "test_our_reading_not_met[unix]")
    assert case.find("failure") is None
    assert "FAILURE, NOT GATED: SB-I-1" in case.find("system-err").text
    props = {x.get("name"): x.get("value") for x in root.iter("property")}
    assert props["not-gated:test_our_reading_not_met[unix]"].startswith("SB-I-1 (our interpretation, MUST)")
    assert sum(int(s.get("failures")) for s in root.iter("testsuite")) == 0


@pytest.mark.parametrize("how", ["profile", "strict"])
def test_interpretation_failure_fails_the_run_when_asked(harness, suite, how):
    args = ["--no-coverage-gate"] + (["--strict"] if how == "strict" else [])
    prof = 'modes = ["unix"]\n' + ("gate_interpretations = true\n" if how == "profile" else "")
    run = harness(*args, tests=suite, profile=prof)
    assert run.rc == 1, run.output
    assert run.results["exit_reasons"] == ["1 failure(s)"] and run.results["exit_notes"] == []
    assert run.results["gate"]["interpretations"] is True
    assert [x["gated"] for x in run.results["tests"] if x["outcome"] == "fail"] == [True]
    root = ET.parse(run.report_dir / "junit.xml").getroot()
    assert sum(int(s.get("failures")) for s in root.iter("testsuite")) == 1


def test_our_profile_gates_interpretations():
    from stdio_bus_conformance.daemon.profile import load_profile
    from conftest import CONFORMANCE as CONFORMANCE_DIR
    assert load_profile(CONFORMANCE_DIR / "profiles" / "stdio_bus.toml").gate_interpretations is True
    assert load_profile(None).gate_interpretations is False
    assert load_profile(CONFORMANCE_DIR / "profiles" / "foreign.toml").gate_interpretations is False
