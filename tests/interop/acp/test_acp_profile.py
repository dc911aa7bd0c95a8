"""The worker profile `acp` (WORKER_SPEC.md, Appendix G) on the interop
agent (agent.mjs, agent.toml): 0 findings as written, and each broken
variant (ACP_AGENT_BREAK) fails, or for a SHOULD warns, on exactly the
clause it breaks and nothing else."""

import json
import subprocess
import sys

import pytest

from test_acp_bus import HERE, ROOT, SDK, installed  # noqa: F401  (the fixture: skip without npm ci)

RUN_PY = ROOT / "conformance" / "run.py"
# break -> (failing clauses, warned clauses)
BREAKS = {
    "": (set(), set()),
    "envelope": ({"SB-G-1"}, set()),
    "banner": ({"SB-G-2"}, set()),
    "version": ({"SB-G-4"}, set()),
    "no-cancel": ({"SB-G-7"}, set()),
    "string-version": ({"SB-G-3", "SB-G-4"}, set()),
    "same-session": ({"SB-G-5"}, set()),
    "bad-stop": ({"SB-G-6"}, set()),
    "linger": (set(), {"SB-G-9"}),
}


def clauses_of(results, outcome):
    out = set()
    for t in results["tests"]:
        if t["outcome"] == outcome:
            out |= set(t.get("clauses") or [])
    return out


@pytest.mark.parametrize("brk", BREAKS, ids=lambda b: b or "as-written")
def test_the_profile_judges_the_agent_on_what_it_breaks(brk, tmp_path):
    report = tmp_path / "report"
    cmd = [sys.executable, str(RUN_PY), "--worker-description", str(HERE / "agent.toml"),
           "--report-dir", str(report), "-j", "2", "--seed", "23", "-q"]
    if brk:
        cmd += ["--worker-env", f"ACP_AGENT_BREAK={brk}"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=tmp_path)
    results = json.loads((report / "results.json").read_text())
    output = f"{p.stdout[-4000:]}\n{p.stderr[-2000:]}"
    assert not results["fatal_errors"] and not results["collection_errors"], output
    assert results["summary"]["harness-error"] == 0, output
    failing, warned = BREAKS[brk]
    assert clauses_of(results, "fail") == failing, output
    assert clauses_of(results, "warn") == warned, output
    judged = {t["nodeid"] for t in results["tests"] if t["outcome"] in ("pass", "fail", "warn")}
    assert len(judged) == 10 and all("test_acp.py" in n for n in judged), sorted(judged)
    assert p.returncode == (1 if failing else 0), output
