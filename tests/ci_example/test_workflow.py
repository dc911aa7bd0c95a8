"""ci/github-actions-example.yml really runs: its `run` steps, executed with
bash in a scratch tree laid out as GitHub Actions would (the workspace, a
stand-in daemon repository checked out in daemon/), against the kit as
committed here (cloned from a bare copy of this repository, at HEAD), with
the only change an adopter makes: the BUILD step (the stand-in's Makefile).
Steps that `use` an action (checkout, upload, JUnit publishing) are played
or skipped; the install step is checked, not run (it needs the network)."""

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

yaml = pytest.importorskip("yaml", reason="python3-yaml is needed to read the workflow")

ROOT = Path(__file__).resolve().parents[2]
WORKFLOW = ROOT / "ci" / "github-actions-example.yml"


def load():
    doc = yaml.safe_load(WORKFLOW.read_text())
    (job,) = doc["jobs"].values()
    return doc, job


def run_step(step, workspace, env, timeout=900):
    cwd = workspace / step.get("working-directory", ".")
    return subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", step["run"]],
                          cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def job_env(job, values):
    """The job's env with ${{ vars.NAME }} replaced as GitHub would."""
    env = {}
    for key, value in job.get("env", {}).items():
        env[key] = re.sub(r"\$\{\{\s*vars\.(\w+)\s*\}\}", lambda m: values.get(m.group(1), ""), str(value))
    return env


def test_permissions_are_stated_and_minimal():
    doc, job = load()
    assert doc["permissions"] == {"contents": "read"}
    assert job["permissions"] == {"contents": "read", "checks": "write"}
    publish = next(s for s in job["steps"] if "junit" in s.get("uses", ""))
    assert "pull_request.head.repo.full_name == github.repository" in publish["if"], \
        "the JUnit check needs checks: write, which a fork's pull request never has"


def test_install_step_names_only_debian_packages_that_exist():
    _, job = load()
    install = next(s for s in job["steps"] if s["name"].startswith("Install"))
    words = install["run"].split("--no-install-recommends", 1)[1].split()
    packages = [w for w in words if w != "\\"]
    assert "python3-pytest-timeout" in packages and "libcjson-dev" in packages
    for p in packages:
        r = subprocess.run(["apt-cache", "show", p], capture_output=True, text=True)
        assert r.returncode == 0, f"{p}: not a Debian package here"


@pytest.fixture(scope="module")
def scratch(tmp_path_factory, build_dir):
    """A workspace with the stand-in daemon repository and a bare copy of
    this repository with a tag on HEAD to clone the kit from."""
    ws = tmp_path_factory.mktemp("workspace")
    kit_git = ws.parent / "kit.git"
    subprocess.run(["git", "clone", "--quiet", "--bare", str(ROOT), str(kit_git)], check=True)
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True,
                          text=True, check=True).stdout.strip()
    subprocess.run(["git", "-C", str(kit_git), "tag", "kit-under-test", head], check=True)
    daemon = ws / "daemon"
    (daemon / "ci").mkdir(parents=True)
    # The stand-in's build: a daemon that is ours under another name.
    (daemon / "Makefile").write_text(
        "build/daemon:\n"
        "\tmkdir -p build\n"
        f"\tprintf '#!/bin/sh\\nexec %s \"$$@\"\\n' '{build_dir / 'stdio_bus'}' > $@\n"
        "\tchmod +x $@\n")
    # Its profile claims our extensions (it is our daemon); no baseline.
    shutil.copy(ROOT / "conformance" / "profiles" / "stdio_bus.toml", daemon / "ci" / "stdio-bus-profile.toml")
    return ws, f"file://{kit_git}"


def test_kit_step_stops_with_a_clear_error_while_the_variables_are_unset(scratch):
    ws, _ = scratch
    _, job = load()
    step = next(s for s in job["steps"] if s["name"].startswith("Build and install the conformance kit"))
    r = run_step(step, ws, {**os.environ, **job_env(job, {})}, timeout=60)
    assert r.returncode != 0
    assert "STDIO_BUS_KIT_GIT" in r.stdout + r.stderr


def test_run_steps_pass_against_a_stand_in_daemon_repository(scratch):
    ws, kit_git = scratch
    _, job = load()
    env = {**os.environ, **job_env(job, {"STDIO_BUS_KIT_GIT": kit_git, "STDIO_BUS_KIT_REF": "kit-under-test"})}
    ran = []
    for step in job["steps"]:
        if "run" not in step or step["name"].startswith("Install"):
            continue
        r = run_step(step, ws, env)
        tail = "\n".join((r.stdout + r.stderr).splitlines()[-25:])
        assert r.returncode == 0, f"step {step['name']!r} failed ({r.returncode}):\n{tail}"
        ran.append(step["name"])
    assert ran == ["Build the daemon under test", "Build and install the conformance kit",
                   "Run the conformance suite"]
    results = (ws / "conformance-results" / "results.json").read_text()
    assert "daemon/build/daemon" in results
    assert (ws / "conformance-results" / "junit.xml").exists()
