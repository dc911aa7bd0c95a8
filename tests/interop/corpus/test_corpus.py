"""The worker-side suite on MCP stdio servers of four stacks, pinned by this
folder's package-lock.json: the official TypeScript SDK v1
(server-sequential-thinking) and v2 (server-budget-allocator), tmcp (a
TypeScript framework that does not use the SDK; tmcp-server.mjs is its
quick start) and a Rust binary shipped in an npm package (leanspec-mcp).
Each is judged as an MCP server (`mcp`, MCP 2025-11-25) and held to its
committed baseline (baselines/<server>.json): every entry a real defect,
with the server's code path, the clause of WORKER_SPEC.md and the source it
breaks.

    (cd tests/interop/corpus && npm ci)
    /usr/bin/python3 -m pytest tests/interop/corpus      # or ctest -L interop

Fails when a test fails or warns that the baseline does not list, when an
entry goes stale, or when another set of tests is skipped or blocked. Skips
when node_modules is absent outside CI; in CI (CI set) it fails then.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/interop: worker_suite
import worker_suite  # noqa: E402
from worker_suite import MCP_VERSION, by_outcome  # noqa: E402

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
# server -> what must be installed for it
SERVERS = {
    "sequential-thinking": "node_modules/.bin/mcp-server-sequential-thinking",
    "budget-allocator": "node_modules/.bin/mcp-budget-allocator-server",
    "tmcp": "node_modules/@tmcp/transport-stdio/package.json",
    "leanspec": "node_modules/@leanspec/mcp-linux-x64/leanspec-mcp",
}


def installed(server: str) -> None:
    path = HERE / SERVERS[server]
    if path.exists():
        return
    if os.environ.get("CI"):
        pytest.fail(f"{path} is not installed: in CI these tests must run "
                    "(ci/install-deps.sh runs `npm ci` in tests/interop/corpus)")
    pytest.skip(f"{path} is absent: run `npm ci` in tests/interop/corpus (ci/install-deps.sh does)")


def run_server(server: str, tmp_path: Path) -> tuple[subprocess.CompletedProcess, dict, Path]:
    """run.py --worker on one server, against its baseline, in an empty
    scratch directory (leanspec-mcp serves the specs of its working
    directory); (process, results.json, report dir)."""
    return worker_suite.run_server(HERE, server, tmp_path)


@pytest.mark.parametrize("server", sorted(SERVERS))
def test_each_failure_is_a_baselined_real_defect(server, tmp_path):
    installed(server)
    base = json.loads((HERE / "baselines" / f"{server}.json").read_text())
    p, results, report = run_server(server, tmp_path)
    output = f"{p.stdout[-6000:]}\n{p.stderr[-2000:]}\nreport: {report}"
    assert not results["fatal_errors"] and not results["collection_errors"], output
    assert results["profile"].endswith(f"worker profiles mcp; MCP {MCP_VERSION}"), results["profile"]
    assert results["summary"]["harness-error"] == 0, output
    # a harness change that adds a failure or a warning
    assert by_outcome(results, "fail") == {} and by_outcome(results, "warn") == {}, output
    # a stale entry: a defect no longer seen
    assert results["baseline"]["stale"] == [], output
    assert set(by_outcome(results, "xfail")) == {e["test"] for e in base["expected_failures"]}, output
    # what is not judged, and why, is part of the verdict too
    skipped = {**by_outcome(results, "skipped"), **by_outcome(results, "blocked")}
    assert set(skipped) == set(base["not_judged"]), \
        f"skipped now: {json.dumps(skipped, indent=1)}\nbaseline not_judged: {sorted(base['not_judged'])}"
    assert p.returncode == 0 and results["exit_code"] == 0, output


@pytest.mark.parametrize("server", sorted(SERVERS))
def test_each_baseline_entry_names_the_defect_its_code_path_and_source(server):
    sys.path.insert(0, str(ROOT / "conformance"))
    from stdio_bus_conformance.spec.registry import Registry
    from stdio_bus_conformance.worker.description import clause_applies
    registry = Registry.load(ROOT / "WORKER_SPEC.md", "WORKER_SPEC.md")
    base = json.loads((HERE / "baselines" / f"{server}.json").read_text())
    assert base["profiles"] == ["mcp"] and base["mcp_version"] == MCP_VERSION
    for e in base["expected_failures"]:
        assert e["reason"].strip() and e["source"].strip() and e["code_path"].strip() and e["clauses"], e
        for cid in e["clauses"]:
            assert cid in registry, f"{e['test']}: {cid} is not a clause of WORKER_SPEC.md"
            assert clause_applies(registry[cid].profiles, ["mcp"], MCP_VERSION), \
                f"{e['test']}: {cid} is not a clause of the mcp profile ({MCP_VERSION})"
    assert all(why.strip() for why in base["not_judged"].values())
