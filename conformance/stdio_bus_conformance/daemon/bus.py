"""The `bus` fixture object: one test's view of the daemon under test.

    d = bus.start()                       # base config, 2 mock workers in pool "p"
    d = bus.start({"limits": {"max_input_buffer": 4096}})
    d = bus.start(instances=3)
    d = bus.start(pools=[bus.pool("a", 1), bus.pool("b", 2)])
    c = bus.client()                      # stdio: the one client; sockets: a new one
    log = bus.worker_log("p")             # what pool p's workers received and sent

At teardown the bus stops its daemons, kills and reaps every process the
test left behind (see contain.py), and reports findings: a crash, processes
left after a daemon that exited by itself (a leak), a daemon that needed
SIGKILL, a stderr flood. Artifacts are bounded (ARTIFACT_TEST_CAP per test).
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import shutil
import tempfile
import time
import zlib
from dataclasses import dataclass, field
from pathlib import Path

from . import config as cfg
from . import contain
from . import evidence
from ..common import context
from ..common.pace import Pace
from .client import reset_ids
from .items import SIGNAL_ITEMS, blocked_message
from .process import Daemon, describe_status, signame
from .streams import STDERR_KEEP
from ..common.errors import DaemonCrashed, HarnessError, NeverComes
from .profile import Profile
from ..common.transcript import render
from ..common.transcript import Recorder
from .workerlog import WorkerLog

ARTIFACT_TEST_CAP = 4 << 20       # bytes of artifacts one test may leave
# configuration keys of our extensions, and the profile feature that claims each
EXTENSION_KEYS = {("limits", "restart_backoff_ms"): "restart_backoff",
                  ("limits", "restart_backoff_max_ms"): "restart_backoff",
                  ("orphan_policy",): "orphan_policy"}
TRANSCRIPT_CAP = 2 << 20          # of which the transcript
WORKER_LOG_CAP = 1 << 20          # and each worker log copy


@dataclass
class RunContext:
    """Options of the whole run, shared by every test."""
    daemon: str
    profile: Profile
    mock_worker: str | None
    seed: int
    timeout: float = 5.0
    features: set = field(default_factory=set)
    token: str = ""                   # the run's process mark (contain.MARK_ENV)
    term_grace: float | None = None   # teardown SIGTERM -> SIGKILL delay (None: the profile's)
    preflight: object = None          # preflight.Results, when the preflight ran
    pace: Pace = field(default_factory=Pace)  # the daemon's measured pace (common/pace.py)
    fixed_wait: bool = False          # --wait-timeout given: waits are not scaled by the pace


def clip_file(path: Path, limit: int) -> bool:
    """Cuts a file to its first and last limit/2 bytes, marking the cut.
    True when it was cut."""
    size = path.stat().st_size
    if size <= limit:
        return False
    half = max(1, limit // 2 - 128)
    with open(path, "rb") as f:
        head = f.read(half)
        f.seek(size - half)
        tail = f.read(half)
    note = f"\n[harness: {size - 2 * half} bytes of this file not kept ({size} in all)]\n".encode()
    path.write_bytes(head + note + tail)
    return True


def copy_clipped(src: Path, dest: Path, limit: int) -> bool:
    """Copies the first and last limit/2 bytes of src to dest. True when cut."""
    size = src.stat().st_size
    if size <= limit:
        shutil.copyfile(src, dest)
        return False
    half = max(1, limit // 2 - 128)
    with open(src, "rb") as f:
        head = f.read(half)
        f.seek(size - half)
        tail = f.read(half)
    dest.write_bytes(head + f"\n[harness: {size - 2 * half} bytes of this file not kept "
                            f"({size} in all)]\n".encode() + tail)
    return True


class Bus:
    def __init__(self, ctx: RunContext, mode: str, nodeid: str, sweep: bool = True):
        """sweep: kill every process left below the harness at teardown (a
        test's bus; the preflight's run side by side and sweep by mark)."""
        self.ctx = ctx
        self.mode = mode
        self.nodeid = nodeid
        self.profile = ctx.profile
        self.seed = (ctx.seed ^ zlib.crc32(nodeid.encode())) & 0xFFFFFFFF
        self.rng = random.Random(self.seed)
        # short path: unix socket paths are limited to 107 bytes
        self.workdir = Path(tempfile.mkdtemp(prefix="sbc-"))
        self.recorder = Recorder()
        self.daemons: list[Daemon] = []
        self.config_data = None
        self._pools: dict[str, WorkerLog] = {}
        self.sweep = sweep
        self._baseline = set(contain.descendants()) if sweep else set()  # processes that are not this test's
        self.cited: tuple = ()                        # the test's clauses (the fixture sets them)
        self._leftovers_ok: str | None = None
        self.findings: list[dict] = []
        self.truncated: list[str] = []                # artifacts that were cut
        self.requires: set = set()                    # features the test requires (the fixture sets them)
        reset_ids()

    @property
    def timeout(self) -> float:
        """The run's deadline for one wait (--wait-timeout)."""
        return self.ctx.timeout

    # -- configuration -------------------------------------------------------
    def pool(self, id: str = "p", instances: int = 2, args=(), log: bool = True) -> dict:
        """A pool definition running the mock worker."""
        return cfg.mock_pool(self.ctx.mock_worker, self.workdir, id, instances, args, log)

    def config(self, overrides=None, *, instances: int | None = None, pools=None) -> dict:
        base = {"pools": pools if pools is not None else [self.pool("p", instances or 2)],
                "limits": dict(cfg.BASE_LIMITS)}
        return cfg.merge(base, overrides or {})

    # -- daemon --------------------------------------------------------------
    def start(self, overrides=None, *, instances: int | None = None, pools=None,
              raw_config=None, wait_workers: bool = True) -> Daemon:
        """Writes the config, starts the daemon in this test's mode, waits until
        it is ready and (by default) until every mock worker has started.
        raw_config (str/bytes) is written verbatim instead of a built config."""
        if raw_config is not None:
            self.config_data = raw_config
            wait_workers = False
        else:
            self.config_data = self.config(overrides, instances=instances, pools=pools)
            self._check_extension_keys(self.config_data)
            if len(self.config_data.get("pools", [])) > 1:
                self.stand_on("two-pools")
        path = cfg.write_config(self.workdir / f"config{len(self.daemons) or ''}.json", self.config_data)
        env = {contain.MARK_ENV: self.ctx.token} if self.ctx.token else {}
        tmp = None
        if "TMPDIR" not in self.profile.env:  # a private TMPDIR: what it leaves there is seen at teardown
            tmp = self.workdir / f"tmp{len(self.daemons) or ''}"
            tmp.mkdir()
            env["TMPDIR"] = str(tmp)
        d = Daemon(profile=self.profile, daemon_path=self.ctx.daemon, mode=self.mode,
                   workdir=self.workdir, config_path=path, recorder=self.recorder,
                   timeout=self.ctx.timeout, env=env or None)
        d.tmpdir = tmp
        d.drain_timeout = cfg.drain_timeout(self.config_data)
        d.on_signal = self._on_signal
        if self._sigint_instead():  # a teardown that can stop the daemon and its workers
            d.term_signal = signal.SIGINT
        d.on_stdin_close = lambda: self.stand_on("stdin-eof")
        # more than a pipe holds, sent faster than a worker may read it: the test stands on
        # full-pipe whether or not it says so (a defect there is reported once, as its root cause)
        d.on_flood = lambda: self.stand_on("full-pipe")
        self.daemons.append(d)
        d.start()
        if wait_workers:
            self._wait_workers()
        return d

    def use_if_claimed(self, feature: str) -> bool:
        """For a test judged on every daemon that only runs faster with one
        of our extensions (restart delays it can shorten): true, and the
        feature's configuration keys allowed, when the profile claims it;
        false otherwise, and the test goes at the daemon's own pace."""
        if feature in (self.profile.features or ()):
            self.requires.add(feature)
            return True
        return False

    def _check_extension_keys(self, data: dict) -> None:
        """Our extensions' configuration keys only in tests that require the
        feature: a daemon without it must never be judged on them."""
        for path, feature in EXTENSION_KEYS.items():
            node = data
            for key in path:
                node = node.get(key) if isinstance(node, dict) else None
            if node is not None and feature not in self.requires:
                raise HarnessError(f"the test configures {'.'.join(path)} (our extension) without "
                                   f"@pytest.mark.requires({feature!r})")

    def _wait_workers(self) -> None:
        for p in self.config_data.get("pools", []):
            args = p.get("args", [])
            if p.get("command") != os.path.abspath(self.ctx.mock_worker or "") or "--log" not in args:
                continue
            log = self.worker_log(p["id"])
            n = int(p.get("instances", 1))
            d = self.daemon
            log.wait_count(lambda r: r.kind == "start", n, self.profile.startup_timeout,
                           f"'start' (the daemon should spawn {n} workers)",
                           check=lambda: d._check_alive("while its workers were starting"))

    def run(self, argv: list, timeout: float | None = None, keep: int = 1 << 20, bound=None):
        """Runs a command line of the software under test (its CLI) in the
        workdir, stdin /dev/null, to its end or the deadline (then its session
        is killed). Bounded: the first `keep` bytes of stdout and of stderr are
        kept, the rest counted. Returns (status or None at the deadline,
        stdout, stderr, (stdout bytes, stderr bytes) in all). bound (see
        evidence.py) runs every 50 ms while it runs: NeverComes from it ends
        the run there (the command is killed, the status is None, the
        evidence noted in the transcript)."""
        import subprocess
        import threading
        timeout = self.timeout if timeout is None else timeout
        self.recorder.note("run: " + " ".join(str(a) for a in argv))
        env = dict(os.environ, **self.profile.env)
        if self.ctx.token:
            env[contain.MARK_ENV] = self.ctx.token
        p = subprocess.Popen([str(a) for a in argv], cwd=self.workdir, stdin=subprocess.DEVNULL,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True, env=env)
        got = {1: [bytearray(), 0], 2: [bytearray(), 0]}

        def drain(f, slot):  # owns f: closes it at the end (common/reader.py says why)
            while True:
                data = f.read1(65536) if hasattr(f, "read1") else f.read(65536)
                if not data:
                    f.close()
                    return
                slot[1] += len(data)
                room = keep - len(slot[0])
                if room > 0:
                    slot[0] += data[:room]
        readers = [threading.Thread(target=drain, args=(p.stdout, got[1]), daemon=True),
                   threading.Thread(target=drain, args=(p.stderr, got[2]), daemon=True)]
        for t in readers:
            t.start()
        ended = None
        limit = time.monotonic() + timeout
        while True:
            try:
                rc = p.wait(min(0.05, max(0.0, limit - time.monotonic())) if bound is not None else timeout)
                break
            except subprocess.TimeoutExpired:
                rc = None
            if time.monotonic() >= limit:
                break
            try:
                evidence.run(bound)
            except NeverComes as exc:
                ended = exc
                break
        if rc is None:  # still running: asked to stop first (a run under valgrind then reports)
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(p.pid, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                p.wait(self.profile.shutdown_timeout)
        try:  # its session: what it left behind, and itself at the deadline
            os.killpg(p.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        if rc is None:
            p.wait()
        for t in readers:
            t.join(2)
        out, err = bytes(got[1][0]), bytes(got[2][0])
        self.recorder.add("daemon stderr", err)
        if ended is not None:
            self.recorder.note(f"killed while running: {ended}")
        else:
            self.recorder.note(f"exit status {rc}" if rc is not None else f"still running after {timeout:g} s: killed")
        return rc, out, err, (got[1][1], got[2][1])

    def _on_signal(self, sig: int) -> int:
        """The signal to send for `sig`: SIGINT for a SIGTERM when the
        preflight found SIGTERM broken and SIGINT sound, and the test is not
        about SIGTERM itself (10.1 makes both the trigger of the same
        shutdown: what follows is judged, not hidden behind the one root
        cause). A test standing on a broken signal is blocked here."""
        if sig == signal.SIGTERM and self._sigint_instead():
            self.recorder.note("SIGTERM is broken (preflight): SIGINT instead, the other trigger of 10.2")
            return signal.SIGINT
        if sig in SIGNAL_ITEMS:
            self.stand_on(SIGNAL_ITEMS[sig])
        return sig

    def _sigint_instead(self) -> bool:
        pf = self.ctx.preflight
        if pf is None or pf.broken("sigterm") is None or pf.blocking("sigterm", self.cited) is None:
            return False
        sigint = pf.items.get("sigint")
        return sigint is not None and sigint.status == "ok"

    @property
    def daemon(self) -> Daemon:
        if not self.daemons:
            raise HarnessError("bus.start() has not been called")
        return self.daemons[-1]

    def client(self):
        return self.daemon.client()

    def worker_log(self, pool: str = "p") -> WorkerLog:
        if pool not in self._pools:
            self._pools[pool] = WorkerLog(self.workdir / f"{pool}.log", pool)
        return self._pools[pool]

    def worker_logs(self) -> list[WorkerLog]:
        """The logs of every pool of the running config (mock workers)."""
        return [self.worker_log(p["id"]) for p in self._config_pools()]

    def worker_pids(self, pool: str = "p") -> list[int]:
        """Pids of the pool's instances, in start order (from the mock's log)."""
        return self.worker_log(pool).pids()

    def watch(self) -> None:
        """Raises when a daemon of this test crashed, or exited without the
        test asking it to (every wait runs this)."""
        for d in self.daemons:
            d.check()

    def expect_leftovers(self, reason: str) -> None:
        """The test itself leaves processes behind its workers (e.g. helpers
        holding their pipes): they are killed at teardown without a finding."""
        self._leftovers_ok = reason

    # -- teardown and artifacts ----------------------------------------------
    def stop(self) -> None:
        """Stops the daemons, kills what is left, records findings. Raises
        DaemonCrashed when a daemon crashed during the test (before the
        teardown), so the test fails on it even when it did not wait again."""
        crashed, normal_exit = None, True
        for note in context.slow_notes():  # a note, not a failure: the verdict is the clauses'
            self._finding("slow", note)
        # when the preflight found SIGTERM broken, what it does at each teardown is that root
        # cause; when it found SIGTERM fine, a crash at this teardown is this test's doing
        term = self.ctx.preflight.items.get("sigterm") if self.ctx.preflight is not None else None
        for d in self.daemons:
            # a teardown by SIGINT (SIGTERM broken, _on_signal) was found sound by the preflight
            sound = d.term_signal == signal.SIGINT or (term is not None and term.status == "ok")
            cause = "sigterm" if term is not None and term.status == "broken" and not sound else None
            name = signame(d.term_signal)
            info = d.stop(self._grace(d))
            if not info:
                continue
            if info.get("crashed_before_teardown"):
                crashed = crashed or d
            elif info.get("crash") and sound:
                crashed = crashed or d
            elif info.get("crash"):
                self._finding("teardown-crash", f"the daemon died of {info['crash']} after the harness's "
                              f"{name} at teardown", "SB-10.2-6", cause)
            if info.get("killed"):
                self._finding("teardown-kill", f"the daemon did not exit within {self._grace(d):g} s of "
                              f"{name} at teardown: the harness sent SIGKILL",
                              "SB-10.1-2" if d.term_signal == signal.SIGINT else "SB-10.1-1", cause)
            if info.get("killed") or info.get("status") is None or info["status"] < 0:
                normal_exit = False  # killed by a signal: it could not stop its workers
            if d.streams.stderr_total > STDERR_KEEP:
                self._finding("flood", f"the daemon wrote {d.streams.stderr_total} bytes to stderr in one test; "
                              f"the harness kept the last {STDERR_KEEP >> 20} MiB")
        left = contain.kill_all(self._baseline) if self.sweep else []
        for d in self.daemons:  # the daemons' own groups too, where no subreaper is available
            if d.proc is not None:
                try:
                    os.killpg(d.proc.pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
        for d in self.daemons:
            d.finish()
        if left:
            listed = "; ".join(f"pid {p['pid']} ({p['cmdline'][:80]})" for p in left[:5])
            more = f" and {len(left) - 5} more" if len(left) > 5 else ""
            if self._leftovers_ok:
                self.recorder.note(f"teardown: killed {len(left)} process(es) the test left "
                                   f"({self._leftovers_ok}): {listed}{more}")
            elif normal_exit and self.daemons:
                self._finding("leak", f"{len(left)} process(es) outlived the daemon, which "
                              f"{describe_status(self.daemons[-1].returncode)}: {listed}{more} (killed)",
                              "SB-10.2-4")
            else:
                self.recorder.note(f"teardown: killed {len(left)} process(es) left by a daemon that did "
                                   f"not exit by itself: {listed}{more}")
        self._check_tmpdirs(normal_exit)
        if crashed is not None:
            when = "during the test" if crashed.crash_phase == "test" else \
                "at teardown, on SIGTERM (which it handles in the preflight)"
            raise DaemonCrashed(f"the daemon died of {crashed.crash} {when}"
                                f"{crashed.streams.tail_note()}", crashed.crash)

    def _check_tmpdirs(self, normal_exit: bool) -> None:
        """What the daemons left in their private TMPDIR once they are gone:
        a warning on SB-10.2-5 (SHOULD "clean up all resources") when they
        exited by themselves; only a note when the harness had to kill them."""
        for d in self.daemons:
            tmp = getattr(d, "tmpdir", None)
            if tmp is None or not tmp.is_dir():
                continue
            try:
                left = sorted(tmp.iterdir())
            except OSError:
                continue
            if not left:
                continue
            names = ", ".join(p.name + ("/" if p.is_dir() else "") for p in left[:5])
            more = f" and {len(left) - 5} more" if len(left) > 5 else ""
            what = f"{len(left)} file(s) or director(ies) left in the daemon's TMPDIR after it exited: {names}{more}"
            if normal_exit:
                self._finding("tmp-left", what, "SB-10.2-5")
                self.findings[-1]["level"] = "warning"
            else:
                self.recorder.note(f"teardown: {what} (it was killed: not a finding)")

    def _grace(self, d: Daemon) -> float:
        if self.ctx.term_grace is None or d.term_signal == signal.SIGINT:
            return d.profile.shutdown_timeout
        return self.ctx.term_grace

    def _finding(self, kind: str, detail: str, clause: str | None = None, root_cause: str | None = None) -> None:
        self.recorder.note(f"finding ({kind}): {detail}")
        f = {"kind": kind, "test": self.nodeid, "detail": detail, "clause": clause}
        if root_cause:
            f["root_cause"] = root_cause
        self.findings.append(f)

    # -- preflight: what this test stands on ----------------------------------------------
    def stand_on(self, item: str) -> None:
        """The test is about to use the preflight item's behaviour: when the
        preflight found it broken (and the test does not judge it itself),
        the test is blocked here."""
        pf = self.ctx.preflight
        if pf is None:
            return
        r = pf.blocking(item, self.cited)
        if r is not None:
            import pytest  # only ever called from a running test
            self.recorder.note(f"blocked: the preflight found {item} broken: {r.message}")
            pytest.skip(blocked_message(r))

    def transcript(self) -> str:
        logs = [(p["id"], self.worker_log(p["id"])) for p in self._config_pools()]
        return render(self.recorder, logs, TRANSCRIPT_CAP)

    def _config_pools(self) -> list:
        data = self.config_data
        if isinstance(data, dict):
            return [p for p in data.get("pools", []) if isinstance(p, dict) and "id" in p]
        return []

    def write_artifacts(self, dest: Path, command: str, room: int = ARTIFACT_TEST_CAP) -> None:
        """The reproducer folder: transcript, stderr, config, seed, command,
        worker logs; at most min(room, ARTIFACT_TEST_CAP) bytes. With no room
        (the run's cap is reached) only the small files are written."""
        dest.mkdir(parents=True, exist_ok=True)
        (dest / "command.txt").write_text(command + "\n")
        (dest / "seed").write_text(f"{self.ctx.seed}\n")
        for i, d in enumerate(self.daemons):
            name = "config.json" if i == 0 else f"config{i}.json"
            if d.config_path.exists() and d.config_path.stat().st_size <= 256 * 1024:
                shutil.copyfile(d.config_path, dest / name)
        if self.config_data is not None and not (dest / "config.json").exists():
            if isinstance(self.config_data, dict):
                cfg.write_config(dest / "config.json", self.config_data)
        limit = min(room, ARTIFACT_TEST_CAP)
        if limit < 64 * 1024:
            (dest / "TRUNCATED.txt").write_text(
                "The run's artifact cap was reached: transcript, stderr and worker logs of this test "
                "were not written. Rerun it with command.txt.\n")
            self.truncated.append("all (run cap reached)")
            return
        (dest / "transcript.txt").write_text(self.transcript())
        parts = []
        for i, d in enumerate(self.daemons):
            head = (f"--- daemon #{i + 1}: {' '.join(d.argv)}\n".encode() if len(self.daemons) > 1 else b"")
            if d.streams.stderr_truncated:
                head += (f"[harness: the daemon wrote {d.streams.stderr_total} bytes to stderr; only the last "
                         f"{STDERR_KEEP} bytes (whole lines) were kept]\n").encode()
                self.truncated.append("daemon.stderr")
            parts.append(head + d.streams.stderr_bytes())
        (dest / "daemon.stderr").write_bytes(b"".join(parts))
        for p in self._config_pools():
            src = self.workdir / f"{p['id']}.log"
            if src.exists() and copy_clipped(src, dest / f"worker-{p['id']}.log", WORKER_LOG_CAP):
                self.truncated.append(f"worker-{p['id']}.log")
        # the whole folder within the limit: cut the biggest files first
        for _ in range(8):
            files = sorted((f for f in dest.iterdir() if f.is_file()), key=lambda f: f.stat().st_size)
            total = sum(f.stat().st_size for f in files)
            if total <= limit or not files:
                break
            big = files[-1]
            if clip_file(big, max(64 * 1024, big.stat().st_size - (total - limit) - 4096)):
                self.truncated.append(big.name)

    def cleanup(self) -> None:
        shutil.rmtree(self.workdir, ignore_errors=True)
        if context.state.bus is self:
            context.state.bus = None
