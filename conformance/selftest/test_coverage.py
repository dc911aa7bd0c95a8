"""The coverage gate: a MUST/MUST NOT clause with a black-box Check that no
test cites fails the run (exit 2, listed), unless SPEC.md excludes it with a
non-black-box Check and a reason."""

from conftest import SPEC

EXTRA = "| SB-6.1-4 | {level} | The daemon does one more thing. | {check} | {notes} |\n"


def spec_with(tmp_path, level="MUST", check="black-box", notes=""):
    text = SPEC.read_text()
    row = "| SB-6.1-3 |"
    i = text.index("\n", text.index(row)) + 1
    path = tmp_path / "SPEC.md"
    path.write_text(text[:i] + EXTRA.format(level=level, check=check, notes=notes) + text[i:])
    return path


def test_full_coverage_passes_the_gate(harness):
    run = harness("--coverage")
    assert run.rc == 0, run.output
    assert "coverage gate: ok" in run.output
    assert "section 6       2    0    1" in run.output  # SB-6.1-1, -2 tested; -3 excluded


def test_untested_must_clause_fails_the_gate_and_is_listed(harness, tmp_path):
    spec = spec_with(tmp_path)
    run = harness("--coverage", spec=spec)
    assert run.rc == 2, run.output
    assert "COVERAGE GATE FAILED: 1 MUST clause(s) without a test" in run.output
    assert "SB-6.1-4 (MUST): no test cites it" in run.output
    full = harness(spec=spec)  # every run applies the gate, and writes the reports
    assert full.rc == 2 and full.results["summary"]["pass"] == 12
    assert full.results["coverage"]["gate"]["failures"][0]["id"] == "SB-6.1-4"
    assert "coverage gate" in " ".join(full.results["exit_reasons"])


def test_excluded_clause_with_a_reason_passes_the_gate(harness, tmp_path):
    run = harness("--coverage", spec=spec_with(tmp_path, check="inspection", notes="Internal state."))
    assert run.rc == 0, run.output
    assert "section 6       2    0    2" in run.output


def test_untested_should_clause_does_not_fail_the_gate(harness, tmp_path):
    run = harness("--coverage", spec=spec_with(tmp_path, level="SHOULD"))
    assert run.rc == 0, run.output
    assert "section 6       2    1    1" in run.output


def test_no_coverage_gate_lists_but_does_not_fail(harness, tmp_path):
    run = harness("--no-coverage-gate", spec=spec_with(tmp_path))
    assert run.rc == 0, run.output
    assert "untested: SB-6.1-4 (MUST)" in run.output


def test_gate_is_not_applied_to_a_partial_collection(harness, tmp_path):
    run = harness("selftest/suite/test_basic.py::test_response_reaches_the_client", spec=spec_with(tmp_path))
    assert run.rc == 0, run.output
    assert run.results["coverage"]["complete"] is False
    assert run.results["summary"]["pass"] == 3


def test_coverage_counts_every_test_not_only_the_selected_ones(harness):
    run = harness("--clause", "SB-6.1-1")
    assert run.rc == 0, run.output
    assert run.results["summary"]["total"] == 3
    tested = {c["id"] for c in run.results["coverage"]["clauses"] if c["status"] == "tested"}
    assert tested == {"SB-4.3-1", "SB-4.3-2", "SB-6.1-1", "SB-6.1-2", "SB-I-1"}
