"""Reports: junit.xml valid against the Jenkins junit-10.xsd (xmllint; h2spec's
is not), results.json valid against results.schema.json (python3-jsonschema),
both naming the kit version and the spec revision, report.md with pass rates
and the coverage table, and a reproducer folder for every failure."""

import json
import shlex
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from conftest import CONFORMANCE, write_suite
from validators import junit_problems, results_problems

MIXED = '''
@pytest.mark.clause("SB-4.3-1")
def test_closes(bus):
    bus.start(instances=1)
    c = bus.client()
    c.send(b"{broken\\n")
    c.expect_closed()

@pytest.mark.modes("stdio")
@pytest.mark.clause("SB-4.3-2")
def test_logged(bus):
    bus.start(instances=1).wait_stderr("never printed <&>")

@pytest.mark.modes("stdio")
@pytest.mark.clause("SB-6.1-1")
def test_buggy(bus):
    bus.start(instances=1)
    raise RuntimeError("bug in the test \\x01 <control> & markup")
'''


@pytest.fixture(scope="module")
def mixed(tmp_path_factory, fakes):
    """One run with every outcome: pass, fail, warn, unsupported, harness-error."""
    from conftest import PYTHON, RUN_PY, SPEC
    tmp = tmp_path_factory.mktemp("mixed")
    suite = write_suite(tmp / "suite", MIXED)
    prof = tmp / "p.toml"
    prof.write_text('extra_args = ["--break", "keep-malformed"]\nmodes = ["stdio", "unix"]\n')
    res = tmp / "res"
    cmd = [PYTHON, str(RUN_PY), "--daemon", str(fakes["fake_daemon.py"]), "--mock-worker",
           str(fakes["fake_worker.py"]), "--profile", str(prof), "--spec", str(SPEC), "--tests-dir",
           str(suite), "--report-dir", str(res), "-j", "1", "--seed", "5", "--wait-timeout", "1"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=240, cwd=tmp)
    return p, res


def test_mixed_run_has_every_outcome(mixed):
    p, res = mixed
    assert p.returncode == 2, p.stdout + p.stderr  # the harness error wins
    data = json.loads((res / "results.json").read_text())
    assert {t["outcome"] for t in data["tests"]} == {"fail", "warn", "unsupported", "harness-error"}
    assert p.stdout.strip().splitlines()[-1] == "0 passed, 2 failed, 1 warned, 1 unsupported, 1 harness errors"


def test_junit_is_valid_against_the_jenkins_schema(mixed):
    _, res = mixed
    assert junit_problems(res / "junit.xml") == []
    root = ET.parse(res / "junit.xml").getroot()
    assert root.get("tests") == "5" and root.get("failures") == "2" and root.get("errors") == "1"
    cases = {c.get("name"): c for c in root.iter("testcase")}
    assert cases["test_closes[stdio]"].find("failure").get("type") == "fail"
    assert cases["test_buggy[stdio]"].find("error").get("type") == "harness-error"
    assert cases["test_closes[tcp]"].find("skipped").get("type") == "unsupported"
    assert cases["test_logged[stdio]"].find("failure") is None  # a warning does not fail CI
    props = {p.get("name"): p.get("value") for p in root.iter("property")}
    assert props["clauses:test_closes[unix]"] == "SB-4.3-1"
    assert props["seed"] == "5"


def test_junit_validation_rejects_what_the_schema_rejects(tmp_path):
    bad = tmp_path / "bad.xml"
    bad.write_text('<testsuites skipped="1"><testsuite name="s" tests="1" failures="0" errors="0" '
                   'time="1e-3"><testcase classname="c"><properties/></testcase></testsuite></testsuites>')
    problems = "\n".join(junit_problems(bad))
    for expected in ("attribute 'skipped': The attribute 'skipped' is not allowed",
                     "The value '1e-3' is not accepted by the pattern", "'name' is required but missing",
                     "Element 'properties': This element is not expected"):
        assert expected in problems, problems


def test_reports_name_the_kit_version_and_the_spec_revision(mixed):
    p, res = mixed
    version = (CONFORMANCE.parent / "VERSION").read_text().strip()
    data = json.loads((res / "results.json").read_text())
    # the self-test SPEC.md names no version in its title: the report says so rather than guess
    assert (data["kit"], data["kit_version"], data["spec_version"]) == ("stdio-bus-conformance", version, None)
    props = {p.get("name"): p.get("value") for p in ET.parse(res / "junit.xml").getroot().iter("property")}
    assert props["kit"] == "stdio-bus-conformance" and props["kit_version"] == version
    md = (res / "report.md").read_text()
    assert md.splitlines()[2] == f"Produced by stdio-bus-conformance {version}, stdio Bus spec (revision unknown)."
    assert f"= stdio-bus-conformance {version}, stdio Bus spec (revision unknown) =" in p.stdout
    out = subprocess.run([sys.executable, str(CONFORMANCE / "run.py"), "--version"], capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.strip() == f"stdio-bus-conformance {version} (stdio Bus spec v0.1.0)"


def test_results_json_follows_its_schema(mixed):
    _, res = mixed
    data = json.loads((res / "results.json").read_text())
    assert results_problems(data) == []
    t = next(t for t in data["tests"] if t["nodeid"].endswith("test_closes[stdio]"))
    assert t["clauses"] == ["SB-4.3-1"] and t["levels"] == ["MUST"] and t["mode"] == "stdio"
    assert t["artifact_dir"] and "did not close the connection" in t["message"]
    data["tests"][0]["outcome"] = "passed"
    assert any("'passed' is not one of" in p for p in results_problems(data))  # the validation can fail
    data["tests"][0]["outcome"] = "pass"
    data["kit_version"] = "0.2"  # not semantic
    assert any(p.startswith("kit_version:") for p in results_problems(data))
    data["kit_version"] = "0.2.0"
    # what the hand-written subset ignored: minItems (and $ref, oneOf...)
    data["repeat"] = {"n": 1, "tests": [{"test": "t", "outcomes": ["fail"], "verdict": "steady"}]}
    assert any("is too short" in p for p in results_problems(data))


def test_report_md_has_rates_and_coverage_table(mixed):
    _, res = mixed
    md = (res / "report.md").read_text()
    assert "## Section 4" in md and "- MUST pass rate: 0/1 (0%)" in md and "- SHOULD pass rate: 0/1 (0%)" in md
    # 3 tests cite it; one is unsupported: the dropped mode shows
    assert "| SB-4.3-1 | MUST | 3 | fail (not judged in some tests: mode tcp unsupported) |" in md
    assert "| SB-6.1-3 | MUST | excluded | excluded: Invisible from outside. |" in md
    assert "| SB-I-1 | MUST | untested | untested |" in md


def test_failure_leaves_a_reproducer_that_reruns_it(mixed):
    p, res = mixed
    data = json.loads((res / "results.json").read_text())
    t = next(t for t in data["tests"] if t["nodeid"].endswith("test_closes[unix]"))
    art = Path(t["artifact_dir"])
    assert art.parent == res / "artifacts" and t["artifact"] == f"artifacts/{art.name}"
    files = {f.name for f in art.iterdir()}
    assert {"transcript.txt", "daemon.stderr", "config.json", "profile.toml", "rerun.json", "seed",
            "command.txt"} <= files
    transcript = (art / "transcript.txt").read_text()
    assert "client#1 -> daemon" in transcript and "{broken" in transcript
    assert "worker p/0" in transcript and " start " in transcript
    rerun_data = json.loads((art / "rerun.json").read_text())
    assert rerun_data["seed"] == 5 and rerun_data["nodeid"].endswith("test_closes[unix]")
    assert rerun_data["profile"] == "profile.toml" and rerun_data["wait_timeout"] == 1.0
    # the reports travel: artifact paths in report.md are relative
    assert f"| artifacts/{art.name} |" in (res / "report.md").read_text()
    # a downloaded copy of the report folder reruns with its command.txt
    copy = res.parent / "downloaded"
    shutil.copytree(res, copy)
    shutil.rmtree(art)
    cmd = (copy / "artifacts" / art.name / "command.txt").read_text().strip()
    cmd = cmd.replace(str(art), str(copy / "artifacts" / art.name))
    elsewhere = res / "elsewhere"
    elsewhere.mkdir()
    again = subprocess.run(shlex.split(cmd), capture_output=True, text=True, timeout=120, cwd=elsewhere)
    assert again.returncode == 1, again.stdout + again.stderr
    assert again.stdout.strip().splitlines()[-1] == "0 passed, 1 failed"
    rerun = json.loads((copy / "artifacts" / art.name / "rerun" / "results.json").read_text())
    assert [t["nodeid"] for t in rerun["tests"]] == [t["nodeid"]] and rerun["seed"] == 5
