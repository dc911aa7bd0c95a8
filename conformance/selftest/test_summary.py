"""The run's conclusion is a plain function of plain data (issue 25):
reports.summary.summarize(RunFacts) gives the verdict, the root causes and
what gates, with no pytest run behind it."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from stdio_bus_conformance.daemon.items import Result, Results  # noqa: E402
from stdio_bus_conformance.reports.outcomes import EXIT_FAIL, EXIT_OK, TestResult  # noqa: E402
from stdio_bus_conformance.reports.summary import RunFacts, summarize  # noqa: E402
from stdio_bus_conformance.spec.registry import Registry  # noqa: E402

REGISTRY = Registry.load(None, "SPEC.md")


def result(nodeid, clause, outcome="pass", message=""):
    r = TestResult(nodeid, [clause], "unix")
    r.outcome, r.clause, r.message = outcome, (clause if outcome != "pass" else None), message
    return r


def facts(*results, **kw):
    res = {r.nodeid: r for r in results}
    inv = {r.nodeid: r.clauses for r in results}
    return RunFacts(results=res, registry=REGISTRY, inventory=inv, have_inventory=True, **kw)


def test_a_passing_run_exits_0():
    s = summarize(facts(result("t::a", "SB-4.3-1"), result("t::b", "SB-6.3.1-2")))
    assert s.verdict.exit_code == EXIT_OK, s.verdict.reasons
    assert s.counts["pass"] == 2 and s.counts["total"] == 2


def test_a_spec_failure_fails_the_run():
    s = summarize(facts(result("t::a", "SB-4.3-1", "fail", "closed the wrong client")))
    assert s.verdict.exit_code == EXIT_FAIL
    assert s.results["t::a"].gated


def test_an_interpretation_failure_gates_only_when_asked():
    quiet = summarize(facts(result("t::i", "SB-I-5", "fail"), gate_interpretations=False,
                            gate_why="default: reported, not gated"))
    assert quiet.verdict.exit_code == EXIT_OK
    assert not quiet.results["t::i"].gated
    assert quiet.meta["gate"] == {"interpretations": False, "why": "default: reported, not gated"}
    loud = summarize(facts(result("t::i", "SB-I-5", "fail"), gate_interpretations=True))
    assert loud.verdict.exit_code == EXIT_FAIL


def test_a_broken_preflight_item_is_one_root_cause_with_the_tests_it_blocked():
    pf = Results({"sigterm": Result("sigterm", "broken", "SB-10.1-1", "unix", "exit status 1 on SIGTERM")})
    blocked = [result(f"t::b{i}", "SB-6.3.1-2", "blocked", "blocked: sigterm: exit status 1 on SIGTERM (SB-10.1-1)")
               for i in range(3)]
    s = summarize(facts(result("t::ok", "SB-4.3-1"), *blocked, preflight=pf))
    (rc,) = s.root_causes
    assert (rc["item"], rc["clause"], rc["blocked"], rc["binding"]) == ("sigterm", "SB-10.1-1", 3, True)
    assert s.verdict.exit_code == EXIT_FAIL
