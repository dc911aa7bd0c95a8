"""Running the worker-side suite on one MCP server held to its committed
baseline: what test_interop.py and corpus/test_corpus.py share."""

import json
import subprocess
import sys
from pathlib import Path

RUN_PY = Path(__file__).resolve().parents[2] / "conformance" / "run.py"
MCP_VERSION = "2025-11-25"


def run_server(folder: Path, server: str, tmp_path: Path, extra=()) -> tuple[subprocess.CompletedProcess, dict, Path]:
    """run.py --worker on <folder>/<server>.toml against <folder>/baselines/<server>.json,
    in tmp_path as its working directory; (process, results.json, report dir)."""
    report = tmp_path / "report"
    cmd = [sys.executable, str(RUN_PY), "--worker-description", str(folder / f"{server}.toml"),
           "--mcp-version", MCP_VERSION, "--baseline", str(folder / "baselines" / f"{server}.json"),
           "--report-dir", str(report), "-j", "2", "--seed", "15", "-q", *extra]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=900, cwd=tmp_path)
    results = report / "results.json"
    assert results.exists(), f"no results.json\n{p.stdout[-4000:]}\n{p.stderr[-2000:]}"
    return p, json.loads(results.read_text()), report


def by_outcome(results: dict, outcome: str) -> dict:
    return {t["nodeid"]: t["message"] for t in results["tests"] if t["outcome"] == outcome}
