"""Baselines: a listed failure is xfail and does not fail the run; a listed
test that passes (or no longer exists) is stale and fails it, named; a
failure that is not listed fails it."""

import json

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
    again = harness("--baseline", out, breaks=["keep-malformed"])
    assert again.rc == 0, again.output


def test_baseline_entry_without_a_reason_is_rejected(harness, tmp_path):
    b = baseline(tmp_path / "b.json", [MALFORMED.format("stdio")], reason="")
    run = harness("--baseline", b)
    assert run.rc == 2, run.output
    assert any("needs a reason" in e for e in run.results["fatal_errors"])
