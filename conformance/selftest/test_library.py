"""Unit tests of the harness library's pure parts and of its client and
/proc helpers, without a daemon."""

import os
import socket
import subprocess
import sys
import time

import pytest

from stdio_bus_conformance.common import procinfo
from stdio_bus_conformance.daemon.client import SocketClient
from stdio_bus_conformance.daemon.config import merge
from stdio_bus_conformance.common.errors import ConnectionClosed, DaemonError, DaemonTimeout, HarnessError
from stdio_bus_conformance.reports.outcomes import (EXIT_THIN, Judged, Phase, TestResult, classify, exception_kind,
                                                   summary_line, verdict)
from stdio_bus_conformance.daemon.profile import Profile, load_profile
from stdio_bus_conformance.spec.registry import Registry
from stdio_bus_conformance.common.transcript import Recorder
from stdio_bus_conformance.daemon.workerlog import WorkerLog

from conftest import SPEC


# -- spec registry ----------------------------------------------------------------
def test_registry_reads_levels_sections_and_checks():
    r = Registry.load(SPEC)
    assert r["SB-4.3-2"].level == "SHOULD" and r["SB-6.1-3"].check == "inspection"
    assert r["SB-I-1"].section == "I" and r["SB-6.1-1"].top_section == "6"
    assert r.any_mandatory(["SB-4.3-2", "SB-6.1-1"]) and not r.any_mandatory(["SB-4.3-2", "SB-6.1-2"])


def test_registry_selection_rules():
    r = Registry.load(SPEC)
    assert r.select(["SB-6.1-1"], clause_globs=["SB-6.*"])
    assert not r.select(["SB-4.3-1"], clause_globs=["SB-6.*"])
    assert not r.select(["SB-6.1-1", "SB-I-1"], exclude_globs=["SB-I-*"])
    assert r.select(["SB-6.1-1"], sections=["6"]) and not r.select(["SB-6.1-1"], sections=["6.11"])


def test_missing_spec_is_a_harness_error(tmp_path):
    with pytest.raises(HarnessError):
        Registry.load(tmp_path / "nope.md")


# -- profiles and configs -----------------------------------------------------------
def test_profile_expands_mode_flags_and_placeholders():
    p = Profile(extra_args=["--log-level", "debug"])
    assert p.argv("tcp", daemon="/d", config="/c.json", host="127.0.0.1", port=5) == \
        ["/d", "--config", "/c.json", "--tcp", "127.0.0.1:5", "--log-level", "debug"]
    assert p.argv("unix", daemon="/d", config="/c", socket="/s")[3:5] == ["--unix", "/s"]


def test_profile_rejects_mistakes(tmp_path):
    bad = tmp_path / "p.toml"
    for text, why in (('command = ["{daemon}", "{cfg}"]\n', "unknown placeholder"),
                      ('readiness = "later"\n', "readiness"),
                      ('modes = ["pipe"]\n', "unknown modes"),
                      ('colour = "blue"\n', "unknown keys"),
                      ('readiness = "stderr-regex"\n', "needs ready_regex")):
        bad.write_text(text)
        with pytest.raises(HarnessError, match=why):
            load_profile(bad).argv("stdio", daemon="/d", config="/c")


def test_config_merge_replaces_lists_and_deletes_none():
    base = {"pools": [{"id": "p"}], "limits": {"a": 1, "b": 2}}
    out = merge(base, {"limits": {"a": None, "c": 3}, "pools": [{"id": "q"}]})
    assert out == {"pools": [{"id": "q"}], "limits": {"b": 2, "c": 3}}
    assert base["limits"] == {"a": 1, "b": 2}


# -- worker log ----------------------------------------------------------------------
def test_worker_log_reads_complete_records_only(tmp_path):
    path = tmp_path / "p.log"
    log = WorkerLog(path)
    assert log.records() == []
    with open(path, "ab") as f:
        f.write(b"100 42 0 start /mock --log x\n200 42 0 in {\"id\":1}\n300 42 0 ou")
    assert [r.kind for r in log.records()] == ["start", "in"]
    with open(path, "ab") as f:
        f.write(b"t {\"id\":1,\"result\":2}\n400 43 - exit 0\n")
    recs = log.records()
    assert [r.kind for r in recs] == ["start", "in", "out", "exit"]
    assert recs[2].line == b'{"id":1,"result":2}\n' and recs[3].worker is None
    assert log.received() == [b'{"id":1}\n'] and log.pids() == [42]
    with pytest.raises(DaemonTimeout):
        log.wait_for(lambda r: r.kind == "signal", timeout=0.05)


# -- outcomes --------------------------------------------------------------------------
def result(**phases):
    r = TestResult("t", ["SB-6.1-1"], "stdio")
    for when, (outcome, kind) in phases.items():
        r.phases[when] = Phase(when, outcome, kind, "msg")
    return r


def test_classify_blames_the_right_party():
    ok = ("passed", None)
    assert classify(result(setup=ok, call=ok, teardown=ok), True, False)[0] == "pass"
    assert classify(result(call=("failed", "daemon")), True, False)[0] == "fail"
    assert classify(result(call=("failed", "daemon")), False, False)[0] == "warn"
    assert classify(result(call=("failed", "daemon")), True, True)[0] == "xfail"
    assert classify(result(call=("failed", "harness")), True, True)[0] == "harness-error"
    assert classify(result(setup=("failed", "harness")), True, False)[0] == "harness-error"
    assert classify(result(setup=("skipped", "unsupported")), True, False)[0] == "unsupported"
    assert classify(result(setup=("skipped", "blocked")), True, False)[0] == "blocked"
    assert classify(result(call=("passed", None), teardown=("failed", "harness")), True, False)[0] == "harness-error"


def test_classify_never_passes_an_unfinished_test():
    ok = ("passed", None)
    assert classify(result(setup=ok), True, False)[0] == "unfinished"
    assert classify(result(setup=ok, call=ok), True, False)[0] == "unfinished"


def test_classify_judges_a_failure_by_its_clause_level():
    levels = {"SB-6.1-1": "MUST", "SB-4.3-2": "SHOULD"}.get
    r = result(call=("failed", "daemon"))  # cites SB-6.1-1 only: a plain assert is judged by it
    assert classify(r, levels, False)[::3] == ("fail", "SB-6.1-1")
    r.phases["call"].clause = "SB-4.3-2"    # a check() of a SHOULD clause
    assert classify(r, levels, False)[::3] == ("warn", "SB-4.3-2")
    r.phases["teardown"] = Phase("teardown", "failed", "daemon", "the daemon died of SIGSEGV", finding="crash")
    out = classify(r, levels, False)       # a crash explains what failed with it, on the first clause
    assert out[0] == "fail" and "SIGSEGV" in out[1] and out[3] == "SB-6.1-1"


def test_exception_kinds():
    assert exception_kind(AssertionError()) == "daemon"
    assert exception_kind(DaemonTimeout("x")) == "daemon"
    assert exception_kind(KeyError("x")) == "harness"
    assert exception_kind(HarnessError("x")) == "harness"
    assert exception_kind(pytest.fail.Exception("Timeout >1.0s")) == "harness"
    assert exception_kind(pytest.fail.Exception("explicit failure")) == "daemon"


def test_verdict_precedence():
    ok = dict(collection_errors=0, fatal=[], stale=[], gate_failures=[], min_tests=0, nothing_selected=False)
    assert verdict({"pass": 3, "warn": 1}, **ok).exit_code == 0
    assert verdict({"pass": 3, "fail": 1}, **ok).exit_code == 1
    assert verdict({"pass": 3}, **dict(ok, stale=[{"test": "t"}])).exit_code == 1
    assert verdict({"pass": 3, "fail": 1, "harness-error": 1}, **ok).exit_code == 2
    assert verdict({"unsupported": 3}, **ok).exit_code == 2
    assert verdict({"pass": 3}, **dict(ok, min_tests=4)).exit_code == 2
    assert verdict({"pass": 3}, **dict(ok, gate_failures=[{"id": "x"}])).exit_code == 2
    assert summary_line({"pass": 2, "unsupported": 1}) == "2 passed, 0 failed, 1 unsupported"


def test_verdict_of_a_run_that_judged_too_little():
    """Issue 35: a whole run that judged 4 of 55 MUST clauses does not exit 0
    silently: 3, unless --min-judged lowers the floor; a failure (1) and an
    untrustworthy run (2) still win; a selection is never held to it."""
    ok = dict(collection_errors=0, fatal=[], stale=[], gate_failures=[], min_tests=0, nothing_selected=False)
    thin, half = Judged(4, 55, whole=True), Judged(28, 55, whole=True)
    v = verdict({"pass": 5}, **ok, judged=thin)
    assert v.exit_code == EXIT_THIN == 3 and v.reasons == ["too little judged: judged 4 of 55 MUST clauses that "
                                                          "apply (7%, --min-judged 0.5)"]
    assert verdict({"pass": 5}, **ok, judged=half).exit_code == 0
    assert verdict({"pass": 5}, **ok, judged=Judged(27, 55, whole=True)).exit_code == 3
    assert verdict({"pass": 5}, **ok, judged=thin, min_judged=0.05).exit_code == 0
    assert verdict({"pass": 5}, **ok, judged=thin, min_judged=0).exit_code == 0
    assert verdict({"pass": 5}, **ok, judged=Judged(4, 55, whole=False)).exit_code == 0  # --clause, -k, --only
    v = verdict({"pass": 4, "fail": 1}, **ok, judged=thin)
    assert v.exit_code == 1 and v.reasons[-1].startswith("too little judged")
    assert verdict({"pass": 4, "harness-error": 1}, **ok, judged=thin).exit_code == 2
    assert verdict({"pass": 5}, **ok).exit_code == 0  # no count given: nothing to hold it to


def test_judged_musts_counts_the_clauses_that_apply():
    from stdio_bus_conformance.reports.coverage import ClauseCoverage, Coverage
    from stdio_bus_conformance.reports.summary import judged_musts

    def c(cid, level, outcome, status="tested"):
        return ClauseCoverage(cid, level, "J", "black-box", "", "", status, ["t"], outcome)
    cov = Coverage([c("a", "MUST", "pass"), c("b", "MUST NOT", "fail"), c("c", "MUST", "skipped"),
                    c("d", "MUST", "blocked"), c("e", "MUST", "unsupported"), c("f", "SHOULD", "pass"),
                    c("g", "MUST", "not judged", status="untested")], [], [], True)
    j = judged_musts(cov, whole=True)
    assert (j.judged, j.total, j.whole) == (2, 4, True)


# -- client ------------------------------------------------------------------------------
@pytest.fixture
def pair():
    a, b = socket.socketpair()
    c = SocketClient("client#1", Recorder(), a, timeout=1.0)
    yield c, b
    c.close()
    b.close()


def test_client_splits_lines_and_keeps_bytes(pair):
    c, peer = pair
    peer.sendall(b'{"a":1}\n{"b"')
    assert c.recv_line() == b'{"a":1}\n'
    peer.sendall(b':2}\n')
    assert c.recv_json() == {"b": 2}
    peer.sendall(b"tail without newline")
    peer.close()
    assert c.recv_line() == b"tail without newline"
    with pytest.raises(ConnectionClosed):
        c.recv_line()
    assert c.expect_closed() == []


def test_client_blames_the_daemon_for_garbage_and_silence(pair):
    c, peer = pair
    peer.sendall(b"not json\n[1]\n")
    with pytest.raises(DaemonError, match="not JSON"):
        c.recv_json()
    with pytest.raises(DaemonError, match="not an object"):
        c.recv_json()
    with pytest.raises(DaemonTimeout):
        c.recv_line(timeout=0.05)
    with pytest.raises(DaemonTimeout):
        c.expect_closed(timeout=0.05)
    peer.sendall(b"{}\n")
    with pytest.raises(AssertionError, match="expected silence"):
        c.expect_silence(0.5)
    with pytest.raises(HarnessError):
        c.expect_silence(2)


def test_recv_response_keeps_other_lines_in_order(pair):
    c, peer = pair
    peer.sendall(b'{"method":"n1"}\n{"id":"x","result":1}\n{"method":"n2"}\n{"id":"y","result":2}\n')
    assert c.recv_response("y")["result"] == 2
    assert [c.recv_json() for _ in range(3)] == [{"method": "n1"}, {"id": "x", "result": 1}, {"method": "n2"}]
    peer.sendall(b'{"id":"1","result":"string id"}\n{"id":1,"result":"number id"}\n')
    assert c.recv_response(1)["result"] == "number id"  # "1" and 1 are different ids


def test_send_to_a_closed_peer_is_the_daemons_doing(pair):
    c, peer = pair
    peer.close()
    c.expect_closed()
    with pytest.raises(ConnectionClosed):
        for _ in range(100):
            c.send(b"x" * 65536 + b"\n")
    with pytest.raises(HarnessError):
        c.send("text, not bytes")


# -- /proc -------------------------------------------------------------------------------------
def test_procinfo_sees_children_zombies_fds_threads_and_cpu():
    code = ("import os, sys\n"
            "pid = os.fork()\n"
            "if pid == 0: os._exit(0)\n"
            "print(pid, flush=True)\n"
            "sys.stdin.read()\n")
    p = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        child = int(p.stdout.readline())
        assert procinfo.children(p.pid) == [child]
        deadline = time.monotonic() + 5
        while procinfo.zombies(p.pid) != [child]:  # the fork exits at once, nobody reaps it
            assert time.monotonic() < deadline, procinfo.state(child)
            time.sleep(0.005)
        assert not procinfo.exists(child) and procinfo.live_children(p.pid) == []
        assert procinfo.fd_count(p.pid) >= 3 and procinfo.thread_count(p.pid) == 1
        assert procinfo.cpu_time(p.pid) >= 0 and procinfo.ppid(p.pid) == os.getpid()
        assert procinfo.cmdline(p.pid)[:2] == [sys.executable, "-c"]
    finally:
        p.stdin.close()
        p.wait(10)
    assert procinfo.state(p.pid) is None


# -- the subject's pace and its log in its own words (issue 37) ------------------------------
def test_pace_bounds_a_wait_by_the_slowest_time_seen_and_never_below_the_floor():
    from stdio_bus_conformance.common.pace import FACTOR, Pace
    p = Pace()
    assert p.bound("answer", 5.0) == 5.0  # nothing measured: the floor
    p.saw("answer", 0.01)
    p.saw("answer", 1.2)
    p.saw("answer", 0.3)
    assert p.bound("answer", 5.0) == FACTOR * 1.2
    assert Pace.from_json(p.to_json()).bound("answer", 1.0) == FACTOR * 1.2
    assert p.slow_note("answer", 1.3, 5.0) is None            # as in the preflight
    assert p.slow_note("answer", 7.0, 20.0) is None           # far from its wait
    assert "times its slowest" in p.slow_note("answer", 7.0, 12.0)


def test_a_line_the_event_caused_is_told_from_what_a_sync_alone_writes():
    from stdio_bus_conformance.daemon.logwords import caused
    control = ["2026-11-28T10:00:00Z DEBUG [c 3] forwarded request id=\"sync-1\" to worker 2",
               "2026-11-28T10:00:00Z DEBUG [c 3] answer id=\"sync-1\" from worker 2"]
    later = ["2026-11-28T10:00:01Z DEBUG [c 3] forwarded request id=7 to worker 2",
             "2026-11-28T10:00:01Z WARN Worker message has no id or sessionId, cannot route",
             "mock_worker[77]: a worker's own line, relayed"]
    assert caused(later, control) == [later[1]]
    assert caused(later[:1], control) == []


def test_a_worker_is_known_by_the_identifiers_the_daemon_gives_it():
    from stdio_bus_conformance.daemon.logwords import aliases
    from stdio_bus_conformance.daemon.streams import mentions, worker_context
    lines = ["INFO [conn=1] pipe of pid 4242", "INFO [conn=2] pipe of pid 5151",
             "INFO status=0 bytes=12 pid 4242"]
    about = worker_context(4242, "wide")
    learned = aliases(lines, lambda line: mentions(line, about))
    assert mentions("ERROR [conn=1] line too long", learned)
    assert not mentions("ERROR [conn=2] line too long", learned)      # another worker's
    assert not mentions("ERROR status=0 line too long", learned)      # an amount, not an identifier
    assert mentions("ERROR conn #1: line too long", learned)          # the same token, spelt otherwise
