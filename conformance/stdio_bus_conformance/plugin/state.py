"""What the whole run is given, in one process: its options, read once, the
clause registry, the baseline, the seed and token, and the errors found
loading them. Set up at configure time and never written after (keys.RUN).
What the run gathers belongs to the role that gathers it (subjects.py,
selection.py, results.py, artifacts.py, finish.py), each published under
its own stash key (keys.py)."""

from __future__ import annotations

import os
import random
import time

from ..common.errors import HarnessError
from ..reports import baseline as bl
from ..spec.registry import Registry


class Run:
    """The run's givens in one process, read by every role."""

    def __init__(self, config):
        self.config = config
        self.is_worker = hasattr(config, "workerinput")   # an xdist worker process
        self.fatal: list[str] = []             # the spec or the baseline could not be loaded
        self.registry: Registry | None = None
        self.started = time.time()
        self.t0 = time.monotonic()
        opt = config.getoption
        self.report_dir = os.path.abspath(opt("report_dir"))
        seed = opt("seed")
        if seed is None and self.is_worker:
            seed = config.workerinput.get("sb_seed")
        self.seed = seed if seed is not None else random.SystemRandom().randrange(1, 2**31)
        token = config.workerinput.get("sb_token") if self.is_worker else None
        self.token = token or f"{os.getpid()}-{self.seed}-{random.SystemRandom().randrange(1 << 32):08x}"
        self.worker_mode = bool(opt("worker") or opt("worker_description") or opt("worker_profile")
                                or opt("worker_env") or opt("mcp_version"))
        try:
            self.registry = Registry.load(opt("spec"), "WORKER_SPEC.md" if self.worker_mode else "SPEC.md")
        except HarnessError as exc:
            self.fatal.append(str(exc))
        self.baseline = bl.empty()
        if opt("baseline"):
            try:
                self.baseline = bl.load(opt("baseline"))
            except HarnessError as exc:
                self.fatal.append(str(exc))
        self.gate_enabled = not opt("no_coverage_gate")
