"""report.html, compare and the interop matrix (issue 36), each a plain
function of results.json data, tested on synthetic runs: the verdict before
the matrix, one row per clause, a failing cell that opens its message,
transcript and reproducer, a run with 0 tests and an interrupted run that
say so, a page that stays bounded and asks nothing of the network; compare's
three lists; the matrix's rows and links; run.py --compare and --matrix end
to end; and report.html beside report.md after a real run."""

import json
import re
import subprocess

import pytest

from conftest import PYTHON, RUN_PY, SPEC, write_suite
from stdio_bus_conformance.reports import compare as cmp
from stdio_bus_conformance.reports import html, matrix

OUTCOMES = ("pass", "fail", "warn", "xfail", "blocked", "unsupported", "skipped", "harness-error", "unfinished")


def clause(cid, outcome="pass", level="MUST", tier="spec", failing=(), status="tested", statement="It holds."):
    section = cid[3:].rsplit("-", 1)[0]
    return {"id": cid, "level": level, "tier": tier, "section": section, "check": "black-box",
            "statement": statement, "status": status, "tests": [] if status != "tested" else ["t"],
            "outcome": outcome if status == "tested" else "not run", "reason": "", "partial": False,
            "failing_tests": list(failing), "notes": ""}


def a_test(nodeid, clauses, outcome="pass", mode="unix", judged=None, message="", artifact=None):
    return {"nodeid": nodeid, "clauses": clauses, "levels": ["MUST"] * len(clauses), "mode": mode,
            "outcome": outcome, "gated": True, "clause": judged if outcome in ("fail", "warn", "xfail") else None,
            "tier": "spec", "level": "MUST", "duration": 0.1, "message": message,
            "artifact_dir": artifact, "artifact": artifact and "artifacts/" + artifact.rsplit("/", 1)[-1]}


def results(tests, clauses, exit_code=None, reasons=(), root_causes=(), unfinished=0, daemon="/opt/bus"):
    summary = {o: sum(1 for t in tests if t["outcome"] == o) for o in OUTCOMES}
    summary["unfinished"] = summary["unfinished"] or unfinished
    summary["total"] = len(tests)
    fails = summary["fail"] + summary["harness-error"]
    return {"schema_version": 1, "suite": "stdio Bus conformance kit", "kit": "stdio-bus-conformance",
            "kit_version": "0.2.0", "spec_version": "0.1.0", "daemon": daemon, "profile": "p.toml",
            "mock_worker": "/opt/mock", "spec": "SPEC.md", "clauses": len(clauses), "seed": 1,
            "started_at": "2026-11-28T10:00:00+00:00", "duration": 1.5,
            "selection": {"clause": [], "exclude_clause": [], "section": [], "keyword": None, "only": []},
            "exit_code": exit_code if exit_code is not None else (1 if fails else 0),
            "exit_reasons": list(reasons), "exit_notes": [],
            "verdict": {"lines": [f"spec v0.1.0: {fails} MUST clauses fail"]},
            "summary": summary, "tests": tests, "collection_errors": [], "fatal_errors": [],
            "preflight": None, "root_causes": list(root_causes), "findings": [],
            "baseline": {"file": None, "stale": [], "new_failures": [], "expected_failures": [], "intermittent": []},
            "coverage": {"complete": True, "gated": True, "gate": {"ok": True, "failures": []},
                         "sections": [], "clauses": clauses} if clauses else None,
            "repeat": None}


@pytest.fixture
def failing_run(tmp_path):
    art = tmp_path / "artifacts" / "tests_x.py_test_bad[unix]"
    art.mkdir(parents=True)
    (art / "transcript.txt").write_text(
        "# times in ms since the harness started the test\n"
        "     0.500  harness                            start: /opt/bus --unix /tmp/s\n"
        "     1.000  client1 -> daemon                  {\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"<x>\"}\n"
        "     1.200  daemon -> worker 0/0 pid 7         {\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"<x>\"}\n"
        "     1.300  daemon stderr                      WARN routing: no worker\n")
    (art / "command.txt").write_text("run.py --rerun 'artifacts/tests_x.py_test_bad[unix]'\n")
    tests = [a_test("tests/x.py::test_ok[unix]", ["SB-6.1-1"]),
             a_test("tests/x.py::test_ok[tcp]", ["SB-6.1-1"], mode="tcp"),
             a_test("tests/x.py::test_bad[unix]", ["SB-6.1-2", "SB-6.1-1"], "fail", judged="SB-6.1-2",
                  message="AssertionError: <script>alert(1)</script> got nothing", artifact=str(art)),
             a_test("tests/x.py::test_blocked[stdio]", ["SB-10.1-1"], "blocked", mode="stdio",
                  message="blocked: sigterm: crashed")]
    clauses = [clause("SB-6.1-1"), clause("SB-6.1-2", "fail", failing=["tests/x.py::test_bad[unix]"]),
               clause("SB-10.1-1", "blocked"), clause("SB-I-3", "pass", "SHOULD", "interpretation"),
               clause("SB-X-1", status="untested", tier="extension", level="MAY")]
    rc = {"item": "sigterm", "clause": "SB-10.1-1", "tier": "spec", "level": "MUST", "mode": "stdio",
          "message": "the daemon died of SIGSEGV on SIGTERM", "blocked": 1,
          "blocked_tests": ["tests/x.py::test_blocked[stdio]"], "findings": 0, "binding": True}
    data = results(tests, clauses, reasons=["1 test failed"], root_causes=[rc])
    return data, tmp_path


def test_the_verdict_and_root_causes_come_before_the_matrix(failing_run):
    data, d = failing_run
    page = html.report_html(data, html.read_artifacts(str(d), data))
    assert page.index('id="verdict"') < page.index('id="root-causes"') < page.index('id="matrix"')
    assert "FAIL: exit 1" in page and "1 test failed" in page
    assert "the daemon died of SIGSEGV on SIGTERM" in page


def test_the_matrix_has_one_row_per_clause_and_a_column_per_mode(failing_run):
    data, d = failing_run
    page = html.report_html(data, {})
    rows = re.findall(r'<tr class="clause" id="c-([^"]+)"[^>]*data-tier="(\w+)" data-outcome="([^"]+)"', page)
    assert [(r[0], r[2]) for r in rows] == [("SB-6.1-1", "pass"), ("SB-6.1-2", "fail"), ("SB-10.1-1", "blocked"),
                                            ("SB-I-3", "pass"), ("SB-X-1", "untested")]
    assert {r[1] for r in rows} == {"spec", "interpretation", "extension"}
    assert re.search(r"<th>stdio</th><th>unix</th><th>tcp</th>", page)
    columns, cells = html.mode_cells(data)
    assert columns == ["stdio", "unix", "tcp"]
    # the failing test judged SB-6.1-2, not SB-6.1-1 which it also cites
    assert cells["SB-6.1-1"]["unix"]["outcome"] == "pass"
    assert cells["SB-6.1-2"]["unix"]["outcome"] == "fail"
    assert cells["SB-10.1-1"]["stdio"]["outcome"] == "fail"  # the root cause, on its clause and mode


def test_a_failing_cell_opens_its_message_transcript_and_reproducer(failing_run):
    data, d = failing_run
    page = html.report_html(data, html.read_artifacts(str(d), data))
    cell = re.search(r'<td class="cell o-fail opens" data-open="([^"]+)"', page)
    assert cell and cell.group(1) == "t2"
    block = page[page.index('<details class="test" id="t2">'):]
    block = block[:block.index("</details>")]
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in block and "<script>alert" not in block
    assert "run.py --rerun" in block
    # side by side: the client's line, the worker's line and the daemon's log each in their column
    assert re.search(r'<tr class="l-client">.*?<td class="client"><span class="src">client1 -&gt; daemon</span>', block)
    assert re.search(r'<tr class="l-worker">.*?<td class="worker"><span class="src">daemon -&gt; worker', block)
    assert '<tr class="l-daemon">' in block and "WARN routing: no worker" in block


def test_the_page_is_self_contained(failing_run):
    data, d = failing_run
    page = html.report_html(data, html.read_artifacts(str(d), data))
    assert not re.search(r'(src|href)="(https?:)?//', page)
    assert "<style>" in page and "<script>" in page and "@import" not in page


def test_a_run_with_no_test_says_so():
    page = html.report_html(results([], [], exit_code=2, reasons=["nothing was selected"]))
    assert 'id="no-tests"' in page and "No test ran" in page and "nothing was selected" in page
    assert 'id="interrupted"' not in page


def test_an_interrupted_run_says_so(failing_run):
    data, _ = failing_run
    data["tests"][0]["outcome"] = "unfinished"
    data["summary"]["unfinished"] = 1
    data["exit_code"], data["exit_reasons"] = 2, ["the run was interrupted: 1 test(s) unfinished"]
    page = html.report_html(data, {})
    assert 'id="interrupted"' in page and "1 test(s) unfinished" in page


def test_worker_mode_and_a_run_without_coverage_render():
    tests = [a_test("worker_tests/t.py::test_a", ["SB-W-1"], mode=None),
             a_test("worker_tests/t.py::test_b", ["SB-W-2"], "fail", mode=None, judged="SB-W-2", message="no")]
    data = results(tests, [], daemon="ref_worker --x")
    data["mock_worker"] = "(none: worker mode)"
    page = html.report_html(data, {})
    assert "worker conformance report" in page
    assert len(re.findall(r'<tr class="clause"', page)) == 2
    assert "<th>any</th>" in page


def test_the_page_stays_bounded_with_many_long_transcripts(tmp_path):
    tests, clauses = [], []
    line = "  {:8.3f}  client1 -> daemon                  " + "x" * 200 + "\n"
    for i in range(300):
        art = tmp_path / "artifacts" / f"t{i}"
        art.mkdir(parents=True)
        (art / "transcript.txt").write_text("".join(line.format(k) for k in range(3000)))
        tests.append(a_test(f"tests/t.py::test_{i}", [f"SB-6.1-{i + 1}"], "fail", judged=f"SB-6.1-{i + 1}",
                          message="m" * 5000, artifact=str(art)))
        clauses.append(clause(f"SB-6.1-{i + 1}", "fail", failing=[tests[-1]["nodeid"]]))
    data = results(tests, clauses)
    arts = html.read_artifacts(str(tmp_path), data)
    assert all(len(a["transcript"]) <= html.TRANSCRIPT_CHARS + 100 for a in arts.values())
    page = html.report_html(data, arts)
    assert len(page.encode()) < 5 * 1024 * 1024
    assert page.count("Transcript not embedded") > 0  # the later ones: a link to their file
    assert page.count('<details class="test"') == 300  # every failure still opens its message


def test_compare_finds_newly_failing_newly_passing_and_changed(failing_run):
    new, _ = failing_run
    old = json.loads(json.dumps(new))
    cl = {c["id"]: c for c in old["coverage"]["clauses"]}
    cl["SB-6.1-2"]["outcome"], cl["SB-6.1-2"]["failing_tests"] = "pass", []
    cl["SB-6.1-1"]["outcome"], cl["SB-6.1-1"]["failing_tests"] = "fail", ["tests/x.py::test_ok[unix]"]
    cl["SB-I-3"]["outcome"] = "not judged"
    old["tests"][2]["outcome"] = "pass"
    diff = cmp.compare(old, new, "old", "new")
    assert [(e["id"], e["old"], e["new"]) for e in diff["newly_failing"]] == [("SB-6.1-2", "pass", "fail")]
    assert [(e["id"], e["old"], e["new"]) for e in diff["newly_passing"]] == [("SB-6.1-1", "fail", "pass")]
    assert [(e["id"], e["old"], e["new"]) for e in diff["changed"]] == [("SB-I-3", "not judged", "pass")]
    assert diff["new_tests"] == ["tests/x.py::test_bad[unix]"]
    assert diff["newly_failing"][0]["tests"] == ["tests/x.py::test_bad[unix]"]
    md = cmp.compare_md(diff)
    assert "## Newly failing (1)" in md and "| SB-6.1-2 |" in md
    assert any(line.startswith("  NEWLY FAILING: SB-6.1-2 pass -> fail") for line in cmp.lines(diff))
    page = html.report_html(new, {}, diff)
    assert page.index('id="compare"') < page.index('id="matrix"') and 'id="compare-newly-failing"' in page
    assert cmp.compare(new, new)["newly_failing"] == [] and cmp.headline(cmp.compare(new, new)).startswith("0")


def test_matrix_has_a_row_per_clause_and_links_each_cell_to_its_run(failing_run):
    a, _ = failing_run
    b = json.loads(json.dumps(a))
    b["coverage"]["clauses"].append(clause("SB-7.1-1", "warn", level="SHOULD"))
    runs = [{"name": "ours", "dir": "r/ours", "link": "../ours/report.html", "data": a},
            {"name": "theirs", "dir": "r/theirs", "link": "../theirs/report.html", "data": b},
            {"name": "gone", "dir": "r/gone", "missing": "no results.json"}]
    m = matrix.build(runs)
    ids = [r["id"] for r in m["rows"]]
    assert ids == ["SB-6.1-1", "SB-6.1-2", "SB-7.1-1", "SB-10.1-1", "SB-I-3", "SB-X-1"]
    row = next(r for r in m["rows"] if r["id"] == "SB-7.1-1")
    assert row["cells"][0] is None and row["cells"][1]["outcome"] == "warn" and row["cells"][2] is None
    page = matrix.matrix_html(m)
    assert len(re.findall(r'<tr class="clause"', page)) == len(ids)
    assert 'href="../theirs/report.html#c-SB-7.1-1"' in page
    assert "not read: no results.json" in page
    md = matrix.matrix_md(m)
    assert "| SB-6.1-2 | spec | MUST | fail | fail | - |" in md
    assert matrix.name_of(a, "x/run1", set()) == "bus"
    taken = {"bus"}
    assert matrix.name_of(a, "x/run2", taken) == "bus (run2)"


def _write_run(d, data):
    d.mkdir(parents=True, exist_ok=True)
    (d / "results.json").write_text(json.dumps(data))


def test_run_py_compare_and_matrix(tmp_path, failing_run):
    new, _ = failing_run
    old = json.loads(json.dumps(new))
    for c in old["coverage"]["clauses"]:
        if c["id"] == "SB-6.1-2":
            c["outcome"], c["failing_tests"] = "pass", []
    _write_run(tmp_path / "old", old)
    _write_run(tmp_path / "new", new)
    p = subprocess.run([PYTHON, str(RUN_PY), "--compare", str(tmp_path / "old"), str(tmp_path / "new")],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 1, p.stdout + p.stderr  # a clause newly fails
    assert "NEWLY FAILING: SB-6.1-2 pass -> fail" in p.stdout
    assert "## Newly failing (1)" in (tmp_path / "new" / "compare.md").read_text()
    assert 'id="compare-newly-failing"' in (tmp_path / "new" / "report.html").read_text()
    p = subprocess.run([PYTHON, str(RUN_PY), "--compare", str(tmp_path / "new"), str(tmp_path / "new")],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stdout + p.stderr
    p = subprocess.run([PYTHON, str(RUN_PY), "--matrix", f"ours={tmp_path / 'old'}", str(tmp_path / "new"),
                        str(tmp_path / "missing"), "--report-dir", str(tmp_path / "m")],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stdout + p.stderr
    page = (tmp_path / "m" / "matrix.html").read_text()
    assert 'href="../old/report.html#c-SB-6.1-2"' in page and "<th>ours</th>" in page
    assert "not read" in page and "missing" in p.stdout
    assert (tmp_path / "m" / "matrix.md").exists()
    p = subprocess.run([PYTHON, str(RUN_PY), "--matrix", str(tmp_path / "missing"), "--report-dir",
                        str(tmp_path / "m2")], capture_output=True, text=True, timeout=60)
    assert p.returncode == 2  # nothing to put side by side


FAILING = '''
@pytest.mark.modes("stdio")
@pytest.mark.clause("SB-4.3-1")
def test_closes(bus):
    bus.start(instances=1)
    c = bus.client()
    c.send(b"{broken\\n")
    c.expect_closed()
'''


def test_a_real_run_writes_report_html_beside_report_md(tmp_path, fakes):
    suite = write_suite(tmp_path / "suite", FAILING)
    prof = tmp_path / "p.toml"
    prof.write_text('extra_args = ["--break", "keep-malformed"]\nmodes = ["stdio"]\n')
    res = tmp_path / "res"
    p = subprocess.run([PYTHON, str(RUN_PY), "--daemon", str(fakes["fake_daemon.py"]), "--mock-worker",
                        str(fakes["fake_worker.py"]), "--profile", str(prof), "--spec", str(SPEC), "--tests-dir",
                        str(suite), "--report-dir", str(res), "-j", "1", "--seed", "5", "--wait-timeout", "1",
                        "--no-coverage-gate"],
                       capture_output=True, text=True, timeout=240, cwd=tmp_path)
    assert p.returncode == 1, p.stdout + p.stderr
    page = (res / "report.html").read_text()
    assert (res / "report.md").exists()
    assert 'data-open="t0"' in page and '<table class="transcript">' in page
    assert "report.html" in p.stdout
