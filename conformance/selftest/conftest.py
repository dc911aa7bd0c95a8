"""Fixtures of the harness self-tests (fixtures only: this directory also
holds the suite/ the harness runs, and must not change how that runs)."""

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
CONFORMANCE = HERE.parent
RUN_PY = CONFORMANCE / "run.py"
SPEC = HERE / "data" / "SPEC.md"
SUITE = HERE / "suite"
PYTHON = sys.executable
sys.path.insert(0, str(CONFORMANCE))


@dataclass
class Run:
    rc: int
    output: str
    results: dict | None
    report_dir: Path

    @property
    def outcomes(self) -> dict:
        """nodeid -> outcome."""
        return {t["nodeid"]: t["outcome"] for t in (self.results or {}).get("tests", [])}

    def outcome_of(self, name: str) -> set:
        """Outcomes of every test whose node id contains name."""
        return {o for n, o in self.outcomes.items() if name in n}

    @property
    def last_line(self) -> str:
        lines = [line for line in self.output.splitlines() if line.strip()]
        return lines[-1] if lines else ""


@pytest.fixture(scope="session")
def fakes(tmp_path_factory):
    """fake_daemon.py and fake_worker.py as executables (a checkout may have
    lost their mode bits)."""
    names = ("fake_daemon.py", "fake_worker.py")
    if all(os.access(HERE / n, os.X_OK) for n in names):
        return {n: HERE / n for n in names}
    d = tmp_path_factory.mktemp("fakes")
    for name in names + ("fake_json.py",):
        shutil.copyfile(HERE / name, d / name)
        (d / name).chmod(0o755)
    return {n: d / n for n in names}


@pytest.fixture
def harness(tmp_path, fakes):
    """harness(*run_py_args, breaks=(), profile="", tests=SUITE, spec=SPEC, jobs=1)
    runs run.py against the fake daemon and returns a Run."""
    count = [0]

    def run(*args, breaks=(), profile="", tests=SUITE, spec=SPEC, jobs=1, daemon=None,
            mock=None, env=None, report_dir=None):
        count[0] += 1
        prof = tmp_path / f"profile{count[0]}.toml"
        prof.write_text(f'name = "fake"\nextra_args = {json.dumps([a for b in breaks for a in ("--break", b)])}\n'
                        + profile)
        res = Path(report_dir) if report_dir else tmp_path / f"res{count[0]}"
        cmd = [PYTHON, str(RUN_PY), "--daemon", str(daemon or fakes["fake_daemon.py"]),
               "--mock-worker", str(mock or fakes["fake_worker.py"]), "--profile", str(prof),
               "--report-dir", str(res), "-j", str(jobs), "--seed", "7", "--wait-timeout", "1"]
        if spec is not None:
            cmd += ["--spec", str(spec)]
        if tests is not None and not any("::" in str(a) or str(a).endswith(".py") for a in args):
            cmd += ["--tests-dir", str(tests)]
        cmd += [str(a) for a in args]
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=240, cwd=tmp_path,
                           env=dict(os.environ, **(env or {})))
        results = None
        if (res / "results.json").exists():
            results = json.loads((res / "results.json").read_text())
        return Run(p.returncode, p.stdout + p.stderr, results, res)

    return run


def write_suite(path: Path, code: str) -> Path:
    """A suite directory holding one test file with the given code."""
    path.mkdir(parents=True, exist_ok=True)
    (path / "test_generated.py").write_text("import pytest\n\n" + code)
    return path
