"""The harness as a Python package (conformance/pyproject.toml): installed
offline into a venv with Debian's setuptools and pip, from a copy of the
kit's files as a fresh clone has them, it gives a working
`stdio-bus-conformance` command that knows the kit version and the spec
revision, finds SPEC.md, WORKER_SPEC.md and the suite's tests inside the
installed package, and judges our daemon; its pytest plugin entry point
stays inert in a pytest run that is not a conformance run."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

TOP = Path(__file__).resolve().parents[2]
PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable


def _run(cmd, **kw):
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True,
                          timeout=kw.pop("timeout", 300), **kw)


@pytest.fixture(scope="module")
def venv(tmp_path_factory):
    """A venv (Debian's pytest, xdist and timeout visible) with the package
    pip-installed offline from a copy of the tracked files."""
    if _run([PYTHON, "-c", "import importlib.util as u; assert all(u.find_spec(m) for m in "
                           "('ensurepip', 'pip', 'setuptools', 'wheel'))"]).returncode != 0:
        pytest.skip("needs python3-venv, python3-pip, python3-setuptools and python3-wheel")
    tmp = tmp_path_factory.mktemp("pip")
    files = _run(["git", "-C", TOP, "ls-files", "-co", "--exclude-standard", "conformance",
                  "SPEC.md", "WORKER_SPEC.md", "VERSION"])
    if files.returncode != 0:
        pytest.skip("not a git checkout")
    src = tmp / "src"
    for name in files.stdout.splitlines():
        if (TOP / name).is_file():
            (src / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(TOP / name, src / name)
    r = _run([PYTHON, "-m", "venv", "--system-site-packages", tmp / "v"])
    assert r.returncode == 0, r.stderr
    r = _run([tmp / "v/bin/pip", "install", "--no-build-isolation", "--no-index", src / "conformance"])
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    shutil.rmtree(src)  # nothing of the source may be needed from now on
    return tmp / "v"


def test_command_names_the_kit_version_and_the_spec_revision(venv):
    version = (TOP / "VERSION").read_text().strip()
    r = _run([venv / "bin/stdio-bus-conformance", "--version"])
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == f"stdio-bus-conformance {version} (stdio Bus spec v0.1.0)"


def test_package_data_holds_the_specs_and_the_suite(venv):
    r = _run([venv / "bin/python", "-c",
              "from stdio_bus_conformance.common.location import SUITE_DIR; from stdio_bus_conformance.spec.registry "
              "import find_spec; print(SUITE_DIR); print(find_spec(None, 'SPEC.md')); "
              "print(find_spec(None, 'WORKER_SPEC.md'))"])
    assert r.returncode == 0, r.stderr
    suite, spec, worker_spec = (Path(p) for p in r.stdout.split())
    assert venv in suite.parents and suite.name == "_suite"
    assert spec == suite / "SPEC.md" and worker_spec == suite / "WORKER_SPEC.md"
    assert spec.read_text() == (TOP / "SPEC.md").read_text()
    assert {p.name for p in (suite / "tests").glob("test_*.py")} == \
        {p.name for p in (TOP / "conformance/tests").glob("test_*.py")}
    assert (suite / "worker_tests" / "test_mcp.py").is_file() and (suite / "profiles" / "stdio_bus.toml").is_file()


def test_installed_command_judges_our_daemon(venv, build_dir, tmp_path):
    daemon, mock = build_dir / "stdio_bus", build_dir / "mock_workers" / "mock_worker"
    if not (daemon.exists() and mock.exists()):
        pytest.skip(f"build the daemon and the mock worker in {build_dir} first")
    r = _run([venv / "bin/stdio-bus-conformance", "--daemon", daemon, "--mock-worker", mock,
              "--section", "4", "--no-coverage-gate", "--report-dir", tmp_path / "r"], cwd=tmp_path, timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    data = json.loads((tmp_path / "r" / "results.json").read_text())
    assert data["summary"]["pass"] > 20 and data["summary"]["fail"] == 0
    assert data["spec"].startswith(str(venv)) and data["spec_version"] == "0.1.0"
    assert all(t["nodeid"].startswith("tests/test_") for t in data["tests"])


def test_pytest_plugin_entry_point_is_inert_outside_conformance_runs(venv, tmp_path):
    (tmp_path / "test_other.py").write_text("def test_other():\n    assert True\n")
    r = _run([venv / "bin/python", "-m", "pytest", "-q", "-p", "no:cacheprovider", tmp_path / "test_other.py"],
             cwd=tmp_path)
    assert r.returncode == 0 and "1 passed" in r.stdout, r.stdout + r.stderr
    assert not (tmp_path / "conformance-results").exists()
    # and it is there: a test of one's own may use the bus fixture in a conformance run
    r = _run([venv / "bin/python", "-m", "pytest", "--help"])
    assert "stdio Bus conformance" in r.stdout and "--daemon" in r.stdout
