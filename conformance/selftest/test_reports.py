"""Reports: junit.xml valid against the Jenkins junit-10.xsd rules (h2spec's
is not), results.json valid against results.schema.json, report.md with pass
rates and the coverage table, and a reproducer folder for every failure."""

import json
import shlex
import shutil
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from conftest import CONFORMANCE, write_suite
from junit_check import check_file, check_tree
from schema_check import validate

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
    assert check_file(res / "junit.xml") == []
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


def test_junit_checker_rejects_what_the_schema_rejects():
    bad = ET.fromstring('<testsuites skipped="1"><testsuite name="s" tests="1" failures="0" errors="0" '
                        'time="1e-3"><testcase classname="c"><properties/></testcase></testsuite></testsuites>')
    problems = "\n".join(check_tree(bad))
    for expected in ("attribute skipped is not allowed", "SUREFIRE_TIME", "missing required attribute name",
                     "<properties> is not allowed inside <testcase>"):
        assert expected in problems


def test_results_json_follows_its_schema(mixed):
    _, res = mixed
    schema = json.loads((CONFORMANCE / "results.schema.json").read_text())
    data = json.loads((res / "results.json").read_text())
    assert validate(data, schema) == []
    t = next(t for t in data["tests"] if t["nodeid"].endswith("test_closes[stdio]"))
    assert t["clauses"] == ["SB-4.3-1"] and t["levels"] == ["MUST"] and t["mode"] == "stdio"
    assert t["artifact_dir"] and "did not close the connection" in t["message"]
    data["tests"][0]["outcome"] = "passed"
    assert validate(data, schema) != []  # the checker can fail


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
