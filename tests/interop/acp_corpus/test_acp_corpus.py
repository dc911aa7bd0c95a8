"""The worker-side suite's `acp` profile on published ACP agents nobody here
wrote, as a new user runs it: no worker description, no credentials, offline
(issue 35). Pinned by this folder's package-lock.json:

    claude-code-acp   @sudocode-ai/claude-code-acp 0.13.10 (ACP SDK 0.13.1, TypeScript)
    claude-agent-acp  @zed-industries/claude-agent-acp 0.23.1 (ACP SDK 0.17.0, TypeScript)
    codex-acp         @zed-industries/codex-acp 0.16.0 (a Rust binary behind a node launcher)

Each is held to its baseline (baselines/<agent>.json): every expected
failure a real defect, classified by hand in conformance/README.md; the
tests not judged, and why; the one environment root cause (no login, no
model back end here), named once. Fails on a new failure or warning, a stale
entry, another set of tests not judged, another root cause, or a run that
judged fewer MUST clauses than the baseline says.

    (cd tests/interop/acp_corpus && npm ci)
    /usr/bin/python3 -m pytest -n 2 tests/interop/acp_corpus     # or ctest -R interop.acp-corpus

Skips without node_modules outside CI; in CI (CI set) it fails then.
"""

import json
import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/interop: worker_suite
from worker_suite import run_bounded  # noqa: E402

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
RUN_PY = ROOT / "conformance" / "run.py"
AGENTS = {name: HERE / "node_modules" / ".bin" / name for name in ("claude-code-acp", "claude-agent-acp", "codex-acp")}


# codex-acp outlives its input (each process waits the answer deadline, then SIGTERM): two at a time
JOBS = {"codex-acp": "2"}


def installed(agent: str) -> Path:
    path = AGENTS[agent]
    if path.exists():
        return path
    if os.environ.get("CI"):
        pytest.fail(f"{path} is not installed: in CI these tests must run "
                    "(ci/install-deps.sh runs `npm ci` in tests/interop/acp_corpus)")
    pytest.skip(f"{path} is absent: run `npm ci` in tests/interop/acp_corpus (ci/install-deps.sh does)")


def by_outcome(results: dict, *outcomes) -> dict:
    return {t["nodeid"]: t["message"] for t in results["tests"] if t["outcome"] in outcomes}


@pytest.mark.parametrize("agent", sorted(AGENTS))
def test_each_agent_is_judged_on_its_transport_and_held_to_its_baseline(agent, tmp_path):
    path = installed(agent)
    base = json.loads((HERE / "baselines" / f"{agent}.json").read_text())
    report = tmp_path / "report"
    # no description, no credentials: what a new user runs; HOME is a scratch one (no login to find)
    env = {k: v for k, v in os.environ.items() if not k.endswith(("_API_KEY", "_TOKEN"))}
    env["HOME"] = str(tmp_path)
    cmd = [sys.executable, str(RUN_PY), "--worker", str(path), "--worker-profile", "acp",
           "--baseline", str(HERE / "baselines" / f"{agent}.json"), "--report-dir", str(report),
           "-j", JOBS.get(agent, "1"), "--seed", "35", "-q"]
    p = run_bounded(cmd, tmp_path, env)
    results = json.loads((report / "results.json").read_text())
    output = f"{p.stdout[-6000:]}\n{p.stderr[-2000:]}\nreport: {report}"
    assert not results["fatal_errors"] and not results["collection_errors"], output
    assert results["summary"]["harness-error"] == 0, output
    assert by_outcome(results, "fail", "warn") == {}, output
    assert results["baseline"]["stale"] == [], output
    assert set(by_outcome(results, "xfail")) == {e["test"] for e in base["expected_failures"]}, output
    assert set(by_outcome(results, "skipped", "blocked")) == set(base["not_judged"]), \
        f"not judged now: {json.dumps(by_outcome(results, 'skipped', 'blocked'), indent=1)}"
    # the environment's root cause, once, on its own line; what it blocks is not judged, never failed
    lines = [line for line in p.stdout.splitlines()
             if line.startswith("blocked: the agent needs authentication / its back end")]
    assert len(lines) == base["environment_blocked"], output
    env_blocked = {n for n, m in by_outcome(results, "blocked").items() if m.startswith("blocked: environment:")}
    assert bool(env_blocked) == bool(lines), output  # blocked by a defect: that defect's test names it
    judged = results["judged_must"]
    assert judged["whole"] and judged["judged"] >= base["judged_must"] and judged["total"] == base["must_apply"], judged
    assert p.returncode == 0 and results["exit_code"] == 0, output


@pytest.mark.parametrize("agent", sorted(AGENTS))
def test_each_baseline_entry_names_an_acp_clause_and_its_reason(agent):
    sys.path.insert(0, str(ROOT / "conformance"))
    from stdio_bus_conformance.spec.registry import Registry
    registry = Registry.load(ROOT / "WORKER_SPEC.md", "WORKER_SPEC.md")
    base = json.loads((HERE / "baselines" / f"{agent}.json").read_text())
    for e in base["expected_failures"]:
        assert e["reason"].strip() and e["source"].strip() and e["clauses"], e
        for cid in e["clauses"]:
            assert "acp" in (registry[cid].profiles or {}), f"{e['test']}: {cid} is not a clause of the acp profile"
    assert all(why.strip() for why in base["not_judged"].values())
