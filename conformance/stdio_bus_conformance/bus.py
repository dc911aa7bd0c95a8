"""The `bus` fixture object: one test's view of the daemon under test.

    d = bus.start()                       # base config, 2 mock workers in pool "p"
    d = bus.start({"limits": {"max_input_buffer": 4096}})
    d = bus.start(instances=3)
    d = bus.start(pools=[bus.pool("a", 1), bus.pool("b", 2)])
    c = bus.client()                      # stdio: the one client; sockets: a new one
    log = bus.worker_log("p")             # what pool p's workers received and sent
"""

from __future__ import annotations

import os
import random
import shutil
import tempfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path

from . import config as cfg
from .client import reset_ids
from .daemon import Daemon
from .errors import HarnessError
from .profile import Profile
from .transcript import Recorder, render
from .workerlog import WorkerLog


@dataclass
class RunContext:
    """Options of the whole run, shared by every test."""
    daemon: str
    profile: Profile
    mock_worker: str | None
    seed: int
    timeout: float = 5.0
    features: set = field(default_factory=set)


class Bus:
    def __init__(self, ctx: RunContext, mode: str, nodeid: str):
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
        reset_ids()

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
        path = cfg.write_config(self.workdir / f"config{len(self.daemons) or ''}.json", self.config_data)
        d = Daemon(profile=self.profile, daemon_path=self.ctx.daemon, mode=self.mode,
                   workdir=self.workdir, config_path=path, recorder=self.recorder,
                   timeout=self.ctx.timeout)
        self.daemons.append(d)
        d.start()
        if wait_workers:
            self._wait_workers()
        return d

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

    def worker_pids(self, pool: str = "p") -> list[int]:
        """Pids of the pool's instances, in start order (from the mock's log)."""
        return self.worker_log(pool).pids()

    # -- teardown and artifacts ----------------------------------------------
    def stop(self) -> None:
        for d in self.daemons:
            d.stop()

    def transcript(self) -> str:
        logs = [(p["id"], self.worker_log(p["id"])) for p in self._config_pools()]
        return render(self.recorder, logs)

    def _config_pools(self) -> list:
        data = self.config_data
        if isinstance(data, dict):
            return [p for p in data.get("pools", []) if isinstance(p, dict) and "id" in p]
        return []

    def write_artifacts(self, dest: Path, command: str) -> None:
        dest.mkdir(parents=True, exist_ok=True)
        (dest / "transcript.txt").write_text(self.transcript())
        (dest / "daemon.stderr").write_bytes(b"".join(
            (f"--- daemon #{i + 1}: {' '.join(d.argv)}\n".encode() if len(self.daemons) > 1 else b"")
            + d.stderr_bytes() for i, d in enumerate(self.daemons)))
        if self.config_data is not None:
            cfg.write_config(dest / "config.json", self.config_data)
        (dest / "seed").write_text(f"{self.ctx.seed}\n")
        (dest / "command.txt").write_text(command + "\n")
        for p in self._config_pools():
            src = self.workdir / f"{p['id']}.log"
            if src.exists():
                shutil.copyfile(src, dest / f"worker-{p['id']}.log")

    def cleanup(self) -> None:
        shutil.rmtree(self.workdir, ignore_errors=True)
