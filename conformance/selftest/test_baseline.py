"""Baselines: a listed failure is xfail and does not fail the run; a listed
test that passes (or no longer exists) is stale and fails it, named; a
failure that is not listed fails it."""

import json

import pytest

MALFORMED = "selftest/suite/test_basic.py::test_malformed_line_closes_the_client[{}]"


def baseline(path, tests, reason="the fake daemon ignores malformed lines"):
    path.write_text(json.dumps({"daemon": "fake", "expected_failures": [
        {"test": t, "clauses": ["SB-4.3-1"], "reason": reason} for t in tests]}))
    return path


def test_listed_failures_are_xfail_and_exit_0(harness, tmp_path):
    b = baseline(tmp_path / "b.json", [MALFORMED.format(m) for m in ("stdio", "unix", "tcp")])
    run = harness("--baseline", b, breaks=["keep-malformed"])
    assert run.rc == 0, run.output
    assert run.outcome_of("test_malformed_line_closes_the_client") == {"xfail"}
    assert run.results["baseline"]["stale"] == [] and run.results["baseline"]["new_failures"] == []


def test_failure_not_in_the_baseline_exits_1(harness, tmp_path):
    b = baseline(tmp_path / "b.json", [MALFORMED.format(m) for m in ("stdio", "unix")])
    run = harness("--baseline", b, breaks=["keep-malformed"])
    assert run.rc == 1, run.output
    assert run.results["baseline"]["new_failures"] == [MALFORMED.format("tcp")]
    assert f"new failure (not in the baseline): {MALFORMED.format('tcp')}" in run.output


def test_listed_test_that_passes_is_stale_and_exits_1(harness, tmp_path):
    b = baseline(tmp_path / "b.json", [MALFORMED.format("unix")])
    run = harness("--baseline", b)
    assert run.rc == 1, run.output
    assert run.results["baseline"]["stale"] == [{"test": MALFORMED.format("unix"), "why": "passed"}]
    assert f"stale baseline entry: {MALFORMED.format('unix')} (passed)" in run.output
    assert run.outcome_of(MALFORMED.format("unix")) == {"pass"}


def test_listed_test_that_does_not_exist_is_stale(harness, tmp_path):
    b = baseline(tmp_path / "b.json", ["selftest/suite/test_basic.py::test_gone[stdio]"])
    run = harness("--baseline", b)
    assert run.rc == 1, run.output
    assert run.results["baseline"]["stale"][0]["why"] == "no such test"


def test_write_baseline_then_run_against_it(harness, tmp_path):
    out = tmp_path / "written.json"
    first = harness("--write-baseline", out, breaks=["keep-malformed"])
    assert first.rc == 1
    data = json.loads(out.read_text())
    # the failing tests, and the preflight item that finds the same defect
    assert sorted(e["test"] for e in data["expected_failures"]) == \
        ["preflight::malformed"] + sorted(MALFORMED.format(m) for m in ("stdio", "unix", "tcp"))
    assert {e["reason"] for e in data["expected_failures"]} == {"TODO: explain"}
    assert all(e["clauses"] == ["SB-4.3-1"] for e in data["expected_failures"])
    # placeholders are refused until someone writes the reasons
    assert harness("--baseline", out, breaks=["keep-malformed"]).rc == 2
    for e in data["expected_failures"]:
        e["reason"] = "the fake daemon keeps malformed clients"
    out.write_text(json.dumps(data))
    again = harness("--baseline", out, breaks=["keep-malformed"])
    assert again.rc == 0, again.output


def test_baseline_entry_without_a_reason_is_rejected(harness, tmp_path):
    b = baseline(tmp_path / "b.json", [MALFORMED.format("stdio")], reason="")
    run = harness("--baseline", b)
    assert run.rc == 2, run.output
    assert any("needs a reason" in e for e in run.results["fatal_errors"])


# -- reasons required ------------------------------------------------------------------
@pytest.mark.parametrize("reason", ["TODO: explain", "FIXME", "tbd", "explain", "  "])
def test_placeholder_reason_makes_the_baseline_invalid(harness, tmp_path, reason):
    b = baseline(tmp_path / "b.json", [MALFORMED.format("stdio")], reason=reason)
    run = harness("--baseline", b, "--clause", "SB-6.1-1")
    assert run.rc == 2, run.output
    line = next(e for e in run.results["fatal_errors"] if MALFORMED.format("stdio") in e)
    assert "expected_failures[0]" in line and ("placeholder reason" in line or "needs a reason" in line)
    assert line in run.output  # the console names the entry too


# -- intermittent ------------------------------------------------------------------------
def test_intermittent_entry_accepts_a_pass_and_a_failure(harness, tmp_path):
    b = tmp_path / "b.json"
    b.write_text(json.dumps({"daemon": "fake", "expected_failures": [
        {"test": MALFORMED.format(m), "clauses": ["SB-4.3-1"], "reason": "races with the reader",
         "intermittent": True} for m in ("stdio", "unix", "tcp")]}))
    passing = harness("--baseline", b, "--clause", "SB-4.3-1")
    assert passing.rc == 0, passing.output  # a pass is not stale
    assert passing.results["baseline"]["stale"] == []
    assert {e["outcome"] for e in passing.results["baseline"]["intermittent"]} == {"pass"}
    assert f"intermittent (baseline accepts a pass or a failure): {MALFORMED.format('unix')} passed this time" \
        in passing.output
    failing = harness("--baseline", b, "--clause", "SB-4.3-1", breaks=["keep-malformed"])
    assert failing.rc == 0, failing.output
    assert {e["outcome"] for e in failing.results["baseline"]["intermittent"]} == {"xfail"}
    assert f"{MALFORMED.format('tcp')} failed this time" in failing.output


def test_intermittent_must_be_a_boolean(harness, tmp_path):
    b = tmp_path / "b.json"
    b.write_text(json.dumps({"expected_failures": [
        {"test": MALFORMED.format("stdio"), "reason": "races", "intermittent": "yes"}]}))
    run = harness("--baseline", b, "--clause", "SB-6.1-1")
    assert run.rc == 2 and any('"intermittent" must be true or false' in e for e in run.results["fatal_errors"])


# -- --update-baseline: a merge -------------------------------------------------------------
def test_update_baseline_merges_into_the_file(harness, tmp_path):
    b = tmp_path / "b.json"
    outside = "selftest/suite/test_basic.py::test_round_robin[unix]"
    passing = "selftest/suite/test_basic.py::test_response_reaches_the_client[unix]"
    b.write_text(json.dumps({"daemon": "fake", "note": "kept as is", "expected_failures": [
        {"test": outside, "clauses": ["SB-6.1-2"], "reason": "one worker only", "issue": "#12"},
        {"test": MALFORMED.format("stdio"), "clauses": ["SB-4.3-1"], "reason": "known: keeps the client"},
        {"test": passing, "clauses": ["SB-6.1-1"], "reason": "was broken before"},
        {"test": "selftest/suite/test_basic.py::test_gone[stdio]", "reason": "removed test"}]}))
    run = harness("--update-baseline", b, "--clause", "SB-4.3-1", "--clause", "SB-6.1-1",
                  breaks=["keep-malformed"])
    assert run.rc == 1, run.output  # the run is judged as without the option
    data = json.loads(b.read_text())
    entries = {e["test"]: e for e in data["expected_failures"]}
    assert data["note"] == "kept as is"
    # outside the selection: kept untouched, extra members included; reasons kept
    assert entries[outside] == {"test": outside, "clauses": ["SB-6.1-2"], "reason": "one worker only",
                                "issue": "#12"}
    assert entries[MALFORMED.format("stdio")]["reason"] == "known: keeps the client"
    # passing inside the selection, or gone: dropped
    assert passing not in entries and "selftest/suite/test_basic.py::test_gone[stdio]" not in entries
    # new failures: added, with a placeholder the next --baseline refuses
    added = {MALFORMED.format("unix"), MALFORMED.format("tcp"), "preflight::malformed"}
    assert added <= set(entries) and {entries[t]["reason"] for t in added} == {"TODO: explain"}
    u = run.results["baseline"]["update"]
    assert set(u["added"]) == added and u["outside"] == 1 and u["kept"] == 2 and u["placeholders"] == 3
    assert {d["test"]: d["why"] for d in u["dropped"]} == {
        passing: "passed", "selftest/suite/test_basic.py::test_gone[stdio]": "no such test"}
    assert f"baseline updated: {b}: 3 added, 2 dropped, 2 kept (1 outside this run's selection)" in run.output
    assert f"  - {passing} (passed)" in run.output
    refused = harness("--baseline", b, "--clause", "SB-6.1-1")
    assert refused.rc == 2 and any("placeholder reason" in e for e in refused.results["fatal_errors"])
    # reasons written: the merged file judges the same selection green
    for e in data["expected_failures"]:
        if e["reason"] == "TODO: explain":
            e["reason"] = "the fake keeps malformed clients"
    b.write_text(json.dumps(data))
    again = harness("--baseline", b, "--update-baseline", b, "--clause", "SB-4.3-1", "--clause", "SB-6.1-1",
                    breaks=["keep-malformed"])
    assert again.rc == 0, again.output
    assert again.results["baseline"]["update"]["added"] == [] and again.results["baseline"]["update"]["dropped"] == []


def test_update_baseline_creates_the_file(harness, tmp_path):
    b = tmp_path / "new.json"
    run = harness("--update-baseline", b, "--clause", "SB-6.1-1")
    assert run.rc == 0, run.output
    assert json.loads(b.read_text())["expected_failures"] == []


# -- --strict --------------------------------------------------------------------------------
def test_strict_makes_should_failures_gate(harness, tmp_path):
    lax = harness("--clause", "SB-4.3-2", breaks=["quiet"])
    assert lax.rc == 0 and lax.results["summary"]["warn"] == 3, lax.output
    strict = harness("--strict", "--clause", "SB-4.3-2", breaks=["quiet"])
    assert strict.rc == 1, strict.output
    assert "3 warning(s) (--strict: SHOULD-level clauses gate)" in strict.results["exit_reasons"]
    # a baseline written in strict mode lists the warnings, and then the strict run passes
    out = tmp_path / "strict.json"
    harness("--strict", "--write-baseline", out, "--clause", "SB-4.3-2", breaks=["quiet"])
    data = json.loads(out.read_text())
    assert len(data["expected_failures"]) == 3
    for e in data["expected_failures"]:
        e["reason"] = "the fake logs nothing"
    out.write_text(json.dumps(data))
    assert harness("--strict", "--baseline", out, "--clause", "SB-4.3-2", breaks=["quiet"]).rc == 0


def test_warnings_are_visible_in_junit_without_being_skipped(harness):
    import xml.etree.ElementTree as ET
    run = harness("--clause", "SB-4.3-2", breaks=["quiet"])
    root = ET.parse(run.report_dir / "junit.xml").getroot()
    case = next(c for c in root.iter("testcase") if c.get("name") == "test_malformed_line_is_logged[stdio]")
    assert case.find("skipped") is None and case.find("failure") is None
    assert case.find("system-err").text.startswith("WARNING: SB-4.3-2 (spec, SHOULD) not met:")
    props = {p.get("name"): p.get("value") for p in root.iter("property")}
    assert props["warning:test_malformed_line_is_logged[stdio]"].startswith("SB-4.3-2 (spec, SHOULD): ")


# -- --repeat ----------------------------------------------------------------------------------
FLAKY = '''
import os

def _count(name):
    path = os.path.join(os.environ["SB_SELFTEST_COUNTS"], name)
    n = int(open(path).read()) + 1 if os.path.exists(path) else 1
    open(path, "w").write(str(n))
    return n

@pytest.mark.modes("stdio")
@pytest.mark.clause("SB-6.1-1")
def test_flaky(bus):
    bus.start(instances=1)
    assert _count("flaky") % 2 == 0, "fails on odd runs"

@pytest.mark.modes("stdio")
@pytest.mark.clause("SB-6.1-1")
def test_steady(bus):
    bus.start(instances=1)
    assert False, "fails every time"

@pytest.mark.modes("stdio")
@pytest.mark.clause("SB-6.1-1")
def test_fine(bus):
    bus.start(instances=1)
'''


def test_repeat_reports_flaky_and_steady(harness, tmp_path):
    from conftest import write_suite
    suite = write_suite(tmp_path / "flaky", FLAKY)
    counts = tmp_path / "counts"
    counts.mkdir()
    run = harness("--repeat", "2", "--no-coverage-gate", tests=suite, env={"SB_SELFTEST_COUNTS": str(counts)})
    assert run.rc == 1, run.output  # a failure stays a failure
    rep = {t["test"].split("::")[-1]: t for t in run.results["repeat"]["tests"]}
    assert set(rep) == {"test_flaky[stdio]", "test_steady[stdio]"}  # only the failed tests are rerun
    assert rep["test_flaky[stdio]"]["outcomes"] == ["fail", "pass", "fail"]
    assert rep["test_flaky[stdio]"]["verdict"] == "flaky"
    assert rep["test_steady[stdio]"] == dict(rep["test_steady[stdio]"], outcomes=["fail"] * 3, verdict="steady")
    assert (counts / "flaky").read_text() == "3"
    assert any(line.startswith("  flaky") and "test_flaky[stdio] (fail, pass, fail)" in line
               for line in run.output.splitlines())
    assert run.last_line == "1 passed, 2 failed"
    import xml.etree.ElementTree as ET
    props = {p.get("name"): p.get("value") for p in ET.parse(run.report_dir / "junit.xml").getroot().iter("property")}
    assert props["repeat:test_steady[stdio]"] == "steady fail fail fail"
    assert "| steady | fail, fail, fail |" in (run.report_dir / "report.md").read_text()
