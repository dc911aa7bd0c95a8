"""The order tests are handed to xdist workers: slowest files first.

xdist gives each worker a first batch, then one test at a time in collection
order; a few-second test that starts last leaves the other workers idle at
the end. The files whose tests wait longest on configured limits (drain,
backpressure and restart timeouts) go first, and the hundreds of short tests
fill in behind them. A static ranking, measured from results.json durations
on our daemon (sum of test-seconds per file), so every xdist worker collects
the same order; files not listed keep their place after these.
"""

from __future__ import annotations

SLOW_FIRST = ("test_affinity.py", "test_hostile.py", "test_boundaries.py", "test_failure.py",
              "test_limits.py", "test_shutdown.py", "test_id_reuse.py", "test_entities.py")


def slowest_first(items: list) -> list:
    """items re-ordered by file rank; stable within a file and among the rest."""
    def rank(it):
        name = it.nodeid.split("::")[0].rsplit("/", 1)[-1]
        return SLOW_FIRST.index(name) if name in SLOW_FIRST else len(SLOW_FIRST)
    return sorted(items, key=rank)
