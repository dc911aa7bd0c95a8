"""The fixtures tests use: `bus` (the daemon under test in the test's mode),
`sb_mode`, `rng`, and `worker` (the worker under test)."""

from __future__ import annotations

import pytest

from ..common import context
from ..common.errors import DaemonCrashed, HarnessError
from ..daemon.bus import Bus
from ..daemon.items import blocked_message
from ..worker.run import WorkerRun
from . import keys
from .selection import item_clauses


def _run(config):
    """The Run, read by a fixture; a harness error instead when the plugin is
    inactive, or the run or its subject has a fatal error (no test runs)."""
    run = config.stash.get(keys.RUN, None)
    if run is None:
        raise HarnessError("the stdio Bus conformance plugin is inactive in this pytest run: set "
                           "stdio_bus_conformance = true in its ini file, or pass -p stdio_bus_conformance.plugin")
    fatal = run.fatal + config.stash[keys.SUBJECTS].fatal
    if fatal:
        raise HarnessError("; ".join(fatal))
    return run


# -- the `bus` fixture -----------------------------------------------------------------
@pytest.fixture
def sb_mode(request) -> str:
    return getattr(request, "param", "stdio")


@pytest.fixture
def bus(request, sb_mode):
    """The daemon under test, in this test's mode. See daemon/bus.py."""
    run = _run(request.config)
    ctx, artifacts = request.config.stash[keys.SUBJECTS].ctx, request.config.stash[keys.ARTIFACTS]
    if run.worker_mode:
        raise HarnessError("this test needs a daemon (the `bus` fixture) and the run judges a worker: "
                           "collect worker_tests/ with --worker")
    if not ctx.profile.supports(sb_mode):
        pytest.skip(f"unsupported: the profile {ctx.profile.name} does not support {sb_mode} mode")
    for m in request.node.iter_markers("requires"):
        missing = [f for f in m.args if f not in ctx.profile.features]
        if missing:
            pytest.skip(f"unsupported: the profile lacks feature(s) {', '.join(missing)}")
    cited = item_clauses(request.node)
    if ctx.preflight is not None:  # blocked before anything starts: fast
        for item in [f"start-{sb_mode}"] + [a for m in request.node.iter_markers("stands_on") for a in m.args]:
            r = ctx.preflight.blocking(item, cited)
            if r is not None:
                pytest.skip(blocked_message(r))
    b = Bus(ctx, sb_mode, request.node.nodeid)
    b.requires = {f for m in request.node.iter_markers("requires") for f in m.args}
    b.cited = tuple(cited)
    context.state.bus = b
    try:
        yield b
    finally:
        crash = None
        try:
            try:
                b.stop()
            except DaemonCrashed as exc:
                crash = exc
            request.node.stash[keys.FINDINGS] = list(b.findings)
            if request.node.stash.get(keys.FAILED, False) or crash is not None or \
                    any(f["kind"] != "flood" for f in b.findings):
                dest = artifacts.artifact_dir(request.node.nodeid)
                b.write_artifacts(dest, artifacts.rerun_command(request.node), artifacts.artifact_room())
                artifacts.write_rerun(dest, request.node)
                if b.truncated:
                    request.node.stash[keys.FINDINGS].append(
                        {"kind": "truncated", "test": request.node.nodeid, "clause": None,
                         "detail": "artifacts cut to stay bounded: " + ", ".join(sorted(set(b.truncated)))})
        finally:
            b.cleanup()
        if crash is not None:
            raise crash


@pytest.fixture
def rng(bus):
    """random.Random seeded from the run's seed and the test id."""
    return bus.rng


# -- the `worker` fixture ----------------------------------------------------------------
@pytest.fixture
def worker(request):
    """The worker under test. See worker/run.py."""
    run = _run(request.config)
    wctx, artifacts = request.config.stash[keys.SUBJECTS].wctx, request.config.stash[keys.ARTIFACTS]
    if not run.worker_mode:
        raise HarnessError("this test judges a worker (the `worker` fixture) and the run judges a daemon: "
                           "pass --worker 'COMMAND ARGS' --worker-profile P")
    desc = wctx.desc
    why = request.config.stash[keys.SELECTION].worker_unsupported(request.node)
    if why:
        pytest.skip(f"unsupported: {why}")
    for m in request.node.iter_markers("requires"):
        missing = [f for f in m.args if not desc.has(f)]
        if missing:
            pytest.skip(f"the worker description gives no {', '.join(missing)}")
    w = WorkerRun(wctx, request.node.nodeid, item_clauses(request.node))
    try:
        yield w
    finally:
        try:
            w.stop()
            notes = w.slow_notes()  # a note, not a failure: the verdict is the clauses'
            if notes:
                request.node.stash[keys.FINDINGS] = [{"kind": "slow", "test": request.node.nodeid,
                                                      "detail": n, "clause": None} for n in notes]
            if request.node.stash.get(keys.FAILED, False) or notes:
                w.write_artifacts(artifacts.artifact_dir(request.node.nodeid),
                                  artifacts.rerun_command(request.node))
        finally:
            w.cleanup()
