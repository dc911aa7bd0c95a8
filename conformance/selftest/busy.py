#!/usr/bin/env python3
"""Runs a command with every core busy: 2 x nproc busy loops (as many as
SB_BUSY_LOOPS says, when set) at the command's own priority for the whole
run, then ends them. The suite's verdict must not change with load (issue
37): CI runs the suite against ours and the independent daemons this way
and compares with the quiet run.

usage: busy.py COMMAND [ARGS...]      exit status: the command's
"""
import os
import signal
import subprocess
import sys


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    n = int(os.environ.get("SB_BUSY_LOOPS") or 2 * (os.cpu_count() or 1))
    # one session for all the loops: one killpg ends them, whatever happens to the command;
    # each loop also ends once this process is gone (a SIGKILL here runs no finally)
    hogs = subprocess.Popen(["sh", "-c", f"for i in $(seq {n}); do (while kill -0 {os.getpid()} 2>/dev/null;"
                             " do :; done) & done; wait"],
                            start_new_session=True, stdin=subprocess.DEVNULL)
    print(f"busy: {n} busy loops beside: {' '.join(argv)}", file=sys.stderr, flush=True)
    try:
        return subprocess.call(argv)
    finally:
        try:
            os.killpg(hogs.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        hogs.wait()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
