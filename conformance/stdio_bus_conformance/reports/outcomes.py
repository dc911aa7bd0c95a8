"""Outcome mapping: from pytest phase reports to the suite's outcomes, and
from outcomes to the exit code.

Outcomes of one test:
  pass           every phase passed
  fail           an AssertionError/DaemonError judged by a MUST/MUST NOT clause: the
                 clause its check() named, else the test's first cited clause
  warn           same, judged by a SHOULD/SHOULD NOT/MAY clause
  xfail          fail or warn, and the baseline lists the test as an expected failure
  blocked        a preflight item the test stands on is broken (its root cause is
                 reported once, on its own clause; never a pass, never a fail)
  unsupported    the profile does not support the test's mode or a required feature
  skipped        the test skipped itself for another reason
  harness-error  any other exception (the suite's fault, never the daemon's)
  unfinished     the run was interrupted before the test finished (never a pass)
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .bite import is_bite_failure

OUTCOMES = ("pass", "fail", "warn", "xfail", "blocked", "unsupported", "skipped", "harness-error", "unfinished")
RAN = ("pass", "fail", "warn", "xfail", "harness-error")
JUDGED = RAN + ("blocked",)   # selected and given a verdict (counts for --min-tests)

EXIT_OK, EXIT_FAIL, EXIT_HARNESS, EXIT_THIN = 0, 1, 2, 3
MIN_JUDGED = 0.5  # the share of the subject's MUST clauses a whole run must judge (--min-judged)


@dataclass
class Judged:
    """How many of the subject's MUST clauses the run judged (passed, failed,
    warned or expected to fail), of how many apply to it (every tested MUST
    clause but those no test of which is supported: another profile's, a
    mode or feature not claimed). whole: the whole suite was selected, so the
    share means something (a run of --clause/-k/--only judges what it picked)."""
    judged: int = 0
    total: int = 0
    whole: bool = False

    def line(self, minimum: float | None) -> str:
        share = f"{100 * self.judged / self.total:.0f}%" if self.total else "n/a"
        floor = "" if not minimum else f", --min-judged {minimum:g}"
        return f"judged {self.judged} of {self.total} MUST clauses that apply ({share}{floor})"

    def too_few(self, minimum: float | None) -> bool:
        return bool(minimum) and self.whole and self.total > 0 and self.judged < minimum * self.total

    def to_json(self) -> dict:
        return {"judged": self.judged, "total": self.total, "whole": self.whole}


def exception_kind(exc: BaseException) -> str:
    """'daemon' when the exception counts against the daemon, else 'harness'."""
    from ..common.errors import DaemonError
    if isinstance(exc, (AssertionError, DaemonError)):
        return "daemon"
    try:
        import pytest
        failed = pytest.fail.Exception
    except Exception:  # pragma: no cover - pytest is always there in a run
        failed = ()
    if failed and isinstance(exc, failed):
        # pytest-timeout fails with "Timeout >Ns": every harness wait has its
        # own deadline, so hitting the per-test timeout is the suite's bug.
        return "harness" if str(exc).startswith("Timeout >") else "daemon"
    return "harness"


@dataclass
class Phase:
    when: str
    outcome: str          # pytest: passed / failed / skipped
    kind: str | None      # daemon / harness / unsupported / skip / None
    message: str = ""
    details: str = ""
    duration: float = 0.0
    wasxfail: bool = False
    clause: str | None = None     # the clause a failure is judged by (check(), else the first cited)
    finding: str | None = None    # "crash" when the daemon died of a signal the harness did not send


@dataclass
class TestResult:
    __test__ = False  # not a pytest test class
    nodeid: str
    clauses: list
    mode: str | None
    phases: dict = field(default_factory=dict)
    artifact_dir: str | None = None
    outcome: str = "pass"
    message: str = ""
    details: str = ""
    clause: str | None = None     # the clause a failure (fail, warn, xfail) is judged by
    findings: list = field(default_factory=list)
    gated: bool = True            # a fail that fails the run (see gates())

    @property
    def duration(self) -> float:
        return sum(p.duration for p in self.phases.values())


MANDATORY = ("MUST", "MUST NOT")


def judged_clause(result: TestResult, phase: Phase | None = None) -> str | None:
    """The clause a failure is judged by: the one its check() named, else the
    test's first cited clause."""
    if phase is not None and phase.clause:
        return phase.clause
    return result.clauses[0] if result.clauses else None


def classify(result: TestResult, level_of, expected_failure: bool) -> tuple[str, str, str, str | None]:
    """(outcome, message, details, judged clause) of a test from its phases.

    level_of(clause id) -> level: the level of the clause a failure is judged
    by decides between fail (MUST/MUST NOT) and warn (SHOULD/SHOULD NOT/MAY).
    A bool is accepted too (True: every failure fails), for callers that
    judge a test as a whole.
    expected_failure: the baseline lists the test."""
    if isinstance(level_of, bool):
        level_of = (lambda _c, _m=level_of: "MUST" if _m else "SHOULD")
    phases = [result.phases[w] for w in ("setup", "call", "teardown") if w in result.phases]
    for p in phases:
        if p.outcome == "failed" and p.kind == "harness":
            return "harness-error", f"{p.when}: {p.message}", p.details, None
    for p in phases:
        if p.outcome == "skipped":
            if p.wasxfail:
                return "xfail", p.message, p.details, judged_clause(result)
            if p.kind in ("unsupported", "blocked"):
                return p.kind, p.message, "", None
            return "skipped", p.message, "", None
    crash = next((p for p in phases if p.outcome == "failed" and p.finding == "crash"), None)
    for p in ([crash] if crash is not None else phases):  # a crash explains whatever failed with it
        if p.outcome == "failed":
            clause = judged_clause(result, p)
            outcome = "fail" if level_of(clause) in MANDATORY else "warn"
            if expected_failure:
                outcome = "xfail"
            msg = p.message if p.when == "call" else f"{p.when}: {p.message}"
            return outcome, msg, p.details, clause
    if "call" not in result.phases or "teardown" not in result.phases:
        # setup passed and the run ended before the test did (interrupted)
        return "unfinished", "the run ended before this test finished", "", None
    return "pass", "", "", None


@dataclass
class Verdict:
    exit_code: int
    reasons: list
    notes: list = field(default_factory=list)   # what was judged but does not decide the exit status


def gates(tier: str | None, *, gate_interpretations: bool) -> bool:
    """Whether a MUST failure judged on a clause of this tier fails the run.
    The spec (and our extensions, judged only where a profile claims them)
    always gate. Our interpretations (SB-I, where the seed is silent) gate
    only when asked: --strict, or a profile with gate_interpretations = true
    (ours); another daemon that conforms to the seed but reads it otherwise
    is reported, not failed."""
    return tier != "interpretation" or gate_interpretations


def ungated_failures(failures, *, gate_interpretations: bool) -> int:
    """How many of the failures, given as (outcome, tier of the clause each is
    judged by) pairs, do not fail the run."""
    return sum(1 for outcome, t in failures
               if outcome == "fail" and not gates(t, gate_interpretations=gate_interpretations))


BINDING_FINDINGS = {  # findings that fail the run on their own: kind -> what the exit reason says
    "leak": "process(es) outlived the daemon",
    "teardown-kill": "teardown(s) needed SIGKILL",
    "teardown-crash": "crash(es) at teardown",
}


def verdict(counts: dict, *, collection_errors: int, fatal: list, stale: list,
            gate_failures: list, min_tests: int, nothing_selected: bool,
            findings: list = (), interrupted: bool = False, broken: list = (),
            blocked: int = 0, strict: bool = False, ungated: int = 0,
            judged: Judged | None = None, min_judged: float | None = MIN_JUDGED) -> Verdict:
    """The exit code: 2 for anything that makes the run untrustworthy, else 1
    for a failure (or a stale baseline entry), else 3 when a whole run judged
    fewer than min_judged of the MUST clauses that apply (judged: a Judged;
    a run that judged a few clauses and passed them says little), else 0.
    Warnings fail only with strict (--strict: SHOULD-level clauses gate too).
    ungated: how many of counts["fail"] are failures that do not gate (see
    gates()); they are named in the notes, never in the reasons."""
    reasons_2, reasons_1, reasons_3, notes = [], [], [], []
    ran = sum(counts.get(o, 0) for o in JUDGED)
    if fatal:
        reasons_2 += fatal
    if collection_errors:
        reasons_2.append(f"{collection_errors} collection error(s)")
    if counts.get("harness-error"):
        reasons_2.append(f"{counts['harness-error']} harness error(s)")
    if counts.get("unfinished") or interrupted:
        reasons_2.append("the run was interrupted" + (f": {counts['unfinished']} test(s) unfinished"
                                                       if counts.get("unfinished") else ""))
    if nothing_selected or (ran == 0 and not fatal and not collection_errors):
        reasons_2.append("no test ran (nothing selected or collected)")
    if min_tests and ran < min_tests:
        reasons_2.append(f"only {ran} test(s) ran, --min-tests is {min_tests}")
    if gate_failures:
        unbitten = [g for g in gate_failures if is_bite_failure(g)]
        if len(unbitten) < len(gate_failures):
            reasons_2.append(f"coverage gate: {len(gate_failures) - len(unbitten)} MUST clause(s) without a test")
        if unbitten:
            reasons_2.append(f"bite gate: {len(unbitten)} MUST clause(s) not proven to bite")
    if broken:
        reasons_1.append("preflight: " + ", ".join(f"{b['item']} broken ({b['clause']})" for b in broken))
    if blocked:
        reasons_1.append(f"{blocked} test(s) blocked (not judged)")
    if counts.get("fail", 0) - ungated > 0:
        reasons_1.append(f"{counts['fail'] - ungated} failure(s)")
    if ungated:
        notes.append(f"{ungated} failure(s) of our interpretations (SB-I) reported, not gated "
                     "(--strict or the profile's gate_interpretations gates them)")
    if strict and counts.get("warn"):
        reasons_1.append(f"{counts['warn']} warning(s) (--strict: SHOULD-level clauses gate)")
    if stale:
        reasons_1.append(f"{len(stale)} stale baseline entr{'y' if len(stale) == 1 else 'ies'}")
    for kind, words in BINDING_FINDINGS.items():
        n = sum(1 for f in findings if f.get("kind") == kind and not f.get("root_cause"))
        if n:
            reasons_1.append(f"{n} {words}")
    if judged is not None and judged.too_few(min_judged):
        reasons_3.append(f"too little judged: {judged.line(min_judged)}")
    if reasons_2:
        return Verdict(EXIT_HARNESS, reasons_2 + reasons_1 + reasons_3, notes)
    if reasons_1:
        return Verdict(EXIT_FAIL, reasons_1 + reasons_3, notes)
    if reasons_3:
        return Verdict(EXIT_THIN, reasons_3, notes)
    return Verdict(EXIT_OK, [], notes)


def summary_line(counts: dict) -> str:
    """'N passed, N failed' then the other non-zero outcomes."""
    parts = [f"{counts.get('pass', 0)} passed", f"{counts.get('fail', 0)} failed"]
    for key, word in (("warn", "warned"), ("xfail", "expected failures"), ("blocked", "blocked"),
                      ("unsupported", "unsupported"), ("skipped", "skipped"),
                      ("harness-error", "harness errors"), ("unfinished", "unfinished")):
        if counts.get(key):
            parts.append(f"{counts[key]} {word}")
    return ", ".join(parts)
