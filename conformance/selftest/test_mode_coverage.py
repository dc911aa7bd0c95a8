"""conformance/mutants/mode_coverage.py: which modes judged each MUST clause."""

import json
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
SCRIPT = HERE.parent / "mutants" / "mode_coverage.py"
SPEC = HERE.parents[1] / "SPEC.md"


def run(tmp_path, tests, *args):
    results = tmp_path / "results.json"
    results.write_text(json.dumps({"tests": tests}))
    r = subprocess.run([sys.executable, str(SCRIPT), str(results), "--spec", str(SPEC), *args],
                       capture_output=True, text=True)
    return r.returncode, r.stdout


def entry(nodeid, clauses, mode, outcome="pass"):
    return {"nodeid": f"tests/test_x.py::{nodeid}[{mode}]", "clauses": clauses, "mode": mode,
            "outcome": outcome}


def rows(tmp_path, tests):
    rc, out = run(tmp_path, tests, "--json")
    return {r["id"]: r for r in json.loads(out)}


def test_a_clause_for_every_mode_judged_in_one_is_a_gap(tmp_path):
    got = rows(tmp_path, [entry("t1", ["SB-5.3-4"], "stdio")])
    assert got["SB-5.3-4"]["scope"] == "all"
    assert got["SB-5.3-4"]["modes"] == ["stdio"] and got["SB-5.3-4"]["missing"] == ["unix", "tcp"]


def test_scopes_socket_single_mode_and_any(tmp_path):
    got = rows(tmp_path, [entry("t", ["SB-7.2-1", "SB-4.1.1-3", "SB-9.3-2"], m) for m in ("unix", "tcp")])
    assert got["SB-7.2-1"]["scope"] == "socket" and got["SB-7.2-1"]["missing"] == []
    assert got["SB-4.1.1-3"]["scope"] == "unix" and got["SB-4.1.1-3"]["missing"] == []
    assert got["SB-9.3-2"]["scope"] == "any" and got["SB-9.3-2"]["missing"] == []


def test_skipped_and_unsupported_tests_judge_nothing(tmp_path):
    got = rows(tmp_path, [entry("t", ["SB-8.1-6"], "unix", "skipped"),
                          entry("t", ["SB-8.1-6"], "tcp", "unsupported"),
                          entry("t", ["SB-8.1-6"], "stdio", "fail")])
    assert got["SB-8.1-6"]["modes"] == ["stdio"]
    assert got["SB-8.1-6"]["not_run"] == ["unix", "tcp"]


def test_only_must_black_box_clauses_are_listed(tmp_path):
    got = rows(tmp_path, [])
    assert "SB-I-37" not in got          # SHOULD
    assert "SB-3.2-4" not in got         # MUST, but inspection
    assert got["SB-6.1.2-2"]["level"] == "MUST NOT"


def test_exit_status_and_summary(tmp_path):
    rc, out = run(tmp_path, [entry("t", ["SB-5.3-4"], "stdio")])
    assert rc == 1 and "SB-5.3-4" in out and "gaps:" in out.splitlines()[-1]
    rc, _ = run(tmp_path, [], "--spec", str(tmp_path / "missing.md"))
    assert rc == 2
