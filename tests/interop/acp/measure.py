"""The scenario x mode table of issue 23 (closing mid-turn, reconnect at
once, churn), as the daemon behaves today: a measurement for the closing
note and the README, not a test (timings belong in no assertion).

    STDIO_BUS=build/stdio_bus /usr/bin/python3 tests/interop/acp/measure.py [--churn-seconds 10]

Closing mid-turn uses the spec's drain_timeout_sec (30 s): the time from the
editor's close (a permission request pending) to its agent's exit.
"""

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import test_acp_bus as t  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--churn-seconds", type=int, default=10)
    opts = ap.parse_args()
    rows = []
    direct_ms = None
    with tempfile.TemporaryDirectory(prefix="sb-acp-measure-") as tmp:
        tmp = Path(tmp)
        r, = t.run_clients(["--spawn", *t.AGENT], "closeMidTurn", 1, tmp / "direct")
        direct_ms = r["exitMs"]
        for pool in t.POOLS:
            for mode in t.MODES:
                d = tmp / f"{pool}-{mode}"
                d.mkdir()
                with t.Bus(mode, t.POOLS[pool](1, mode), d, limits={"drain_timeout_sec": 30}) as bus:
                    r, = t.run_clients(bus.target(), "closeMidTurn", 1, d / "w", bus.stderr_file,
                                       env={"ACP_CLOSE_WAIT_MS": "40000"})
                row = {"pool": pool, "mode": mode, "close_ms": r["exitMs"]}
                if mode != "stdio":
                    d2 = tmp / f"{pool}-{mode}-r"
                    d2.mkdir()
                    with t.Bus(mode, {**t.POOLS[pool](1, mode), "instances": 1}, d2) as bus:
                        r, = t.run_clients(bus.target(), "reconnect", 1, d2 / "w", bus.stderr_file)
                    row["reconnect"] = f"{r['refused']} of {r['rounds']} refused"
                    d3 = tmp / f"{pool}-{mode}-c"
                    d3.mkdir()
                    with t.Bus(mode, {**t.POOLS[pool](4, mode), "instances": 4}, d3) as bus:
                        runs = t.run_clients(bus.target(), "churn", 4, d3 / "w", bus.stderr_file,
                                             env={"ACP_SECONDS": str(opts.churn_seconds)})
                    tot = {k: sum(x[k] for x in runs) for k in ("rounds", "answered", "refused", "held")}
                    row["churn"] = (f"{tot['rounds']} connections: {tot['answered']} prompts answered, "
                                    f"{tot['refused']} refused, {tot['held']} held")
                rows.append(row)
                print(row, file=sys.stderr, flush=True)
    print(f"direct: the agent exits {direct_ms} ms after its editor closes mid-turn\n")
    print("| pool | mode | closing mid-turn: agent exit | reconnect at once (instances 1, 10 rounds) | "
          f"4 clients churning for {opts.churn_seconds} s (instances 4) |")
    print("|---|---|---|---|---|")
    for r in rows:
        close = f"{r['close_ms']} ms" if r["close_ms"] is not None else "> 40 s"
        print(f"| {r['pool']} | {r['mode']} | {close} | {r.get('reconnect', 'n/a (one client per daemon)')} | "
              f"{r.get('churn', 'n/a')} |")


if __name__ == "__main__":
    main()
