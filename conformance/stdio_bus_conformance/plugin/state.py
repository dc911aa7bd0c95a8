"""The run's state in one process: options read once, the clause registry,
the baseline, and what the hooks collect (inventory, results, findings), as
data; the roles that gather it are plugins of their own (subjects.py,
selection.py, results.py, artifacts.py, finish.py), each holding the Run."""

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


class Run:
    """The run in one process: its options, read once, and the data its
    plugins gather (the clause registry, the inventory, each test's result,
    the findings). Each role is a plugin of its own that reads and writes
    this data: subjects (what is judged), collection (the rules and the
    selection), outcomes (each test's result), artifacts (reproducers) and
    verdict (the end of the run)."""

    def __init__(self, config):
        self.config = config
        self.is_worker = hasattr(config, "workerinput")   # an xdist worker process
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
        self.final = None                      # the RunSummary, once the verdict is in
        self.ctx = None                        # daemon mode: daemon.bus.RunContext
        self.wctx = None                       # worker mode: worker.run.WorkerContext
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
        self.baseline = bl.empty()
        if opt("baseline"):
            try:
                self.baseline = bl.load(opt("baseline"))
            except HarnessError as exc:
                self.fatal.append(str(exc))
        self.gate_enabled = not opt("no_coverage_gate")
        # the roles, each a plugin (registered by hooks.pytest_configure)
        self.subjects = Subjects(self)
        self.artifacts = Artifacts(self)
        self.collection = Selection(self)
        self.outcomes = Results(self)
        self.verdict = Finish(self)

    def plugins(self) -> dict:
        return {"sb_subjects": self.subjects, "sb_artifacts": self.artifacts, "sb_collection": self.collection,
                "sb_outcomes": self.outcomes, "sb_verdict": self.verdict}
