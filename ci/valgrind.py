#!/usr/bin/env python3
"""Runs a test command with the daemon under valgrind memcheck, then judges
every report: zero errors, zero bytes definitely or indirectly lost, and no
file descriptor open at exit beyond stdin, stdout and stderr.

usage: ci/valgrind.py LOG_DIR -- COMMAND...
The command sees SB_DAEMON_WRAPPER (the valgrind command line) and
SB_TIMEOUT_SCALE; tests/e2e/busproc.py and the conformance profile honour them.
"""
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path


def judge(report: Path) -> list[str]:
    text = report.read_text(errors="replace")
    problems = []
    m = re.search(r"ERROR SUMMARY: (\d+) errors", text)
    if not m:
        problems.append("no ERROR SUMMARY (the daemon was killed before valgrind could report)")
    elif int(m.group(1)):
        problems.append(f"{m.group(1)} memcheck errors")
    for kind in ("definitely", "indirectly"):
        m = re.search(rf"{kind} lost: ([\d,]+) bytes", text)
        if m and m.group(1) != "0":
            problems.append(f"{m.group(1)} bytes {kind} lost")
    m = re.search(r"FILE DESCRIPTORS: (\d+) open(?: \((\d+) std\))? at exit", text)
    if m:
        open_fds, std = int(m.group(1)), int(m.group(2) or 0)
        # valgrind's own log file is inherited from the harness as well
        if open_fds - std > 0:
            extra = re.findall(r"Open file descriptor (\d+): ?(.*)", text)
            extra = [f"{fd} {what}" for fd, what in extra if int(fd) > 2 and "vg-" not in what]
            if extra:
                problems.append("fds open at exit: " + "; ".join(extra))
    return problems


def main() -> int:
    if len(sys.argv) < 4 or sys.argv[2] != "--":
        print(__doc__)
        return 2
    log_dir = Path(sys.argv[1]).resolve()
    shutil.rmtree(log_dir, ignore_errors=True)
    log_dir.mkdir(parents=True)
    wrapper = ("valgrind --error-exitcode=97 --leak-check=full "
               "--show-leak-kinds=definite,indirect --errors-for-leak-kinds=definite,indirect "
               f"--track-fds=yes --child-silent-after-fork=yes --log-file={log_dir}/vg-%p.log")
    env = dict(os.environ, SB_DAEMON_WRAPPER=wrapper, SB_TIMEOUT_SCALE="8")
    rc = subprocess.call(sys.argv[3:], env=env)
    reports = sorted(log_dir.glob("vg-*.log"))
    bad = 0
    for report in reports:
        for problem in judge(report):
            print(f"valgrind: {report.name}: {problem}")
            bad += 1
    print(f"valgrind: {len(reports)} daemon run(s) checked, {bad} problem(s); test command exit {rc}")
    if not reports:
        print("valgrind: no report written: nothing ran under valgrind")
        return 2
    return 1 if bad or rc else 0


if __name__ == "__main__":
    sys.exit(main())
