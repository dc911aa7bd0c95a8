"""Judging a check by the clause it checks.

A test cites the clauses it checks (@pytest.mark.clause). When it fails, the
failure is attributed to one clause, and that clause's level and tier decide
the outcome (fail for MUST/MUST NOT, warn for SHOULD/SHOULD NOT/MAY):

* ``check("SB-I-20", cond, msg)`` fails on that clause (ClauseFailure, an
  AssertionError carrying the clause);
* ``with checking("SB-I-34"): d.wait_log("WARN")`` attributes any failure
  inside the block (an assertion, a DaemonTimeout...) to that clause;
* anything else (a plain ``assert``, a DaemonError from a wait) is attributed
  to the test's FIRST cited clause. A test citing clauses of different levels
  or tiers therefore lists first the clause its plain asserts check, and
  judges the others with check()/checking().

A crash (DaemonCrashed) is never re-attributed: it is reported as a crash,
on the test's first clause.
"""

from __future__ import annotations

import contextlib

from ..common import context
from ..common.errors import DaemonCrashed, DaemonError, HarnessError


class ClauseFailure(AssertionError):
    """A failed check, attributed to `clause`."""

    def __init__(self, clause: str, message: str = ""):
        super().__init__(f"[{clause}] {message}" if message else f"[{clause}] check failed")
        self.clause = clause
        self.detail = message


def _cited(clause_id: str) -> None:
    cited = context.state.clauses
    if context.state.nodeid is not None and clause_id not in cited:
        raise HarnessError(f"check()/checking() names {clause_id}, which {context.state.nodeid} does not "
                           f"cite ({', '.join(cited)}): cite it in @pytest.mark.clause")


def check(clause_id: str, cond, message="") -> None:
    """Fails the test on clause_id when cond is false. message may be a
    callable (evaluated only on failure)."""
    _cited(clause_id)
    if not cond:
        raise ClauseFailure(clause_id, message() if callable(message) else str(message))


@contextlib.contextmanager
def checking(clause_id: str):
    """Attributes an AssertionError or DaemonError raised in the block to
    clause_id (a ClauseFailure raised inside keeps its own clause; a crash
    stays a crash)."""
    _cited(clause_id)
    try:
        yield
    except (ClauseFailure, DaemonCrashed):
        raise
    except (AssertionError, DaemonError) as exc:
        text = str(exc) or exc.__class__.__name__
        if isinstance(exc, DaemonError):
            text = f"{exc.__class__.__name__}: {text}"
        raise ClauseFailure(clause_id, text) from exc


def tier(clause_id: str) -> str:
    """spec (SB-n.n-n, appendices, the worker catalogue), interpretation
    (SB-I-n: our reading where the spec is silent), extension (SB-X-n)."""
    if clause_id.startswith("SB-I-"):
        return "interpretation"
    if clause_id.startswith("SB-X-"):
        return "extension"
    return "spec"


TIERS = ("spec", "interpretation", "extension")
