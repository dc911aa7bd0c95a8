"""The worker-side suite on real MCP servers nobody here wrote: the three
reference servers of the official TypeScript SDK, pinned by
package-lock.json, each judged as what it claims to be (`mcp`, MCP
2025-11-25) and held to its committed baseline (baselines/<server>.json),
in which every entry is a real defect of the server with its reason, the
clause of WORKER_SPEC.md and the source document it breaks.

    /usr/bin/python3 -m pytest tests/interop          # after `npm ci` in tests/interop

Fails when a harness change adds a failure or a warning, when a baseline
entry goes stale (the defect is no longer seen), when another set of tests
is skipped (not judged), or when the full-duplex flows of seed 002
(concurrent calls, progress, cancellation, a request to the client answered
by the suite) stop passing on server-everything. Skips, with the reason,
only when node_modules is absent outside CI; in CI (CI set) it fails then:
ci/install-deps.sh installs Node.js and npm from Debian and runs `npm ci`
here.
"""

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

import worker_suite
from worker_suite import MCP_VERSION, by_outcome

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
BIN = HERE / "node_modules" / ".bin"
SERVERS = ("everything", "memory", "filesystem")
BINARIES = ("mcp-server-everything", "mcp-server-memory", "mcp-server-filesystem")

# seed 002's flows, judged on server-everything (its description names the tools)
FULL_DUPLEX = {
    "test_progress_carries_the_token_and_grows": "progress notifications with the request's token",
    "test_no_progress_after_the_answer": "progress stops at the answer",
    "test_concurrent_calls_are_answered_as_they_end": "two calls in flight, answered out of order",
    "test_forty_long_calls_with_progress_stay_whole_lines": "forty calls in flight with progress",
    "test_a_long_call_does_not_delay_a_ping": "the read loop is not stalled by a long call",
    "test_a_cancelled_call_is_never_answered": "notifications/cancelled suppresses the answer",
    "test_cancellation_gets_nothing_in_reply": "notifications/cancelled gets no reply",
    "test_requests_to_the_client_have_a_method_and_fresh_ids": "sampling/createMessage to the suite",
    "test_the_client_answer_resumes_the_call": "the suite's answer (result and error) resumes the call",
    "test_a_call_waiting_for_the_client_does_not_delay_a_ping": "a call waiting on the client stalls nothing",
}


@pytest.fixture(scope="module")
def servers_installed():
    missing = [b for b in BINARIES if not (BIN / b).exists()]
    if not missing:
        return
    if os.environ.get("CI"):
        pytest.fail(f"{', '.join(missing)} not installed in {BIN}: in CI these tests must run "
                    "(ci/install-deps.sh runs `npm ci` in tests/interop)")
    pytest.skip(f"{BIN.parent} is absent: run `npm ci` in tests/interop (ci/install-deps.sh does) "
                "to judge the MCP reference servers")


def run_server(server: str, tmp_path: Path) -> tuple[subprocess.CompletedProcess, dict, Path]:
    """run.py --worker on one server, against its baseline; (process, results.json, report dir)."""
    extra = []
    if server == "memory":  # its knowledge graph in a scratch file (the suite calls read-only tools only)
        extra += ["--worker-env", f"MEMORY_FILE_PATH={tmp_path / 'memory.jsonl'}"]
    if server == "filesystem":  # the one directory it may serve
        (tmp_path / "root").mkdir()
        (tmp_path / "root" / "hello.txt").write_text("hello\n")
        extra += ["--worker", shlex.join([str(BIN / "mcp-server-filesystem"), str(tmp_path / "root")])]
    return worker_suite.run_server(HERE, server, tmp_path, extra)


@pytest.mark.parametrize("server", SERVERS)
def test_each_failure_is_a_baselined_real_defect(server, tmp_path, servers_installed):
    base = json.loads((HERE / "baselines" / f"{server}.json").read_text())
    p, results, report = run_server(server, tmp_path)
    output = f"{p.stdout[-6000:]}\n{p.stderr[-2000:]}\nreport: {report}"
    assert not results["fatal_errors"] and not results["collection_errors"], output
    assert results["profile"].endswith(f"worker profiles mcp; MCP {MCP_VERSION}"), results["profile"]
    s = results["summary"]
    assert s["harness-error"] == 0, output
    # a harness change that adds a failure or a warning
    assert by_outcome(results, "fail") == {} and by_outcome(results, "warn") == {}, output
    # a stale entry: a defect no longer seen
    assert results["baseline"]["stale"] == [], output
    expected = {e["test"] for e in base["expected_failures"]}
    assert set(by_outcome(results, "xfail")) == expected, output
    # what is not judged, and why, is part of the verdict too
    skipped = {**by_outcome(results, "skipped"), **by_outcome(results, "blocked")}
    assert set(skipped) == set(base["not_judged"]), \
        f"skipped now: {json.dumps(skipped, indent=1)}\nbaseline not_judged: {sorted(base['not_judged'])}"
    assert p.returncode == 0 and results["exit_code"] == 0, output
    if server == "everything":
        passed = {n.split("::")[1] for n in by_outcome(results, "pass")}
        lost = {t: what for t, what in FULL_DUPLEX.items() if t not in passed}
        assert not lost, f"full-duplex flows (seed 002) no longer judged as passing: {lost}\n{output}"
    md = (report / "report.md").read_text()
    assert f"- MCP revision: {MCP_VERSION}" in md and "root cause" not in md, md[:2000]


@pytest.mark.parametrize("server", SERVERS)
def test_each_baseline_entry_names_a_clause_of_the_claimed_profile_and_its_source(server):
    sys.path.insert(0, str(ROOT / "conformance"))
    from stdio_bus_conformance.spec.registry import Registry
    from stdio_bus_conformance.worker.description import clause_applies
    registry = Registry.load(ROOT / "WORKER_SPEC.md", "WORKER_SPEC.md")
    base = json.loads((HERE / "baselines" / f"{server}.json").read_text())
    assert base["profiles"] == ["mcp"] and base["mcp_version"] == MCP_VERSION
    for e in base["expected_failures"]:
        assert e["reason"].strip() and e["source"].strip() and e["clauses"], e
        for cid in e["clauses"]:
            assert cid in registry, f"{e['test']}: {cid} is not a clause of WORKER_SPEC.md"
            assert clause_applies(registry[cid].profiles, ["mcp"], MCP_VERSION), \
                f"{e['test']}: {cid} is not a clause of the mcp profile ({MCP_VERSION})"
    assert all(why.strip() for why in base["not_judged"].values())
