"""Each check is judged by its own clause (issue 13 item 1): check() and
checking() attribute a failure to the clause they name, a plain assert to
the test's first cited clause, and that clause's level decides fail or warn,
whatever else the test cites. Three tiers (spec, our interpretations, our
extensions) everywhere: results.json, JUnit, report.md, the console, and the
verdict lines on the spec itself."""

import json
import xml.etree.ElementTree as ET

import pytest

from conftest import write_suite

MIXED = '''
from stdio_bus_conformance import check, checking, DaemonTimeout

def _served(bus):
    bus.start(instances=1)
    return bus.client().request()

@pytest.mark.modes("unix")
@pytest.mark.clause("SB-4.3-1", "SB-I-2")
def test_should_check_fails_in_a_must_test(bus):
    _served(bus)
    check("SB-I-2", False, "the warning does not name the client")

@pytest.mark.modes("unix")
@pytest.mark.clause("SB-I-2", "SB-4.3-1")
def test_must_check_fails_in_a_test_citing_a_should_first(bus):
    _served(bus)
    check("SB-4.3-1", False, "the client was not closed")

@pytest.mark.modes("unix")
@pytest.mark.clause("SB-4.3-2", "SB-4.3-1")
def test_plain_assert_goes_to_the_first_clause(bus):
    _served(bus)
    assert False, "judged by SB-4.3-2, a SHOULD: a warning, not a failure"

@pytest.mark.modes("unix")
@pytest.mark.clause("SB-6.1-1", "SB-I-2")
def test_checking_attributes_a_wait(bus):
    d = bus.start(instances=1)
    with checking("SB-I-2"):
        d.wait_stderr("never printed", timeout=0.2)

@pytest.mark.modes("unix")
@pytest.mark.clause("SB-6.1-1")
def test_check_of_a_clause_not_cited_is_a_harness_error(bus):
    _served(bus)
    check("SB-4.3-1", True)

@pytest.mark.modes("unix")
@pytest.mark.clause("SB-6.1-1", "SB-4.3-2")
def test_passing_checks_pass(bus):
    _served(bus)
    check("SB-4.3-2", True, "never shown")
'''


@pytest.fixture(scope="module")
def judged(tmp_path_factory, fakes):
    from conftest import PYTHON, RUN_PY, SPEC
    import subprocess
    tmp = tmp_path_factory.mktemp("judged")
    suite = write_suite(tmp / "suite", MIXED)
    prof = tmp / "p.toml"
    prof.write_text('modes = ["stdio", "unix"]\n')
    res = tmp / "res"
    cmd = [PYTHON, str(RUN_PY), "--daemon", str(fakes["fake_daemon.py"]), "--mock-worker",
           str(fakes["fake_worker.py"]), "--profile", str(prof), "--spec", str(SPEC), "--tests-dir",
           str(suite), "--report-dir", str(res), "-j", "1", "--seed", "5", "--wait-timeout", "1",
           "--no-coverage-gate"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=240, cwd=tmp)
    data = json.loads((res / "results.json").read_text())
    return p, res, data, {t["nodeid"].split("::")[1].split("[")[0]: t for t in data["tests"]}


def test_each_failure_is_judged_by_the_clause_it_checks(judged):
    p, _, _, t = judged
    assert p.returncode == 2, p.stdout + p.stderr  # the harness error wins
    should = t["test_should_check_fails_in_a_must_test"]
    assert (should["outcome"], should["clause"], should["tier"], should["level"]) == \
        ("warn", "SB-I-2", "interpretation", "SHOULD")
    must = t["test_must_check_fails_in_a_test_citing_a_should_first"]
    assert (must["outcome"], must["clause"], must["tier"]) == ("fail", "SB-4.3-1", "spec")
    plain = t["test_plain_assert_goes_to_the_first_clause"]
    assert (plain["outcome"], plain["clause"]) == ("warn", "SB-4.3-2")
    wait = t["test_checking_attributes_a_wait"]
    assert (wait["outcome"], wait["clause"]) == ("warn", "SB-I-2") and "never printed" in wait["message"]
    bad = t["test_check_of_a_clause_not_cited_is_a_harness_error"]
    assert bad["outcome"] == "harness-error" and "does not cite" in bad["message"]
    assert t["test_passing_checks_pass"]["outcome"] == "pass"


def test_clause_verdicts_follow_the_judged_clause(judged):
    _, _, data, _ = judged
    clauses = {c["id"]: c for c in data["coverage"]["clauses"]}
    assert clauses["SB-4.3-1"]["outcome"] == "fail" and clauses["SB-4.3-1"]["tier"] == "spec"
    assert clauses["SB-I-2"]["outcome"] == "warn" and clauses["SB-I-2"]["tier"] == "interpretation"
    assert clauses["SB-4.3-2"]["outcome"] == "warn"
    # SB-6.1-1 passed in test_passing_checks_pass; its failing test was judged on SB-I-2
    assert clauses["SB-6.1-1"]["outcome"] == "pass"


def test_tiers_reach_junit_and_report_md_and_console(judged):
    p, res, _, _ = judged
    root = ET.parse(res / "junit.xml").getroot()
    props = {x.get("name"): x.get("value") for x in root.iter("property")}
    assert props["judged:test_should_check_fails_in_a_must_test[unix]"] == "warn SB-I-2 interpretation SHOULD"
    assert props["judged:test_must_check_fails_in_a_test_citing_a_should_first[unix]"] == "fail SB-4.3-1 spec MUST"
    failure = next(c for c in root.iter("testcase") if c.get("name").startswith("test_must_check")).find("failure")
    assert failure.get("message").startswith("SB-4.3-1 (spec, MUST): ")
    md = (res / "report.md").read_text()
    assert "SB-I-2 (our interpretation, SHOULD)" in md
    assert "  WARN  SB-I-2       our interpretation SHOULD" in p.stdout
    assert "  FAIL  SB-4.3-1     spec MUST" in p.stdout


def test_verdict_lines_state_the_spec_verdict_and_what_was_not_judged(harness):
    run = harness(profile='modes = ["stdio", "unix"]\n', breaks=["keep-malformed"])
    assert run.rc == 1, run.output
    lines = run.results["verdict"]["lines"]
    # the MUST fails; the SHOULD (logging) warns, the MAY (round robin) passes; tcp is not judged
    assert lines[-1] == ("spec SPEC.md: 1 MUST clause fails (of 2); 1 SHOULD/MAY clause warns (of 2); "
                         "3 judged by fewer tests than cite them"), lines
    assert lines[-1] in run.output.splitlines()
    # a dropped mode: SB-I-1 is tested in stdio and tcp, tcp is unsupported
    assert run.results["verdict"]["interpretation"]["partial"] == 1
    ok = harness(profile='modes = ["unix"]\n')
    interp = ok.results["verdict"]["lines"][0]
    assert interp == ("our interpretations (SB-I, where the spec is silent): 0 MUST clauses fail (of 1), "
                      "1 not judged (modes stdio, tcp unsupported); "
                      "0 SHOULD/MAY clauses warn (of 1), 1 not judged"), interp
    md = (ok.report_dir / "report.md").read_text()
    assert "not judged" in md


def test_extension_clause_without_requires_is_a_collection_error(harness, tmp_path):
    suite = write_suite(tmp_path / "suite", '''
@pytest.mark.clause("SB-X-1")
def test_version(bus):
    pass
''')
    run = harness("--no-coverage-gate", tests=suite)
    assert run.rc == 2, run.output
    assert "without @pytest.mark.requires" in run.results["collection_errors"][0]["message"]


def extension_suite(path, feature):
    """A suite of two tests: one needing the extension `feature` (its body
    is never reached unless a profile claims it), one any daemon passes."""
    return write_suite(path, f'''
@pytest.mark.modes("stdio")
@pytest.mark.requires("{feature}")
@pytest.mark.clause("SB-X-1")
def test_extension(bus):
    raise AssertionError("ran although the profile does not claim {feature}")

@pytest.mark.modes("stdio")
@pytest.mark.clause("SB-6.1-1")
def test_served(bus):
    bus.start(instances=1)
    bus.client().request()
''')


def test_extension_tests_are_unsupported_unless_the_profile_claims_them(harness, tmp_path):
    suite = extension_suite(tmp_path / "suite", "cli_version")
    run = harness("--no-coverage-gate", tests=suite)
    assert run.outcome_of("test_extension") == {"unsupported"}
    ext = [line for line in run.results["verdict"]["lines"] if line.startswith("our extensions")]
    assert ext == ["our extensions (SB-X, judged where the profile claims them): 0 SHOULD/MAY clauses warn (of 1), "
                   "1 not judged"], ext


def test_another_daemon_gets_the_neutral_profile(tmp_path, fakes):
    """--daemon pointing at anything but our build, without --profile: the
    spec's command line and no extension claimed."""
    import subprocess
    from conftest import PYTHON, RUN_PY, SPEC
    suite = extension_suite(tmp_path / "suite", "worker_id_env")
    res = tmp_path / "res"
    p = subprocess.run([PYTHON, str(RUN_PY), "--daemon", str(fakes["fake_daemon.py"]), "--mock-worker",
                        str(fakes["fake_worker.py"]), "--spec", str(SPEC), "--tests-dir", str(suite),
                        "--report-dir", str(res), "-j", "1", "--no-coverage-gate"],
                       capture_output=True, text=True, timeout=120, cwd=tmp_path)
    data = json.loads((res / "results.json").read_text())
    assert p.returncode == 0, p.stdout + p.stderr
    assert data["profile"] == "(built-in spec-only)"
    outcomes = {t["nodeid"].split("::")[1]: t["outcome"] for t in data["tests"]}
    assert outcomes == {"test_extension[stdio]": "unsupported", "test_served[stdio]": "pass"}


def test_extension_config_key_without_requires_is_a_harness_error(harness, tmp_path):
    suite = write_suite(tmp_path / "suite", '''
@pytest.mark.modes("stdio")
@pytest.mark.clause("SB-6.1-1")
def test_uses_our_key(bus):
    bus.start({"orphan_policy": "error"}, instances=1)
''')
    run = harness("--no-coverage-gate", tests=suite)
    assert run.rc == 2 and run.outcome_of("test_uses_our_key") == {"harness-error"}, run.output
    assert "requires('orphan_policy')" in run.results["tests"][0]["message"]
