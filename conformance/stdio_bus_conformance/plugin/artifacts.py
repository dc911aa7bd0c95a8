"""Reproducers: a failing test's artifact folder (bounded for the whole run)
and the command, or rerun.json, that reruns just that test."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import sys
from pathlib import Path

from ..spec.registry import CONFORMANCE_DIR

ARTIFACT_RUN_CAP = 64 << 20  # bytes of artifacts a whole run may leave


class Artifacts:
    """Reproducers (one of the run's plugins, keys.ARTIFACTS). A run starts
    with no artifacts of an earlier one in its report folder."""

    def __init__(self, run, subjects):
        self.run = run
        self.subjects = subjects   # the daemon or worker a reproducer reruns
        if not run.is_worker and not run.config.option.collectonly:
            self._clean_report_dir()

    def _clean_report_dir(self):
        os.makedirs(self.run.report_dir, exist_ok=True)
        shutil.rmtree(os.path.join(self.run.report_dir, "artifacts"), ignore_errors=True)

    def artifact_room(self) -> int:
        """Bytes of artifacts the run may still write (ARTIFACT_RUN_CAP in all;
        xdist workers share the folder, so it is measured, not counted)."""
        used = 0
        for root, _, files in os.walk(os.path.join(self.run.report_dir, "artifacts")):
            for f in files:
                try:
                    used += os.stat(os.path.join(root, f)).st_size
                except OSError:
                    pass
        return max(0, ARTIFACT_RUN_CAP - used)

    def artifact_dir(self, nodeid: str) -> Path:
        safe = re.sub(r"[^A-Za-z0-9_.\-\[\]]+", "_", nodeid).strip("_")
        return Path(self.run.report_dir) / "artifacts" / safe

    def rerun_command(self, item) -> str:
        """The command that reruns just this test with the same daemon,
        profile, mock worker, spec and seed, from any directory: it collects
        what this run collected (so the node id is the same) and keeps only
        that node id."""
        opt = self.run.config.getoption
        cmd = [sys.executable, str(CONFORMANCE_DIR / "run.py")]
        if self.run.worker_mode:
            desc = self.subjects.wctx.desc
            if desc.path:
                cmd += ["--worker-description", desc.path]
            cmd += ["--worker", desc.command_line()]
            for p in desc.profiles:
                cmd += ["--worker-profile", p]
            for env_item in opt("worker_env"):  # not `item`: the test's node, used below
                cmd += ["--worker-env", env_item]
            cmd += ["--mcp-version", desc.mcp_version]
            if opt("wait_timeout") is not None:
                cmd += ["--wait-timeout", str(opt("wait_timeout"))]
        else:
            # everything else is in the artifact folder (rerun.json, profile.toml): see write_rerun
            return " ".join(shlex.quote(c) for c in cmd + ["--rerun", str(self.artifact_dir(item.nodeid))])
        if opt("spec"):
            cmd += ["--spec", os.path.abspath(opt("spec"))]
        cmd += ["--seed", str(self.run.seed), "-j", "1", "--no-coverage-gate",
                "--report-dir", os.path.join(self.run.report_dir, "rerun")]
        for arg in self.run.config.args:
            cmd += ["--tests-dir", os.path.abspath(str(arg).split("::")[0])]
        cmd += ["--only", item.nodeid]
        return " ".join(shlex.quote(c) for c in cmd)

    def write_rerun(self, dest: Path, item) -> None:
        """What `run.py --rerun <folder>` needs to rerun the test, in the
        folder itself: the profile (copied) and rerun.json. The daemon, the
        mock worker and the suite are named by path (absolute, or for the
        suite relative to run.py): a folder downloaded from CI reruns where
        they exist at the same place, or with --daemon/--mock-worker."""
        opt = self.run.config.getoption
        (dest / "profile.toml").write_text(self.subjects.ctx.profile.to_toml())

        def where(path: str) -> str:
            p = Path(path).resolve()
            return str(p.relative_to(CONFORMANCE_DIR)) if CONFORMANCE_DIR in p.parents else str(p)
        data = {
            "nodeid": item.nodeid,
            "daemon": self.subjects.ctx.daemon,
            "mock_worker": self.subjects.ctx.mock_worker,
            "profile": "profile.toml",
            "spec": os.path.abspath(opt("spec")) if opt("spec") else None,
            "seed": self.run.seed,
            "wait_timeout": opt("wait_timeout"),
            "timeout": opt("timeout") if hasattr(self.run.config.option, "timeout") else None,
            "tests_dirs": [where(str(a).split("::")[0]) for a in self.run.config.args],
            "preflight": not opt("no_preflight"),
        }
        (dest / "rerun.json").write_text(json.dumps(data, indent=2) + "\n")
