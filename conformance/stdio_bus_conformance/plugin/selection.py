"""Collection and selection: the rules every test must follow (cite known
clauses; worker tests: profiles and facts), the mode parametrisation, which
directory a run collects, the inventory of cited clauses (coverage counts it
before selection; an xdist controller merges its workers'), and
--clause/--exclude-clause/--section/--only."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ..daemon.items import ITEMS as PREFLIGHT_ITEMS
from ..daemon.profile import MODES
from ..spec.registry import CONFORMANCE_DIR, ID_RE
from ..worker.description import FACTS, PROFILES, clause_applies, speaks
from .order import slowest_first


def item_clauses(item) -> list[str]:
    """The clauses a test cites, in order (its first is the one its plain
    asserts are judged by)."""
    ids: list[str] = []
    for m in item.iter_markers("clause"):
        for a in m.args:
            if a not in ids:
                ids.append(a)
    return ids


class Selection:
    """Collection rules and selection (one of the run's plugins,
    keys.SELECTION): the only writer of the inventory and of what the
    collection found."""

    def __init__(self, run, subjects):
        self.run = run
        self.subjects = subjects   # worker mode: the description judged against each test
        self.inventory: dict[str, list] = {}   # nodeid -> clause ids (all collected tests)
        self.inventory_complete = False
        self.have_inventory = False
        self.nothing_selected = False
        self.collection_errors: list[dict] = []

    def item_problems(self, item) -> list[str]:
        marks = list(item.iter_markers("clause"))
        if not marks:
            return [f"{item.nodeid}: no @pytest.mark.clause(...) marker: every test must cite "
                    "the spec clauses it checks"]
        problems = []
        for m in marks:
            if not m.args:
                problems.append(f"{item.nodeid}: @pytest.mark.clause() needs at least one clause id")
            for a in m.args:
                if not isinstance(a, str) or not ID_RE.match(a):
                    problems.append(f"{item.nodeid}: {a!r} is not a clause id (SB-<section>-<n> or SB-I-<n>)")
                elif self.run.registry is not None and a not in self.run.registry:
                    problems.append(f"{item.nodeid}: cites unknown clause {a} (not in {self.run.registry.path})")
                elif self.run.registry is not None and self.run.registry[a].retired:
                    problems.append(f"{item.nodeid}: cites {a}, which SPEC.md marks RETIRED")
        for m in item.iter_markers("stands_on"):
            bad = [x for x in m.args if x not in PREFLIGHT_ITEMS]
            if bad or not m.args:
                problems.append(f"{item.nodeid}: @pytest.mark.stands_on{m.args!r}: preflight items are "
                                f"{', '.join(PREFLIGHT_ITEMS)}")
        for m in item.iter_markers("modes"):
            bad = [x for x in m.args if x not in MODES]
            if bad or not m.args:
                problems.append(f"{item.nodeid}: @pytest.mark.modes{m.args!r}: modes are {', '.join(MODES)}")
        if self.run.worker_mode and not problems:
            problems += self.worker_item_problems(item)
        elif not problems:
            # an extension is judged only where the profile claims it (SB-X: @pytest.mark.requires)
            ext = [c for c in item_clauses(item) if c.startswith("SB-X-")]
            if ext and not any(m.args for m in item.iter_markers("requires")):
                problems.append(f"{item.nodeid}: cites {', '.join(ext)} (an extension) without "
                                "@pytest.mark.requires(<feature>): it would judge every daemon on our extension")
        return problems

    def worker_item_problems(self, item) -> list[str]:
        """A worker test cites clauses that name their profiles, not only MAY
        clauses (a permission cannot be failed, and must not warn), talks one
        profile at most (worker_profile), and requires only facts a
        description can give."""
        problems = []
        for m in item.iter_markers("worker_profile"):
            if len(m.args) != 1 or m.args[0] not in PROFILES:
                problems.append(f"{item.nodeid}: @pytest.mark.worker_profile{m.args!r}: one of "
                                f"{', '.join(PROFILES)}")
        clauses = [self.run.registry[c] for c in item_clauses(item)
                   if self.run.registry is not None and c in self.run.registry]
        for clause in clauses:
            if clause.profiles is None:
                problems.append(f"{item.nodeid}: {clause.id} has no 'profiles:' at the start of its Notes")
        if clauses and all(c.level == "MAY" for c in clauses):
            problems.append(f"{item.nodeid}: cites only MAY clauses: a permission cannot be failed")
        for m in item.iter_markers("requires"):
            bad = [f for f in m.args if f not in FACTS]
            if bad:
                problems.append(f"{item.nodeid}: @pytest.mark.requires{m.args!r}: worker facts are "
                                f"{', '.join(FACTS)}")
        return problems

    def worker_unsupported(self, item) -> str | None:
        """Why the worker under test is not judged by this test, or None:
        a cited clause belongs to no profile it claims (in its MCP revision),
        or the test talks a profile it does not claim."""
        desc = self.subjects.wctx.desc
        claims = ", ".join(desc.claims) or "nothing"
        for cid in item_clauses(item):
            clause = self.run.registry[cid]
            if not clause_applies(clause.profiles, desc.claims, desc.mcp_version):
                where = ", ".join(f"{p} {' '.join(r)}".strip() for p, r in (clause.profiles or {}).items())
                return f"the worker claims {claims} (MCP {desc.mcp_version}); {cid} belongs to {where}"
        m = item.get_closest_marker("worker_profile")
        if m is not None and m.args and not speaks(desc.claims, m.args[0]):
            return f"the worker claims {claims}; this test talks {m.args[0]}"
        return None

    def pytest_ignore_collect(self, collection_path, config):
        """A daemon run leaves worker_tests/ alone and a worker run tests/,
        unless the directory was named on the command line."""
        other = CONFORMANCE_DIR / ("tests" if self.run.worker_mode else "worker_tests")
        path = Path(collection_path).resolve()
        if path != other and other not in path.parents:
            return None
        for arg in config.args:
            a = Path(str(arg).split("::")[0]).resolve()
            if a == other or other in a.parents:
                return None
        return True

    @pytest.hookimpl(hookwrapper=True)
    def pytest_pycollect_makeitem(self, collector, name, obj):
        outcome = yield
        res = outcome.get_result()
        items = res if isinstance(res, list) else ([res] if res is not None else [])
        problems = []
        for it in items:
            if isinstance(it, pytest.Function):
                problems += self.item_problems(it)
        if problems:
            raise collector.CollectError("\n".join(problems))

    def pytest_generate_tests(self, metafunc):
        if "sb_mode" not in metafunc.fixturenames:
            return
        m = metafunc.definition.get_closest_marker("modes")
        modes = list(m.args) if m and m.args else list(MODES)
        metafunc.parametrize("sb_mode", modes, ids=modes, indirect=True)

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection_modifyitems(self, session, config, items):
        # the inventory (coverage) counts every collected test, before selection
        for it in items:
            self.inventory[it.nodeid] = item_clauses(it)
        self.have_inventory = True
        self.inventory_complete = all(os.path.isdir(a.split("::")[0]) for a in config.args)
        if self.run.is_worker:
            config.workeroutput["sb_inventory"] = self.inventory
            config.workeroutput["sb_inventory_complete"] = self.inventory_complete
        opt = config.getoption
        globs, excl, sections, only = opt("clause"), opt("exclude_clause"), opt("section"), set(opt("only"))
        if (globs or excl or sections or only) and self.run.registry is not None:
            keep, drop = [], []
            for it in items:
                ids = self.inventory[it.nodeid]
                wanted = self.run.registry.select(ids, globs, excl, sections) and (not only or it.nodeid in only)
                (keep if wanted else drop).append(it)
            if drop:
                config.hook.pytest_deselected(items=drop)
                items[:] = keep
            if not keep:
                self.nothing_selected = True
        workers = getattr(config, "workerinput", {}).get("workercount") or config.getoption("numprocesses", 1) or 1
        items[:] = slowest_first(items, int(workers))  # better balance across xdist workers (plugin/order.py)

    def pytest_collectreport(self, report):
        if report.failed:
            self.collection_errors.append({"where": report.nodeid or "(session)",
                                           "message": str(report.longrepr)})

    # -- xdist (controller side) ---------------------------------------------------------------
    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node, error):
        """The controller collects nothing: its inventory is the workers'."""
        out = getattr(node, "workeroutput", None) or {}
        if "sb_inventory" in out:
            self.inventory.update(out["sb_inventory"])
            self.inventory_complete = bool(out.get("sb_inventory_complete"))
            self.have_inventory = True
