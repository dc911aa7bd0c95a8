"""Outcome mapping: from pytest phase reports to the suite's outcomes, and
from outcomes to the exit code.

Outcomes of one test:
  pass           every phase passed
  fail           an AssertionError/DaemonError, and a MUST/MUST NOT clause is cited
  warn           same, but only SHOULD/SHOULD NOT/MAY clauses are cited
  xfail          fail or warn, and the baseline lists the test as an expected failure
  unsupported    the profile does not support the test's mode or a required feature
  skipped        the test skipped itself for another reason
  harness-error  any other exception (the suite's fault, never the daemon's)
"""

from __future__ import annotations

from dataclasses import dataclass, field

OUTCOMES = ("pass", "fail", "warn", "xfail", "unsupported", "skipped", "harness-error")
RAN = ("pass", "fail", "warn", "xfail", "harness-error")

EXIT_OK, EXIT_FAIL, EXIT_HARNESS = 0, 1, 2


def exception_kind(exc: BaseException) -> str:
    """'daemon' when the exception counts against the daemon, else 'harness'."""
    from .errors import DaemonError
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
    findings: list = field(default_factory=list)

    @property
    def duration(self) -> float:
        return sum(p.duration for p in self.phases.values())


def classify(result: TestResult, mandatory: bool, expected_failure: bool) -> tuple[str, str, str]:
    """(outcome, message, details) of a test from its phases.

    mandatory: the test cites a MUST/MUST NOT clause.
    expected_failure: the baseline lists the test."""
    phases = [result.phases[w] for w in ("setup", "call", "teardown") if w in result.phases]
    for p in phases:
        if p.outcome == "failed" and p.kind == "harness":
            return "harness-error", f"{p.when}: {p.message}", p.details
    for p in phases:
        if p.outcome == "skipped":
            if p.wasxfail:
                return "xfail", p.message, p.details
            if p.kind == "unsupported":
                return "unsupported", p.message, ""
            return "skipped", p.message, ""
    crash = next((p for p in phases if p.outcome == "failed" and p.finding == "crash"), None)
    for p in ([crash] if crash is not None else phases):  # a crash explains whatever failed with it
        if p.outcome == "failed":
            outcome = "fail" if mandatory else "warn"
            if expected_failure:
                outcome = "xfail"
            msg = p.message if p.when == "call" else f"{p.when}: {p.message}"
            return outcome, msg, p.details
    return "pass", "", ""


@dataclass
class Verdict:
    exit_code: int
    reasons: list


BINDING_FINDINGS = {  # findings that fail the run on their own: kind -> what the exit reason says
    "leak": "process(es) outlived the daemon",
    "teardown-kill": "teardown(s) needed SIGKILL",
    "teardown-crash": "crash(es) at teardown",
}


def verdict(counts: dict, *, collection_errors: int, fatal: list, stale: list,
            gate_failures: list, min_tests: int, nothing_selected: bool,
            findings: list = ()) -> Verdict:
    """The exit code: 2 for anything that makes the run untrustworthy, else 1
    for a failure (or a stale baseline entry), else 0. Warnings never fail."""
    reasons_2, reasons_1 = [], []
    ran = sum(counts.get(o, 0) for o in RAN)
    if fatal:
        reasons_2 += fatal
    if collection_errors:
        reasons_2.append(f"{collection_errors} collection error(s)")
    if counts.get("harness-error"):
        reasons_2.append(f"{counts['harness-error']} harness error(s)")
    if nothing_selected or (ran == 0 and not fatal and not collection_errors):
        reasons_2.append("no test ran (nothing selected or collected)")
    if min_tests and ran < min_tests:
        reasons_2.append(f"only {ran} test(s) ran, --min-tests is {min_tests}")
    if gate_failures:
        reasons_2.append(f"coverage gate: {len(gate_failures)} MUST clause(s) without a test")
    if counts.get("fail"):
        reasons_1.append(f"{counts['fail']} failure(s)")
    if stale:
        reasons_1.append(f"{len(stale)} stale baseline entr{'y' if len(stale) == 1 else 'ies'}")
    for kind, words in BINDING_FINDINGS.items():
        n = sum(1 for f in findings if f.get("kind") == kind and not f.get("root_cause"))
        if n:
            reasons_1.append(f"{n} {words}")
    if reasons_2:
        return Verdict(EXIT_HARNESS, reasons_2 + reasons_1)
    if reasons_1:
        return Verdict(EXIT_FAIL, reasons_1)
    return Verdict(EXIT_OK, [])


def summary_line(counts: dict) -> str:
    """'N passed, N failed' then the other non-zero outcomes."""
    parts = [f"{counts.get('pass', 0)} passed", f"{counts.get('fail', 0)} failed"]
    for key, word in (("warn", "warned"), ("xfail", "expected failures"),
                      ("unsupported", "unsupported"), ("skipped", "skipped"),
                      ("harness-error", "harness errors")):
        if counts.get(key):
            parts.append(f"{counts[key]} {word}")
    return ", ".join(parts)
