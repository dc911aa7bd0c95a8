"""Containing the processes of the software under test.

Three nets, so nothing the daemon starts outlives the test or the run:

* the harness process is a child subreaper (prctl PR_SET_CHILD_SUBREAPER):
  whatever the daemon forks, even into a session of its own, is re-parented
  to the harness when its parent dies, never to init, so the harness can
  always find it among its descendants;
* at each test's teardown, every descendant of the harness that was not
  there when the test began is killed (SIGKILL, repeated until none is left)
  and reaped;
* every daemon runs with MARK_ENV=<run token> in its environment, inherited
  by its children: at the end of the run any process still carrying the
  token is killed and reported.

What counts as a leak is the caller's decision (bus.py): processes left
after a daemon exited by itself are a finding; those of a daemon the harness
had to SIGKILL, or that crashed, are only cleaned up.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import signal
import time

from ..common import procinfo

PR_SET_CHILD_SUBREAPER = 36
MARK_ENV = "SB_CONFORMANCE_RUN"
_subreaper = None


def become_subreaper() -> bool:
    """Makes this process a child subreaper (Linux 3.4+). True on success."""
    global _subreaper
    if _subreaper is None:
        try:
            libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
            _subreaper = libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
        except (OSError, AttributeError):
            _subreaper = False
    return _subreaper


def descendants(root: int | None = None) -> list[int]:
    """Every descendant of root (default: this process), zombies included,
    parents before children."""
    root = os.getpid() if root is None else root
    out, todo, seen = [], [root], {root}
    while todo:
        pid = todo.pop(0)
        for child in procinfo.children(pid):
            if child not in seen:
                seen.add(child)
                out.append(child)
                todo.append(child)
    return out


def describe(pid: int) -> dict:
    try:
        cmd = " ".join(procinfo.cmdline(pid))[:200]
    except OSError:
        cmd = ""
    return {"pid": pid, "state": procinfo.state(pid), "ppid": procinfo.ppid(pid),
            "session": procinfo.session(pid), "cmdline": cmd}


def _reap(pids) -> None:
    """Reaps those of pids that are zombie children of this process."""
    mine = set(procinfo.children(os.getpid()))
    for pid in pids:
        if pid in mine:
            try:
                os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                pass


def kill_all(keep: set, rounds: int = 200, deadline_s: float = 10.0) -> list[dict]:
    """Kills (SIGKILL) and reaps every descendant of this process not in
    `keep`, again and again while new ones appear (a forking process may
    spawn more while it is being killed). Returns what was alive at the first
    look (zombies excluded)."""
    found: dict[int, dict] = {}
    deadline = time.monotonic() + deadline_s
    for _ in range(rounds):
        left = [p for p in descendants() if p not in keep]
        if not left:
            break
        for pid in left:
            st = procinfo.state(pid)
            if st is None:
                continue
            if st != "Z" and pid not in found:
                found[pid] = describe(pid)
            if st != "Z":
                try:
                    os.kill(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
        _reap(left)
        if time.monotonic() >= deadline:
            break
        time.sleep(0.002)  # let the killed ones die and be re-parented; bounded by rounds and deadline
    _reap([p for p in descendants() if p not in keep])
    return list(found.values())


def marked(token: str) -> list[int]:
    """Processes (readable by us) whose environment carries MARK_ENV=token,
    or MARK_ENV=token/<anything> (the marks of the run's processes)."""
    needle = f"{MARK_ENV}={token}".encode()
    out = []
    me = os.getpid()
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == me:
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as f:
                env = f.read()
        except OSError:
            continue
        if any(v == needle or v.startswith(needle + b"/") for v in env.split(b"\0")):
            out.append(int(name))
    return out


def kill_marked(token: str, rounds: int = 50) -> list[dict]:
    """Kills every process carrying the run's mark; returns what was alive."""
    found: dict[int, dict] = {}
    for _ in range(rounds):
        pids = [p for p in marked(token) if procinfo.state(p) not in (None, "Z")]
        if not pids:
            break
        for pid in pids:
            found.setdefault(pid, describe(pid))
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        _reap(pids)
        time.sleep(0.005)  # let them die; bounded by rounds
    return list(found.values())
