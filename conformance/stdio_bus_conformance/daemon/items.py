"""What the preflight judges, as data: its items (each behaviour, its clause,
the clauses that judge it themselves), their results, and how a test standing
on a broken one is blocked. The checks themselves are in preflight.py; this
module stands alone so that the bus (which blocks a test as it signals the
daemon) and the plugin read it without importing the checks."""

from __future__ import annotations

import dataclasses
import signal

from ..common.pace import Pace

MODES_PREFERRED = ("unix", "tcp", "stdio")


@dataclasses.dataclass(frozen=True)
class Item:
    name: str
    clause: str               # the clause a broken item is reported on
    related: tuple            # clauses whose tests judge this behaviour themselves (never blocked by it)
    what: str
    modes: tuple = MODES_PREFERRED   # where it can run, in order of preference
    needs: tuple = ()         # items whose behaviour this one also exercises: when one of them is
                              # broken, this one is not judged and its tests are blocked by that one


ITEMS = {i.name: i for i in (
    Item("start-stdio", "SB-4.1.1-1", ("SB-4.1.1-1", "SB-4.1.1-2"), "starts in stdio mode and answers", ("stdio",)),
    Item("start-unix", "SB-4.1.1-3", ("SB-4.1.1-3",), "starts in unix mode and answers", ("unix",)),
    Item("start-tcp", "SB-4.1.1-4", ("SB-4.1.1-4",), "starts in tcp mode and answers", ("tcp",)),
    # a crash or no exit: the shutdown of 10.2 never ran, so its clauses (10.2-2..6) are not judged
    Item("sigterm", "SB-10.1-1", ("SB-10.1-1", "SB-3.1-6"), "exits with status 0 on SIGTERM"),
    Item("sigint", "SB-10.1-2", ("SB-10.1-2", "SB-3.1-6"), "exits with status 0 on SIGINT"),
    Item("stdin-eof", "SB-I-5", ("SB-I-5",), "exits with status 0 at the end of stdin", ("stdio",)),
    Item("restart-exit0", "SB-7.1.3-1", ("SB-7.1.3-1",), "restarts a worker that exited with status 0"),
    Item("restart-crash", "SB-7.1.3-1", ("SB-7.1.3-1",), "restarts a worker killed by a signal"),
    Item("two-pools", "SB-6.1.3-1", ("SB-6.1.3-1", "SB-6.1.1-1"), "routes to both of two pools"),
    Item("pipes", "SB-3.3-1", ("SB-3.3-1",), "gives each worker pipes for its stdin and stdout"),
    # a daemon that loses what a full pipe does not take at once: one root cause, not a
    # failure on each clause whose test writes faster than its worker reads
    Item("full-pipe", "SB-5.1.1-3", ("SB-5.1.1-3", "SB-4.2.3-3"),
         "delivers every byte of every line to a worker that reads slowly (its pipe full)"),
    Item("line-64k", "SB-5.1.1-3", ("SB-5.1.1-3", "SB-4.2.3-3", "SB-I-26"),
         "passes a 64 KiB line both ways", needs=("full-pipe",)),
    Item("big-line", "SB-5.1.1-3", ("SB-5.1.1-3", "SB-4.2.3-3", "SB-I-26"),
         "passes a 256 KiB line both ways", needs=("line-64k",)),
    # 500 answers at once are more than a socket takes: the daemon queues them (slow-reader)
    Item("burst", "SB-6.3.1-2", ("SB-6.3.1-2", "SB-I-43"), "answers 500 pipelined requests to one worker",
         needs=("slow-reader",)),
    Item("slow-reader", "SB-7.3.1-1", ("SB-7.3.1-1",),
         "keeps what a client does not read yet (1 MiB of answers) and delivers it all", ("unix", "tcp")),
    Item("malformed", "SB-4.3-1", ("SB-4.3-1",),
         "closes a client that sends a malformed line, and only that client", ("unix", "tcp")),
)}
SIGNAL_ITEMS = {signal.SIGTERM: "sigterm", signal.SIGINT: "sigint"}


@dataclasses.dataclass
class Result:
    name: str
    status: str               # ok | broken | not judged
    clause: str
    mode: str | None
    message: str = ""
    duration: float = 0.0

    def to_json(self) -> dict:
        return dataclasses.asdict(self)


class Results:
    """name -> Result; passed to xdist workers as JSON."""

    def __init__(self, results: dict | None = None, duration: float = 0.0, pace: Pace | None = None):
        self.items: dict[str, Result] = results or {}
        self.duration = duration
        self.pace = pace or Pace()   # what the items measured of the daemon's pace

    def to_json(self) -> dict:
        return {"duration": round(self.duration, 3), "items": [r.to_json() for r in self.items.values()],
                "pace": self.pace.to_json()}

    @classmethod
    def from_json(cls, data: dict | None) -> "Results | None":
        if not data:
            return None
        return cls({d["name"]: Result(**d) for d in data["items"]}, data.get("duration", 0.0),
                   Pace.from_json(data.get("pace")))

    def broken(self, name: str) -> Result | None:
        r = self.items.get(name)
        return r if r is not None and r.status == "broken" else None

    def blocking(self, name: str, cited) -> Result | None:
        """The broken result of item `name` when it blocks a test citing
        `cited` (None when the test judges that behaviour itself). A test
        judges it when its FIRST cited clause (where its plain asserts and a
        crash land, judge.py) is the clause the item was found broken on, or
        one the item lists as the same behaviour; any other test would fail
        on a clause of its own for this defect, so it is blocked."""
        item = ITEMS[name]
        for need in item.needs:
            r = self.blocking(need, cited)
            if r is not None:
                return r
        r = self.broken(name)
        if r is None:
            return None
        same = item.related if r.clause == item.clause else (r.clause,)
        if cited and cited[0] in same:
            return None
        return r


def blocked_message(r: Result) -> str:
    """The skip reason of a blocked test (read back by the reports)."""
    return f"blocked: {r.name}: {r.message} ({r.clause})"
