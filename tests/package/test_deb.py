"""The Debian package of the kit (cmake/Install.cmake, `cpack -G DEB`):
it builds, its Depends resolve against the archive, and the suite it ships
passes against the daemon it ships, run from a clean directory tree into
which the package is unpacked (nothing of the source or build tree used)."""

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest


def _run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=kw.pop("timeout", 300), **kw)


@pytest.fixture(scope="module")
def deb(build_dir, tmp_path_factory):
    if not shutil.which("cpack") or not shutil.which("dpkg-deb"):
        pytest.skip("cpack or dpkg-deb missing")
    out = tmp_path_factory.mktemp("cpack")
    r = _run(["cpack", "-G", "DEB", "-B", str(out)], cwd=build_dir)
    assert r.returncode == 0, r.stdout + r.stderr
    debs = list(out.glob("stdio-bus_*.deb"))
    assert len(debs) == 1, f"expected one package, got {debs}: {r.stdout}"
    return debs[0]


def control(deb, field):
    return _run(["dpkg-deb", "--field", str(deb), field]).stdout.strip()


def test_package_names_the_kit_version_and_its_dependencies(deb):
    version = Path(__file__).resolve().parents[2].joinpath("VERSION").read_text().strip()
    assert control(deb, "Package") == "stdio-bus"
    assert control(deb, "Version") == version
    depends = control(deb, "Depends")
    for need in ("libcjson1", "python3", "python3-pytest", "python3-pytest-xdist",
                 "python3-pytest-timeout"):
        assert need in depends, f"Depends lacks {need}: {depends}"


def test_package_dependencies_resolve(deb):
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        pytest.skip("needs root and apt-get to simulate the install")
    r = _run(["apt-get", "install", "-s", "-y", "--no-install-recommends", str(deb)])
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]


def test_suite_from_the_package_passes_against_the_packaged_daemon(deb, tmp_path):
    root = tmp_path / "root"
    r = _run(["dpkg-deb", "-x", str(deb), str(root)])
    assert r.returncode == 0, r.stderr
    for path in ("usr/bin/stdio_bus", "usr/bin/stdio-bus-conformance",
                 "usr/libexec/stdio_bus/mock_worker", "usr/libexec/stdio_bus/ref_worker",
                 "usr/share/stdio_bus/conformance/run.py", "usr/share/stdio_bus/conformance/SPEC.md",
                 "usr/share/doc/stdio_bus/LICENSE"):
        assert (root / path).exists(), f"{path} is not in the package"
    version = _run([str(root / "usr/bin/stdio_bus"), "--version"])
    assert version.returncode == 0 and "stdio Bus spec v0.1.0" in version.stdout
    kit = Path(__file__).resolve().parents[2].joinpath("VERSION").read_text().strip()
    suite_version = _run([str(root / "usr/bin/stdio-bus-conformance"), "--version"])
    assert suite_version.stdout.strip() == f"stdio-bus-conformance {kit} (stdio Bus spec v0.1.0)", \
        suite_version.stdout + suite_version.stderr
    # the command finds the daemon and the mock worker next to itself
    r = _run([str(root / "usr/bin/stdio-bus-conformance"), "--report-dir", str(tmp_path / "report")],
             cwd=tmp_path, timeout=600)
    tail = "\n".join(r.stdout.splitlines()[-15:])
    assert r.returncode == 0, f"exit {r.returncode}:\n{tail}\n{r.stderr[-2000:]}"
    assert str(root) in (tmp_path / "report" / "results.json").read_text(), \
        "the report does not name the packaged daemon"
    results = json.loads((tmp_path / "report" / "results.json").read_text())
    assert (results["kit_version"], results["spec_version"]) == (kit, "0.1.0")
