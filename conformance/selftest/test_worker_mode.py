"""Worker mode (run.py --worker): the same outcomes, exit codes, reports,
reproducers, baselines and coverage gate as the daemon mode, over the
clauses of WORKER_SPEC.md. The worker under test is fake_mcp_worker.py, a
small MCP server in Python: the whole worker suite passes against it, and
each of its --break switches makes the tests of the clause it breaks fail.
Profiles mean what they say: judged as an MCP server alone, a strict one
(no sessionId, initialize first, no batches, notifications and requests of
its own) passes; the preflight names a root cause once and blocks the tests
that stand on it."""

import json
import os
import shlex
import shutil
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from conftest import CONFORMANCE, HERE, PYTHON, RUN_PY, Run
from validators import junit_problems, results_problems

WORKER_SPEC = CONFORMANCE.parent / "WORKER_SPEC.md"
FAKE = HERE / "fake_mcp_worker.py"
DESCRIPTION = """
name = "fake_mcp_worker"
profiles = {profiles}
verbose_args = ["--verbose"]
answer_timeout = 2.0
drain_timeout = 2.0
[request]
method = "ping"
[jsonrpc]
failing_request = {{ method = "tools/call", params = {{ name = "add", arguments = {{ a = 1e308, b = 1e308 }} }} }}
invalid_params_request = {{ method = "tools/call", params = {{ name = "echo", arguments = {{ text = 5 }} }} }}
[mcp]
tool_call = {{ name = "echo", arguments = {{ text = "{{text}}" }} }}
long_call = {{ name = "slow", arguments = {{ ms = "{{ms}}", steps = "{{steps}}" }} }}
ask_call = {{ name = "sample", arguments = {{ prompt = "{{text}}" }} }}
"""

# --break of fake_mcp_worker.py -> worker tests that must fail (or warn) with it
BREAKS = {
    "log-stdout": ["test_every_line_is_one_json_object", "test_nothing_but_json_on_stdout_even_verbose",
                   "test_nothing_but_json_rpc_messages"],
    "verbose-stdout": ["test_nothing_but_json_on_stdout_even_verbose"],
    "banner": ["test_nothing_written_before_the_first_message"],
    "hello-json": ["test_nothing_but_json_rpc_messages"],
    "array-out": ["test_no_array_unless_answering_a_batch", "test_every_line_is_one_json_object"],
    "latin1": ["test_every_line_is_utf8", "test_tool_text_that_is_not_ascii_comes_back_in_utf8"],
    "echo-bad-utf8": ["test_output_stays_utf8_after_input_that_is_not",
                      "test_lines_that_are_not_strict_json_or_utf8_get_a_parse_error"],
    "no-final-newline": ["test_every_message_ends_with_a_newline_the_last_one_too"],
    "unescape-newlines": ["test_escaped_newlines_stay_escaped", "test_tool_text_with_newlines_comes_back_on_one_line"],
    "no-reassembly": ["test_lines_are_read_whole_however_they_are_written"],
    "drop-every-5th": ["test_every_complete_line_is_handled"],
    "double-answer": ["test_exactly_one_response_per_request", "test_every_request_gets_exactly_one_response"],
    "stray-response": ["test_response_carries_the_request_id"],
    "no-result": ["test_response_has_a_result_or_an_error"],
    "no-session": ["test_response_carries_the_request_session", "test_session_ids_come_back_as_the_exact_token"],
    "no-session-on-errors": ["test_error_responses_carry_the_session_token"],
    "notify-no-session": ["test_notifications_name_a_session_they_were_told_about"],
    "ids-as-values": ["test_ids_come_back_as_the_exact_token"],
    "session-as-value": ["test_session_ids_come_back_as_the_exact_token", "test_progress_copies_the_session_token",
                         "test_requests_to_the_client_carry_the_session"],
    "copy-any-session": ["test_a_session_id_that_is_not_a_string_is_not_copied"],
    "ignore-term": ["test_sigterm_when_idle_ends_the_worker_by_itself"],  # the others: blocked
    "die-on-term": ["test_sigterm_when_idle_ends_the_worker_by_itself"],
    "term-exit-1": ["test_signal_when_idle_exits_0",
                    "test_sigterm_with_requests_in_flight_writes_whole_answers_and_exits_0"],
    "term-drops": ["test_sigterm_lets_a_long_call_finish_then_exits_0"],
    "eof-stay": ["test_end_of_input_when_idle_exits_0_at_once",
                 "test_end_of_input_after_work_exits_0_once_it_is_written"],
    "eof-drops": ["test_requests_read_with_the_end_of_input_are_answered",
                  "test_end_of_input_lets_a_long_call_finish_with_its_progress"],
    "close-stdin": ["test_stdin_and_stdout_stay_open_while_serving"],
    "die-on-long-line": ["test_no_input_stops_the_worker"],
    "no-jsonrpc-member": ["test_every_message_says_jsonrpc_2_0"],
    "result-and-error": ["test_no_response_has_both_result_and_error"],
    "error-code-string": ["test_errors_have_an_integer_code_and_a_string_message"],
    "reserved-code": ["test_no_reserved_error_code", "test_every_error_code_seen_is_allowed"],
    "parse-error-id": ["test_a_line_that_is_not_json_gets_one_parse_error_with_id_null"],
    "poisoned": ["test_the_stream_goes_on_after_parse_errors"],
    "invalid-as-params": ["test_invalid_requests_get_invalid_request_and_the_stream_goes_on"],
    "invalid-id-null": ["test_invalid_request_errors_carry_the_id_and_session_they_can"],
    "unknown-method-result": ["test_unknown_method_gets_method_not_found"],
    # an MCP server may accept what a client MUST NOT send: only the `jsonrpc` fact is judged on a result
    "params-ok": ["test_params_the_method_cannot_take_get_invalid_params"],
    "internal-as-params": ["test_a_request_that_fails_inside_gets_internal_error_and_the_stream_goes_on"],
    "answer-notifications": ["test_notifications_get_no_answer"],
    "answer-responses": ["test_responses_get_no_answer"],
    "params-32602": ["test_params_that_are_not_structured_are_an_invalid_request"],
    "lenient-json": ["test_lines_that_are_not_strict_json_or_utf8_get_a_parse_error"],
    "blank-lines-error": ["test_blank_lines_are_ignored"],
    "batch-per-line": ["test_a_batch_gets_one_array_with_one_response_per_request"],
    "empty-batch-array": ["test_a_batch_without_requests_gets_nothing"],
    "empty-array-as-array": ["test_an_empty_array_gets_one_invalid_request_error"],
    "batch-one-error": ["test_each_invalid_element_of_a_batch_gets_its_own_error"],
    "slow-answers": ["test_ping_and_tools_list_are_answered_at_once"],
    "no-server-info": ["test_initialize_answers_version_capabilities_and_server_info"],
    "fixed-version": ["test_initialize_negotiates_the_protocol_version"],
    "no-tools-cap": ["test_initialize_declares_tools"],
    "answer-initialized": ["test_initialized_notification_gets_nothing"],
    "schema-no-type": ["test_tools_list_gives_named_tools_with_object_schemas"],
    "content-string": ["test_tool_call_result_holds_content"],
    "unknown-tool-result": ["test_unknown_tool_is_invalid_params"],
    "one-initialize": ["test_every_session_initializes_and_nothing_waits_for_it"],
    "serial": ["test_a_long_call_does_not_delay_a_ping", "test_concurrent_calls_are_answered_as_they_end"],
    "ask-blocks": ["test_a_call_waiting_for_the_client_does_not_delay_a_ping"],
    "interleave": ["test_many_requests_in_flight_each_answer_one_whole_line",
                   "test_forty_long_calls_with_progress_stay_whole_lines"],
    "progress-shrinks": ["test_progress_carries_the_token_and_grows"],
    "progress-always": ["test_no_progress_without_a_token"],
    "late-progress": ["test_no_progress_after_the_answer"],
    "progress-no-session": ["test_progress_names_the_session_of_its_request"],
    "ignore-cancel": ["test_a_cancelled_call_is_never_answered"],
    "cancel-by-id-only": ["test_cancellation_names_the_request_of_its_own_session"],
    "answer-cancel": ["test_cancellation_gets_nothing_in_reply"],
    "reuse-ask-id": ["test_requests_to_the_client_have_a_method_and_fresh_ids"],
    "ask-no-session": ["test_requests_to_the_client_carry_the_session"],
    "ignore-client-error": ["test_the_client_answer_resumes_the_call"],
    "ask-hangs-at-end": ["test_a_call_waiting_for_the_client_is_answered_internal_error_at_the_end"],
    "die-on-bad-json": ["test_a_line_that_is_not_json_gets_one_parse_error_with_id_null"],
    "no-string-ids": ["test_response_carries_the_request_id"],
    "digit-ids-as-numbers": ["test_response_carries_the_request_id"],
    # print-on-term: test_a_launcher_that_prints_on_sigterm_is_caught (one parameter of the test only)
}


@pytest.fixture(scope="session")
def fake_worker(tmp_path_factory):
    """fake_mcp_worker.py as an executable (a checkout may lose mode bits)."""
    if os.access(FAKE, os.X_OK):
        return FAKE
    d = tmp_path_factory.mktemp("fakeworker")
    for name in ("fake_mcp_worker.py", "fake_json.py"):
        shutil.copyfile(HERE / name, d / name)
        (d / name).chmod(0o755)
    return d / "fake_mcp_worker.py"


@pytest.fixture
def wrun(tmp_path, fake_worker):
    """wrun(*args, breaks=(), profiles=("plain", "jsonrpc", "mcp"), worker=None, description=True, jobs=1)
    runs run.py in worker mode and returns a Run."""
    count = [0]

    def run(*args, breaks=(), profiles=("plain", "jsonrpc", "mcp"), worker=None, description=True, jobs=1,
            cwd=None):
        count[0] += 1
        res = tmp_path / f"wres{count[0]}"
        cmd = [PYTHON, str(RUN_PY), "--report-dir", str(res), "-j", str(jobs), "--seed", "11"]
        if description:
            desc = tmp_path / f"worker{count[0]}.toml"
            desc.write_text(DESCRIPTION.format(profiles=json.dumps(list(profiles))))
            cmd += ["--worker-description", str(desc)]
        if worker is None:
            worker = shlex.join([str(fake_worker)] + [a for b in breaks for a in ("--break", b)])
        if worker:
            cmd += ["--worker", worker]
        cmd += [str(a) for a in args]
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=240, cwd=cwd or tmp_path)
        results = json.loads((res / "results.json").read_text()) if (res / "results.json").exists() else None
        return Run(p.returncode, p.stdout + p.stderr, results, res)

    return run


def names(run, outcome):
    return sorted({n.split("::")[1].split("[")[0] for n, o in run.outcomes.items() if o == outcome})


# -- the suite against a good worker ----------------------------------------------------------------
@pytest.fixture(scope="module")
def good(tmp_path_factory, fake_worker):
    """One full run against the unbroken fake, all profiles, in parallel."""
    tmp = tmp_path_factory.mktemp("good")
    desc = tmp / "worker.toml"
    desc.write_text(DESCRIPTION.format(profiles='["plain", "jsonrpc", "mcp"]'))
    res = tmp / "res"
    cmd = [PYTHON, str(RUN_PY), "--worker-description", str(desc), "--worker", str(fake_worker),
           "--report-dir", str(res), "-j", "2", "--seed", "3"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=240, cwd=tmp)
    return Run(p.returncode, p.stdout + p.stderr, json.loads((res / "results.json").read_text()), res)


def test_a_conforming_worker_passes_every_test(good):
    assert good.rc == 0, good.output
    s = good.results["summary"]
    # the acp profile's tests are unsupported: the worker does not claim it
    acp = {n: o for n, o in good.outcomes.items() if n.startswith("worker_tests/test_acp.py")}
    assert set(acp.values()) == {"unsupported"} and s["unsupported"] == len(acp), s
    assert s["pass"] == s["total"] - len(acp) > 60, s
    assert good.results["coverage"]["gate"]["ok"]
    assert good.results["spec"] == str(WORKER_SPEC)
    assert {n.split("::")[0] for n in good.outcomes} == {
        "worker_tests/test_answers.py", "worker_tests/test_jsonrpc.py", "worker_tests/test_lifecycle.py",
        "worker_tests/test_mcp.py", "worker_tests/test_output.py", "worker_tests/test_acp.py"}
    assert good.last_line == f"{s['pass']} passed, 0 failed, {len(acp)} unsupported"


def test_reports_follow_the_schema_and_junit_rules(good):
    assert results_problems(good.results) == []
    assert junit_problems(good.report_dir / "junit.xml") == []
    # a worker run names the kit and the bus spec revision WORKER_SPEC.md is written against
    assert good.results["kit"] == "stdio-bus-conformance" and good.results["spec_version"] == "0.1.0"
    assert good.results["daemon"].endswith("fake_mcp_worker.py")
    assert "worker profiles plain, jsonrpc, mcp; MCP 2025-11-25" in good.results["profile"]
    assert all(t["mode"] is None for t in good.results["tests"])
    md = (good.report_dir / "report.md").read_text()
    assert md.startswith("# stdio Bus worker conformance report")
    assert "- judged on the profiles: plain, jsonrpc, mcp" in md
    assert "- MCP revision: 2025-11-25" in md and "root cause" not in md
    for section in ("W", "T", "J", "F", "R"):
        assert f"## Section {section}" in md
    assert "| SB-W-5 | SHOULD | excluded | excluded: profiles: plain, mcp." in md
    assert "- MUST pass rate: 14/14 (100%)" in md  # appendix T: the MUST rows, all run and passed


# -- each break is caught ---------------------------------------------------------------------------
@pytest.mark.parametrize("broken", sorted(BREAKS))
def test_each_break_fails_the_tests_of_its_clause(wrun, broken):
    tests = BREAKS[broken]
    run = wrun("-k", " or ".join(tests), "--no-coverage-gate", breaks=[broken])
    assert run.results is not None, run.output
    for name in tests:
        outcomes = run.outcome_of(f"::{name}")
        assert outcomes and outcomes <= {"fail", "warn"}, \
            f"{name} with --break {broken}: {outcomes}\n{run.output[-3000:]}"
    assert run.rc == (1 if "fail" in run.outcomes.values() else 0), run.output


# -- profiles, facts and the worker's own problems ----------------------------------------------------
def test_profiles_the_worker_does_not_claim_are_unsupported(wrun):
    run = wrun("--no-coverage-gate", profiles=("plain",))
    assert run.rc == 0, run.output
    unsupported = [t for t in run.results["tests"] if t["outcome"] == "unsupported"]
    assert unsupported and all("claims plain" in t["message"] for t in unsupported)
    files = {t["nodeid"].split("::")[0] for t in unsupported}
    assert "worker_tests/test_jsonrpc.py" in files and "worker_tests/test_mcp.py" in files
    answers = {t["nodeid"].split("::")[1]: t["outcome"] for t in run.results["tests"] if "test_answers.py" in t["nodeid"]}
    assert answers.pop("test_every_request_gets_exactly_one_response") == "unsupported"  # SB-J-16: jsonrpc, mcp
    assert set(answers.values()) == {"pass"}


@pytest.mark.parametrize("profiles", [("mcp",), ("jsonrpc",)])
def test_a_strict_server_judged_on_its_own_profile_passes(wrun, fake_worker, profiles):
    """No sessionId, no raw-token ids, no SIGTERM, initialize first (mcp), no
    batches (mcp 2025-11-25), notifications and requests of its own never
    taken for answers: a strict MCP server or JSON-RPC peer meets what its
    profile requires and is judged on nothing else."""
    strict = ["--strict-members", "--chatty"] + (["--strict-lifecycle", "--mcp-messages"] if "mcp" in profiles
                                                  else [])
    run = wrun(profiles=profiles, worker=shlex.join([str(fake_worker)] + strict), jobs=2)
    assert run.rc == 0, run.output
    s = run.results["summary"]
    assert s["fail"] == s["warn"] == s["harness-error"] == 0 and s["pass"] > 25, s
    assert not [t for t in run.results["tests"] if t["outcome"] == "skipped"], run.output
    bus = {t["nodeid"].split("::")[1] for t in run.results["tests"] if t["outcome"] == "unsupported"}
    assert {"test_response_carries_the_request_session", "test_ids_come_back_as_the_exact_token",
            "test_sigterm_when_idle_ends_the_worker_by_itself"} <= bus
    if "mcp" in profiles:
        assert "test_a_batch_gets_one_array_with_one_response_per_request" in bus
        assert "tool call: from the description" in (run.report_dir / "report.md").read_text()


def test_the_mcp_revision_decides_on_batches(wrun, fake_worker):
    run = wrun("--mcp-version", "2025-03-26", "-k", "batch", "--no-coverage-gate", profiles=("mcp",),
               worker=shlex.join([str(fake_worker), "--mcp-messages"]))
    assert run.rc == 1, run.output
    assert run.outcome_of("test_a_batch_gets_one_array_with_one_response_per_request") == {"fail"}
    assert "; MCP 2025-03-26" in run.results["profile"]
    run = wrun("-k", "batch or empty_array or invalid_requests_get", "--no-coverage-gate", profiles=("mcp",),
               worker=shlex.join([str(fake_worker), "--mcp-messages"]))
    assert run.rc == 0, run.output
    # without batches `[]` is one more invalid request: SB-J-6 judges it, SB-J-14 does not apply
    assert run.outcome_of("test_invalid_requests_get_invalid_request_and_the_stream_goes_on") == {"pass"}
    assert run.outcome_of("test_an_empty_array_gets_one_invalid_request_error") == {"unsupported"}
    assert run.outcome_of("test_a_batch_gets_one_array_with_one_response_per_request") == {"unsupported"}


# -- preflight: a root cause is named once, the tests that stand on it are blocked -----------------
def blocked(run):
    return sorted({t["nodeid"].split("::")[1].split("[")[0] for t in run.results["tests"]
                   if t["outcome"] == "blocked" or t["message"].startswith("blocked:")})


@pytest.mark.parametrize("args, profiles, failing", [
    (["--break", "silent"], ("plain",), "test_every_complete_line_is_handled"),
    (["--break", "silent"], ("mcp",), "test_every_request_gets_exactly_one_response"),
    (["--strict-members", "--mcp-messages"], ("plain", "mcp"),
     "test_a_request_with_members_it_does_not_know_is_answered"),
    (["--break", "die-on-term"], ("plain",), "test_sigterm_when_idle_ends_the_worker_by_itself"),
])
def test_a_root_cause_is_named_once(wrun, fake_worker, args, profiles, failing):
    run = wrun("--no-coverage-gate", profiles=profiles, worker=shlex.join([str(fake_worker)] + args), jobs=2)
    assert run.rc == 1, run.output
    assert names(run, "fail") == [failing] and names(run, "warn") == [], run.output
    assert blocked(run), run.output
    md = (run.report_dir / "report.md").read_text()
    assert "- root cause (preflight): " in md and f"`{failing}`" in md
    assert "root cause: " in run.output


def test_a_server_without_tool_description_gets_a_discovered_read_only_tool(wrun):
    # no description: no tool named `echo` is assumed; tools/list is asked, a read-only tool chosen
    run = wrun("-k", "tool_call_result or tool_text", "--no-coverage-gate", "--worker-profile", "mcp",
               description=False)
    assert run.rc == 0, run.output
    assert set(run.outcomes.values()) == {"pass"}, run.output
    assert "- tool call: discovered in tools/list: 'echo' (read-only, takes the text)" in \
        (run.report_dir / "report.md").read_text()


def test_command_line_only_and_a_missing_fact_is_skipped(wrun, fake_worker):
    run = wrun("--worker-profile", "jsonrpc", "--worker-env", "SB_X=1", "-k", "internal_error or not_json",
               "--no-coverage-gate", description=False)
    assert run.rc == 0, run.output
    assert run.outcome_of("test_a_request_that_fails_inside") == {"skipped"}
    assert "gives no failing_request" in run.results["tests"][0]["message"] + run.results["tests"][1]["message"]
    assert run.outcome_of("test_a_line_that_is_not_json") == {"pass"}
    assert run.results["profile"] == "(command line); worker profiles jsonrpc"


def test_worker_that_cannot_be_found_or_claims_nothing_exits_2(wrun, tmp_path):
    run = wrun(worker=str(tmp_path / "no-such-worker"))
    assert run.rc == 2, run.output
    assert any("worker not found" in e for e in run.results["fatal_errors"])
    run = wrun(description=False)
    assert run.rc == 2, run.output
    assert any("claims no profile" in e for e in run.results["fatal_errors"])


def test_daemon_options_are_refused_in_worker_mode(wrun):
    run = wrun("--daemon", "/bin/true")
    assert run.rc == 2 and "daemon options, not for a worker run" in run.output


def test_a_worker_that_dies_fails_and_is_not_a_harness_error(wrun):
    run = wrun("-k", "test_every_complete_line_is_handled or test_response_carries_the_request_id",
               "--no-coverage-gate", worker="/bin/true")
    assert run.rc == 1, run.output
    # named once, by the test of SB-W-1; the other is blocked by it (preflight)
    assert run.outcome_of("test_every_complete_line_is_handled") == {"fail"}
    assert blocked(run) == ["test_response_carries_the_request_id"]
    assert "the worker answers no request" in run.output


# -- reproducers and baselines --------------------------------------------------------------------------
def test_failure_leaves_a_reproducer_that_reruns_it(wrun, tmp_path):
    run = wrun("-k", "test_ids_come_back_as_the_exact_token", "--no-coverage-gate", breaks=["ids-as-values"])
    assert run.rc == 1, run.output
    t = run.results["tests"][0]
    art = Path(t["artifact_dir"])
    assert {"transcript.txt", "worker.stderr", "worker.stdout", "worker.txt", "seed", "command.txt"} <= \
        {f.name for f in art.iterdir()}
    transcript = (art / "transcript.txt").read_text()
    assert "suite -> worker#1" in transcript and "worker#1 -> suite" in transcript and "1.0" in transcript
    assert "worker#1 stderr" in transcript or (art / "worker.stderr").read_bytes() == b""
    cmd = (art / "command.txt").read_text().strip()
    assert "--worker" in cmd and "--break ids-as-values" in cmd and "--seed 11" in cmd
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    again = subprocess.run(shlex.split(cmd), capture_output=True, text=True, timeout=120, cwd=elsewhere)
    assert again.returncode == 1, again.stdout + again.stderr
    assert again.stdout.strip().splitlines()[-1] == "0 passed, 1 failed"


def test_baseline_turns_a_known_failure_into_xfail_and_flags_stale_entries(wrun, tmp_path):
    sel = ("-k", "test_ids_come_back_as_the_exact_token or test_response_carries_the_request_session",
           "--no-coverage-gate")
    base = tmp_path / "baseline.json"
    first = wrun(*sel, "--write-baseline", str(base), breaks=["ids-as-values"])
    assert first.rc == 1, first.output
    data = json.loads(base.read_text())
    assert [e["test"] for e in data["expected_failures"]] == [
        "worker_tests/test_answers.py::test_ids_come_back_as_the_exact_token"]
    assert data["daemon"].endswith("--break ids-as-values")
    for e in data["expected_failures"]:
        e["reason"] = "ids go through a double"
    base.write_text(json.dumps(data))
    known = wrun(*sel, "--baseline", str(base), breaks=["ids-as-values"])
    assert known.rc == 0, known.output
    assert known.outcome_of("test_ids_come_back") == {"xfail"}
    fixed = wrun(*sel, "--baseline", str(base))
    assert fixed.rc == 1, fixed.output
    assert fixed.results["baseline"]["stale"] == [
        {"test": "worker_tests/test_answers.py::test_ids_come_back_as_the_exact_token", "why": "passed"}]


# -- collection and coverage --------------------------------------------------------------------------------
def suite_with(tmp_path, code, name="wsuite"):
    d = tmp_path / name
    d.mkdir()
    (d / "test_generated.py").write_text("import pytest\n\n" + code)
    return d


@pytest.mark.parametrize("code, message", [
    ('@pytest.mark.clause("SB-T-6")', "cites only MAY clauses: a permission cannot be failed"),
    ('@pytest.mark.worker_profile("bus")\n@pytest.mark.clause("SB-W-1")', "one of plain, jsonrpc, mcp"),
    ('@pytest.mark.clause("SB-6.1-1")', "cites unknown clause SB-6.1-1"),
    ('@pytest.mark.requires("a_fact_nobody_has")\n@pytest.mark.clause("SB-W-1")', "worker facts are"),
])
def test_bad_worker_test_markers_are_collection_errors(wrun, tmp_path, code, message):
    suite = suite_with(tmp_path, f"{code}\ndef test_bad(worker):\n    pass\n")
    run = wrun("--tests-dir", str(suite), "--no-coverage-gate")
    assert run.rc == 2, run.output
    assert message in run.results["collection_errors"][0]["message"]


def test_coverage_gate_over_the_worker_spec(wrun, tmp_path):
    run = wrun("--coverage")
    assert run.rc == 0, run.output
    assert "coverage gate: ok" in run.output and "section W" in run.output
    text = WORKER_SPEC.read_text()
    row = "| SB-W-11 |"
    i = text.index("\n", text.index(row)) + 1
    spec = tmp_path / "WORKER_SPEC.md"
    spec.write_text(text[:i] + "| SB-W-13 | MUST | A worker does one more thing. | black-box | profiles: plain. |\n"
                    + text[i:] + "| SB-W-13 | a seed sentence | yes | one more thing |\n")  # its seed audit row
    run = wrun("--coverage", "--spec", str(spec))
    assert run.rc == 2, run.output
    assert "SB-W-13 (MUST): no test cites it" in run.output


@pytest.mark.parametrize("mode_args, folder", [
    (["--worker", "/bin/true", "--worker-profile", "plain"], "worker_tests/"),
    (["--daemon", "/bin/true"], "tests/"),
])
def test_each_mode_collects_only_its_own_tests(tmp_path, mode_args, folder):
    """`pytest conformance` in daemon mode leaves worker_tests/ alone, and
    worker mode tests/ (unless the folder is named)."""
    p = subprocess.run([PYTHON, "-m", "pytest", "-c", str(CONFORMANCE / "pytest.ini"), "--rootdir",
                        str(CONFORMANCE), "-p", "stdio_bus_conformance.plugin", "--collect-only", "-q",
                        "-p", "no:xdist", *mode_args, str(CONFORMANCE)],
                       capture_output=True, text=True, timeout=120, cwd=tmp_path,
                       env=dict(os.environ, PYTHONPATH=str(CONFORMANCE)))
    collected = [line for line in p.stdout.splitlines() if "::" in line]
    assert collected and all(line.startswith(folder) for line in collected), p.stdout[-2000:]


def test_junit_names_worker_suites_by_file(good):
    root = ET.parse(good.report_dir / "junit.xml").getroot()
    suites = {s.get("name") for s in root.iter("testsuite")}
    assert "worker_tests/test_jsonrpc.py" in suites
    props = {p.get("name"): p.get("value") for p in root.iter("property")}
    assert props["clauses:test_ids_come_back_as_the_exact_token"] == "SB-R-1"


# -- one root cause per defect (WORKER_SPEC.md, "Preflight and root causes") ---------------------------
def test_a_worker_that_dies_on_a_line_that_is_not_json_is_named_once(wrun, fake_worker):
    run = wrun("--no-coverage-gate", "-k", "test_jsonrpc or test_output", profiles=("mcp",), jobs=2,
               worker=shlex.join([str(fake_worker), "--mcp-messages", "--break", "die-on-bad-json"]))
    assert names(run, "fail") == ["test_a_line_that_is_not_json_gets_one_parse_error_with_id_null"], run.output
    assert "test_the_stream_goes_on_after_parse_errors" in names(run, "blocked"), run.output
    j4 = next(t for t in run.results["tests"] if "test_a_line_that_is_not_json" in t["nodeid"])
    assert "7 of 7 cases fail" in j4["message"], j4["message"]  # each case on a worker of its own
    # the output tests judge all the rest: errors were provoked, codes and shapes judged
    assert run.outcome_of("test_errors_have_an_integer_code_and_a_string_message") == {"pass"}, run.output


def test_a_worker_that_takes_no_string_id_is_judged_with_integer_ids(wrun, fake_worker):
    run = wrun("--no-coverage-gate", "-k", "test_answers or test_jsonrpc or test_mcp", profiles=("mcp",), jobs=2,
               worker=shlex.join([str(fake_worker), "--mcp-messages", "--break", "no-string-ids"]))
    assert names(run, "fail") == ["test_response_carries_the_request_id"], run.output
    assert not names(run, "blocked"), run.output
    assert run.outcome_of("test_a_cancelled_call_is_never_answered") == {"pass"}, run.output


def test_a_launcher_that_prints_on_sigterm_is_caught(wrun):
    run = wrun("--no-coverage-gate", "-k", "while_stopped", breaks=["print-on-term"], profiles=("mcp",))
    assert run.outcome_of("test_nothing_but_json_rpc_while_stopped[sigterm]") == {"fail"}, run.output
    assert run.outcome_of("test_nothing_but_json_rpc_while_stopped[eof]") == {"pass"}, run.output


def test_tests_blocked_by_a_root_cause_the_baseline_expects_fail_nothing(wrun, fake_worker, tmp_path):
    worker = shlex.join([str(fake_worker), "--mcp-messages", "--break", "die-on-bad-json"])
    sel = ("--no-coverage-gate", "-k", "parse_error or not_json")
    base = tmp_path / "baseline.json"
    first = wrun(*sel, "--write-baseline", str(base), profiles=("mcp",), worker=worker)
    assert first.rc == 1 and "test_the_stream_goes_on_after_parse_errors" in names(first, "blocked"), first.output
    data = json.loads(base.read_text())
    for e in data["expected_failures"]:
        e["reason"] = "exits on a line that is not JSON (the fake's break)"
    base.write_text(json.dumps(data))
    known = wrun(*sel, "--baseline", str(base), profiles=("mcp",), worker=worker)
    assert known.rc == 0, known.output  # its blocked test is not judged, and fails nothing
    assert "test_the_stream_goes_on_after_parse_errors" in names(known, "blocked"), known.output
