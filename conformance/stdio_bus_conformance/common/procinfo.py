"""Process inspection through /proc (Linux): children, zombies, fds,
threads, CPU time. A process that has gone away reads as absent, not as an
error: callers decide what absence means."""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass

CLK_TCK = os.sysconf("SC_CLK_TCK")


def _stat(pid: int) -> list[str] | None:
    """Fields of /proc/<pid>/stat; fields[0] is the state (after comm)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read().decode("ascii", "replace")
    except (FileNotFoundError, ProcessLookupError):
        return None
    # comm may contain spaces and parentheses: split after the last ')'
    return data[data.rindex(")") + 2:].split()


def exists(pid: int) -> bool:
    st = _stat(pid)
    return st is not None and st[0] != "Z"


def state(pid: int) -> str | None:
    """One-letter state (R, S, D, Z, T...) or None when gone."""
    st = _stat(pid)
    return st[0] if st else None


def ppid(pid: int) -> int | None:
    st = _stat(pid)
    return int(st[1]) if st else None


PF_EXITING = 0x4  # include/linux/sched.h: set as soon as the process starts to exit


def flags(pid: int) -> int | None:
    """The kernel's per-process flags (PF_*), None when gone."""
    st = _stat(pid)
    return int(st[6]) if st else None


def exiting(pid: int) -> bool:
    """True when pid is gone, a zombie, or has started to exit: the kernel
    sets PF_EXITING before it closes the process's files, so a peer that sees
    end of file from a dying process can tell it is dying."""
    st = _stat(pid)
    return st is None or st[0] in ("Z", "X") or bool(int(st[6]) & PF_EXITING)


def session(pid: int) -> int | None:
    st = _stat(pid)
    return int(st[3]) if st else None


def children(pid: int) -> list[int]:
    """Direct children of pid, zombies included."""
    out = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except FileNotFoundError:
        return out
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                out.extend(int(x) for x in f.read().split())
        except FileNotFoundError:
            continue
    return sorted(set(out))


def live_children(pid: int) -> list[int]:
    return [c for c in children(pid) if state(c) not in (None, "Z")]


def zombies(pid: int) -> list[int]:
    """Children of pid that have exited and not been reaped."""
    return [c for c in children(pid) if state(c) == "Z"]


def fd_count(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def fds(pid: int) -> dict[int, str]:
    """fd -> what it points to (path, socket:[n], pipe:[n])."""
    out = {}
    base = f"/proc/{pid}/fd"
    for name in os.listdir(base):
        try:
            out[int(name)] = os.readlink(f"{base}/{name}")
        except OSError:
            continue
    return out


_KINDS = ((stat.S_ISFIFO, "pipe"), (stat.S_ISSOCK, "socket"), (stat.S_ISREG, "file"),
          (stat.S_ISCHR, "char"), (stat.S_ISDIR, "dir"))


@dataclass(frozen=True)
class OpenFile:
    """What an fd refers to, by file type: `kind` is "pipe" for any FIFO (an
    anonymous pipe or a named one: the /proc link text of a named FIFO is its
    path, not pipe:[N]), "socket", "file", "char", "dir" or "other"; (dev,
    ino) identify the open object across processes (both ends of a pipe share
    them)."""
    kind: str
    dev: int
    ino: int

    @property
    def key(self) -> tuple[int, int]:
        return self.dev, self.ino


def open_file(pid: int, fd: int) -> OpenFile | None:
    """stat() through /proc/<pid>/fd/<fd> (it follows to the object itself);
    None when the fd or the process is gone."""
    try:
        st = os.stat(f"/proc/{pid}/fd/{fd}")
    except OSError:
        return None
    kind = next((name for test, name in _KINDS if test(st.st_mode)), "other")
    return OpenFile(kind, st.st_dev, st.st_ino)


def open_files(pid: int) -> dict[int, OpenFile]:
    """fd -> OpenFile for every fd of pid that is still open."""
    out = {}
    try:
        names = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return out
    for name in names:
        f = open_file(pid, int(name))
        if f is not None:
            out[int(name)] = f
    return out


def thread_count(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("Threads:"):
                return int(line.split()[1])
    raise OSError(f"no Threads line in /proc/{pid}/status")


def ignored_signals(pid: int) -> set[int]:
    """The signals pid ignores (SIG_IGN), from /proc/<pid>/status SigIgn:
    the kernel discards such a signal when it is sent."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("SigIgn:"):
                mask = int(line.split()[1], 16)
                return {n + 1 for n in range(64) if mask >> n & 1}
    raise OSError(f"no SigIgn line in /proc/{pid}/status")


def cpu_time(pid: int) -> float:
    """User + system CPU seconds consumed by pid so far."""
    st = _stat(pid)
    if st is None:
        raise ProcessLookupError(pid)
    # after the state field: ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime
    return (int(st[11]) + int(st[12])) / CLK_TCK


def environ(pid: int) -> dict[str, str]:
    with open(f"/proc/{pid}/environ", "rb") as f:
        items = f.read().split(b"\0")
    out = {}
    for item in items:
        if b"=" in item:
            k, v = item.split(b"=", 1)
            out[k.decode("utf-8", "replace")] = v.decode("utf-8", "replace")
    return out


def cmdline(pid: int) -> list[str]:
    with open(f"/proc/{pid}/cmdline", "rb") as f:
        return [a.decode("utf-8", "replace") for a in f.read().split(b"\0") if a]
