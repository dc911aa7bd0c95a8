"""Running the worker-side suite on one MCP server held to its committed
baseline: what test_interop.py and corpus/test_corpus.py share."""

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

RUN_PY = Path(__file__).resolve().parents[2] / "conformance" / "run.py"
MCP_VERSION = "2025-11-25"
RUN_LIMIT = 600  # s: inside ctest's 900 s, so a run that hangs fails here with what it printed


def run_bounded(cmd: list, cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    """Runs the suite in a session of its own; past RUN_LIMIT the whole
    session is killed (its pytest workers and the servers hold the pipes) and
    the test fails with the run's last output."""
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=cwd, env=env,
                          start_new_session=True) as p:
        try:
            out, err = p.communicate(timeout=RUN_LIMIT)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            out, err = p.communicate()
            pytest.fail(f"the run did not end within {RUN_LIMIT} s:\n{out[-6000:]}\n{err[-2000:]}")
    return subprocess.CompletedProcess(cmd, p.returncode, out, err)


def run_server(folder: Path, server: str, tmp_path: Path, extra=()) -> tuple[subprocess.CompletedProcess, dict, Path]:
    """run.py --worker on <folder>/<server>.toml against <folder>/baselines/<server>.json,
    in tmp_path as its working directory; (process, results.json, report dir)."""
    report = tmp_path / "report"
    cmd = [sys.executable, str(RUN_PY), "--worker-description", str(folder / f"{server}.toml"),
           "--mcp-version", MCP_VERSION, "--baseline", str(folder / "baselines" / f"{server}.json"),
           "--report-dir", str(report), "-j", "2", "--seed", "15", "-q", *extra]
    p = run_bounded(cmd, tmp_path)
    results = report / "results.json"
    assert results.exists(), f"no results.json\n{p.stdout[-4000:]}\n{p.stderr[-2000:]}"
    return p, json.loads(results.read_text()), report


def by_outcome(results: dict, outcome: str) -> dict:
    return {t["nodeid"]: t["message"] for t in results["tests"] if t["outcome"] == outcome}
