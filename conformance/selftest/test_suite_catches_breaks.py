"""The suite's own clause tests (conformance/tests) pass against a correct
daemon and fail against one that breaks the behaviour they check: each
--break of fake_daemon.py must make the named tests fail (not error)."""

import pytest

# The tests written with the harness; later test files need a real daemon.
FILES = ("tests/test_framing.py", "tests/test_routing.py")

BREAKS = {
    "reserialize": ["test_client_line_reaches_worker_byte_for_byte", "test_worker_line_reaches_client_byte_for_byte",
                    "test_big_payload_passes_through_both_ways"],
    "trim-whitespace": ["test_leading_and_trailing_whitespace_passes_through_both_ways"],
    "split-long-lines": ["test_every_line_to_a_client_ends_in_a_newline_long_or_short"],
    "keep-malformed": ["test_malformed_json_closes_the_client", "test_malformed_json_leaves_other_clients_alone"],
    "accept-non-object": ["test_json_that_is_not_an_object_closes_the_client"],
    "broadcast-responses": ["test_each_response_goes_to_the_client_that_asked"],
    "forward-unknown": ["test_response_with_unknown_id_is_discarded",
                        "test_second_response_with_the_same_id_is_discarded"],
    "no-affinity": ["test_session_sticks_to_its_worker"],
    "session-copied": ["test_session_sticks_to_its_worker"],
    "no-round-robin": ["test_requests_without_session_go_round_robin", "test_new_sessions_are_spread_round_robin"],
    "notify-broadcast": ["test_notifications_go_to_the_session_owner_only",
                         "test_notification_for_unknown_session_is_discarded"],
    "log-stdout": ["test_stdout_carries_only_forwarded_messages", "test_socket_mode_writes_nothing_to_stdout"],
    "validate-jsonrpc": ["test_no_json_rpc_validation"],
    "drop-unknown-cancel": ["test_cancellation_of_a_request_the_daemon_never_saw_is_forwarded"],
    "forward-partial": ["test_worker_gets_whole_lines_however_clients_write_them"],
    "forward-worker-partial": ["test_client_gets_whole_lines_however_workers_write_them"],
    "stderr-as-stdout": ["test_worker_stderr_never_reaches_a_client"],
    "ids-by-value": ["test_ids_match_as_exact_tokens"],
    "ids-not-per-worker": ["test_response_from_another_worker_does_not_match",
                           "test_clients_reusing_the_same_id_each_get_their_own_response"],
    "methodless-not-tracked": ["test_client_message_with_id_but_no_method_is_tracked"],
    "nested-fields": ["test_routing_fields_are_read_at_top_level_after_unescaping"],
    "notification-no-session": ["test_notification_with_new_session_creates_the_session"],
    "worker-request-dropped": ["test_worker_request_goes_to_the_session_owner"],
    "route-response-by-session": ["test_response_is_routed_by_id_even_when_it_names_another_session",
                                  "test_response_without_id_is_discarded_not_routed_by_session"],
    "unroutable-broadcast": ["test_unroutable_worker_messages_are_discarded"],
}


def test_suite_passes_against_a_correct_daemon(harness):
    run = harness(*FILES, spec=None, tests=None, jobs=2)
    assert run.rc == 0, run.output
    assert run.results["summary"]["pass"] == run.results["summary"]["total"] > 0
    assert {n.split("::")[0] for n in run.outcomes} == {"tests/test_framing.py", "tests/test_routing.py"}


@pytest.mark.parametrize("broken", sorted(BREAKS))
def test_suite_fails_against_a_broken_daemon(harness, broken):
    tests = BREAKS[broken]
    # held to our interpretations too (as our daemon is): several breaks are SB-I readings
    run = harness(*FILES, "-k", " or ".join(tests), breaks=[broken], spec=None, tests=None,
                  profile="gate_interpretations = true\n")
    assert run.rc == 1, run.output
    for name in tests:
        outcomes = run.outcome_of(f"::{name}[")
        assert "fail" in outcomes, f"{name} did not fail with --break {broken}: {outcomes}"
        assert "harness-error" not in outcomes
