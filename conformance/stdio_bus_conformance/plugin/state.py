"""The run's state in one process: options read once, the clause registry,
the baseline, and what the hooks collect (inventory, results, findings).

One object, registered as a plugin so that its hooks see the config; each
concern is a base class in its own module."""

from __future__ import annotations

import os
import random
import time

from ..common.errors import HarnessError
from ..daemon.items import Results as PreflightResults
from ..reports import baseline as bl
from ..reports.outcomes import TestResult
from ..spec.registry import Registry
from .artifacts import Artifacts
from .finish import Finish
from .results import Results
from .selection import Selection
from .subjects import Subjects

STATE_KEY = "_sb_state"


class State(Subjects, Selection, Results, Artifacts, Finish):
    """The run's state; pytest calls the hooks its bases define."""

    def __init__(self, config):
        self.config = config
        self.is_worker = hasattr(config, "workerinput")
        self.fatal: list[str] = []
        self.registry: Registry | None = None
        self.inventory: dict[str, list] = {}   # nodeid -> clause ids (all collected tests)
        self.inventory_complete = False
        self.have_inventory = False
        self.results: dict[str, TestResult] = {}
        self.findings: list[dict] = []
        self.interrupted = False
        self.collection_errors: list[dict] = []
        self.nothing_selected = False
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
        self.preflight = PreflightResults.from_json(config.workerinput.get("sb_preflight")) \
            if self.is_worker and not self.worker_mode else None
        try:
            self.registry = Registry.load(opt("spec"), "WORKER_SPEC.md" if self.worker_mode else "SPEC.md")
        except HarnessError as exc:
            self.fatal.append(str(exc))
        if self.worker_mode:
            self._init_worker()
        else:
            self._init_daemon()
        self.baseline = bl.empty()
        if opt("baseline"):
            try:
                self.baseline = bl.load(opt("baseline"))
            except HarnessError as exc:
                self.fatal.append(str(exc))
        self.gate_enabled = not opt("no_coverage_gate")
        if not self.is_worker and not config.option.collectonly:
            self._clean_report_dir()
