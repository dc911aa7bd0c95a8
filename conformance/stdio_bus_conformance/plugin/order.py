"""The order tests are handed to xdist workers: slowest files first.

xdist gives each worker a first batch, then one test at a time in collection
order; a few-second test that starts last leaves the other workers idle at
the end. The files whose tests wait longest on configured limits (drain,
backpressure and restart timeouts) go first, and the hundreds of short tests
fill in behind them. A static ranking, measured from results.json durations
on our daemon (sum of test-seconds per file), so every xdist worker collects
the same order; files not listed keep their place after these.

Before all of them go the tests marked `long_wait`: those that wait out a
default limit of section 8.1 (30-60 s) or a long idle period. They run by
default, each on one xdist worker from the start, so their waits overlap
the rest of the suite instead of adding to it.
"""

from __future__ import annotations

SLOW_FIRST = ("test_affinity.py", "test_hostile.py", "test_boundaries.py", "test_failure.py",
              "test_limits.py", "test_shutdown.py", "test_id_reuse.py", "test_entities.py")


def slowest_first(items: list, workers: int = 1) -> list:
    """items re-ordered by file rank; stable within a file and among the rest.

    The long_wait tests lead the first chunks xdist hands out: its load
    scheduler gives each of the `workers` a first chunk of consecutive items
    (a quarter of its share), so the i-th long test goes to the head of the
    i-th chunk, where it starts at once on a worker of its own instead of
    queueing behind another long test in one chunk."""
    def rank(it):
        name = it.nodeid.split("::")[0].rsplit("/", 1)[-1]
        return SLOW_FIRST.index(name) if name in SLOW_FIRST else len(SLOW_FIRST)
    long = [it for it in items if it.get_closest_marker("long_wait") is not None]
    rest = sorted((it for it in items if it.get_closest_marker("long_wait") is None), key=rank)
    if workers <= 1:
        return long + rest
    chunk = max(len(items) // workers // 4, 2)  # xdist's LoadScheduling.schedule()
    out = []
    for i, it in enumerate(long):
        need = i * chunk - len(out) if i < workers else 0  # short tests before its chunk's head
        out += rest[:max(need, 0)]
        rest = rest[max(need, 0):]
        out.append(it)
    return out + rest
