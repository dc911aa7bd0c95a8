"""Every test must cite clauses that SPEC.md defines: anything else is a
collection error (exit 2), never a silently skipped test."""

import pytest

from conftest import write_suite

GOOD = '''
@pytest.mark.clause("SB-6.1-1")
def test_good(bus):
    bus.start(instances=1)
    bus.client().request()
'''


@pytest.mark.parametrize("jobs", [1, 2])
def test_unknown_clause_is_a_collection_error(harness, tmp_path, jobs):
    suite = write_suite(tmp_path / "suite", GOOD + '''
@pytest.mark.clause("SB-6.1-1", "SB-6.1-99")
def test_cites_a_clause_spec_lacks(bus):
    pass
''')
    run = harness("--no-coverage-gate", tests=suite, jobs=jobs)
    assert run.rc == 2, run.output
    errors = run.results["collection_errors"]
    assert len(errors) == 1 and "cites unknown clause SB-6.1-99" in errors[0]["message"]
    assert "SB-6.1-99" in run.output


def test_test_without_clause_marker_is_a_collection_error(harness, tmp_path):
    suite = write_suite(tmp_path / "suite", GOOD + '''
def test_cites_nothing(bus):
    pass
''')
    run = harness("--no-coverage-gate", tests=suite)
    assert run.rc == 2, run.output
    assert "no @pytest.mark.clause" in run.results["collection_errors"][0]["message"]


def test_malformed_clause_id_and_unknown_mode_are_collection_errors(harness, tmp_path):
    suite = write_suite(tmp_path / "suite", '''
@pytest.mark.clause("6.1-1")
def test_bad_id(bus):
    pass

@pytest.mark.modes("pipe")
@pytest.mark.clause("SB-6.1-1")
def test_bad_mode(bus):
    pass
''')
    run = harness("--no-coverage-gate", tests=suite)
    assert run.rc == 2, run.output
    assert "is not a clause id" in run.results["collection_errors"][0]["message"]


def test_module_level_and_class_markers_count(harness, tmp_path):
    suite = write_suite(tmp_path / "suite", '''
pytestmark = pytest.mark.clause("SB-4.3-1")

class TestMalformed:
    @pytest.mark.modes("stdio")
    def test_closed(self, bus):
        bus.start(instances=1)
        c = bus.client()
        c.send(b"{\\n")
        c.expect_closed()
''')
    run = harness("--no-coverage-gate", tests=suite)
    assert run.rc == 0, run.output
    assert run.results["tests"][0]["clauses"] == ["SB-4.3-1"]
    assert run.results["tests"][0]["mode"] == "stdio"


def test_spec_that_does_not_parse_exits_2(harness, tmp_path):
    spec = tmp_path / "SPEC.md"
    spec.write_text("## 6. Routing\n\n| ID | Level | Statement | Check | Notes |\n|---|---|---|---|---|\n"
                    "| SB-6-1 | MUSTY | x | black-box | |\n")
    run = harness(spec=spec)
    assert run.rc == 2, run.output
    assert any("MUSTY" in e for e in run.results["fatal_errors"])
