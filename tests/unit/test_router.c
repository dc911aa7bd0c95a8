/* Unit tests for the routing decision (src/route/router.c; spec 4.3, 5.3, 6,
 * 8.2, and the interpretations SB-I-* stated in router.c). The router is
 * pure: each test feeds lines from clients and workers and checks the
 * decision and the tables it leaves behind. */
#include <criterion/criterion.h>

#include <stdio.h>
#include <string.h>

#include "bus_limits.h"
#include "router.h"
#include "status.h"

static sb_router r;

static void fini(void) {
    sb_router_fini(&r);
}

/* A router with `workers` workers, all running, and 8 client slots. */
/* A router with `workers` running workers and `clients` connected clients
 * (slots 0 ..). */
static void start_with(int workers, int clients) {
    cr_assert_eq(sb_router_init(&r, workers, 8), STDIO_BUS_OK);
    for (int w = 0; w < workers; w++)
        sb_router_set_running(&r, w, true);
    for (int c = 0; c < clients; c++)
        sb_router_add_client(&r, c);
}

static void start(int workers) {
    start_with(workers, 8);
}

static sb_route from_client(int client, const char *line) {
    return sb_router_from_client(&r, client, line, strlen(line));
}

static sb_route from_worker(int worker, const char *line) {
    return sb_router_from_worker(&r, worker, line, strlen(line));
}

static const char *action_name(sb_route_action a) {
    switch (a) {
    case SB_ROUTE_IGNORE:
        return "IGNORE";
    case SB_ROUTE_TO_WORKER:
        return "TO_WORKER";
    case SB_ROUTE_TO_CLIENT:
        return "TO_CLIENT";
    case SB_ROUTE_DROP:
        return "DROP";
    case SB_ROUTE_REJECT:
        return "REJECT";
    case SB_ROUTE_HOLD:
        return "HOLD";
    }
    return "?";
}

static void expect_to_worker(sb_route d, int worker) {
    cr_assert_eq(d.action, SB_ROUTE_TO_WORKER, "action %s (%s), expected TO_WORKER",
                 action_name(d.action), sb_router_why(d.why));
    cr_assert_eq(d.target, worker, "routed to worker %d, expected %d", d.target, worker);
    cr_assert_eq(d.why, SB_WHY_NONE);
}

static void expect_to_client(sb_route d, int client) {
    cr_assert_eq(d.action, SB_ROUTE_TO_CLIENT, "action %s (%s), expected TO_CLIENT",
                 action_name(d.action), sb_router_why(d.why));
    cr_assert_eq(d.target, client, "routed to client %d, expected %d", d.target, client);
    cr_assert_eq(d.why, SB_WHY_NONE);
}

static void expect_outcome(sb_route d, sb_route_action action, sb_route_why why) {
    cr_assert_eq(d.action, action, "action %s (%s), expected %s", action_name(d.action),
                 sb_router_why(d.why), action_name(action));
    cr_assert_eq(d.why, why, "why \"%s\", expected \"%s\"", sb_router_why(d.why),
                 sb_router_why(why));
}

static sb_session *session(const char *raw) {
    return sb_sessions_find(&r.sessions, raw, strlen(raw));
}

TestSuite(router, .fini = fini);

/* ---- 6.1.1 new session ------------------------------------------------ */

Test(router, new_sessions_are_assigned_round_robin) {
    start(3);
    const char *lines[] = {
        "{\"method\":\"n\",\"sessionId\":\"a\"}\n",
        "{\"method\":\"n\",\"sessionId\":\"b\"}\n",
        "{\"method\":\"n\",\"sessionId\":\"c\"}\n",
        "{\"method\":\"n\",\"sessionId\":\"d\"}\n",
    };
    int expected[] = {0, 1, 2, 0};
    for (int i = 0; i < 4; i++) {
        sb_route d = from_client(0, lines[i]);
        expect_to_worker(d, expected[i]);
        cr_assert(d.new_session, "line %d did not create its session", i);
    }
    cr_assert_eq(r.sessions.slots.count, 4);
}

Test(router, new_session_records_its_worker_and_owner) {
    start(2);
    sb_route d = from_client(5, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"session/new\","
                                "\"sessionId\":\"sess-1\"}");
    expect_to_worker(d, 0);
    sb_session *s = session("\"sess-1\"");
    cr_assert_not_null(s);
    cr_assert_eq(s->worker, 0);
    cr_assert_eq(s->client, 5);
}

Test(router, session_ids_are_raw_tokens) {
    /* "a" and its escaped spelling are two sessions (pass-through). */
    start(2);
    expect_to_worker(from_client(0, "{\"sessionId\":\"a\"}"), 0);
    sb_route d = from_client(0, "{\"sessionId\":\"\\u0061\"}");
    expect_to_worker(d, 1);
    cr_assert(d.new_session);
}

/* ---- 6.1.2 existing session ------------------------------------------- */

Test(router, existing_session_routes_to_its_worker) {
    start(3);
    expect_to_worker(from_client(1, "{\"method\":\"a\",\"sessionId\":\"s\"}"), 0);
    /* Other traffic moves the round-robin cursor on. */
    expect_to_worker(from_client(1, "{\"method\":\"x\"}"), 1);
    expect_to_worker(from_client(2, "{\"method\":\"x\"}"), 2);
    for (int i = 0; i < 5; i++) {
        sb_route d = from_client(1, "{\"id\":9,\"method\":\"b\",\"sessionId\":\"s\"}");
        expect_to_worker(d, 0);
        cr_assert_not(d.new_session);
        cr_assert_eq(from_worker(0, "{\"id\":9,\"result\":{},\"sessionId\":\"s\"}").target, 1);
    }
    cr_assert_eq(r.sessions.slots.count, 1);
}

Test(router, session_is_never_reassigned_even_when_its_worker_is_busy) {
    /* Worker 0 holds a pending request with the same id; the session stays
     * on worker 0 (SB-6.1.2-2), so the second request waits (SB-I-45)
     * instead of moving like a sessionless request would. */
    start(2);
    expect_to_worker(from_client(0, "{\"id\":1,\"method\":\"a\",\"sessionId\":\"s\"}"), 0);
    expect_outcome(from_client(0, "{\"id\":1,\"method\":\"b\",\"sessionId\":\"s\"}"), SB_ROUTE_HOLD,
                   SB_WHY_ID_IN_USE);
    cr_assert_eq(r.requests.slots.count, 1);
    expect_to_client(from_worker(0, "{\"id\":1,\"result\":1,\"sessionId\":\"s\"}"), 0);
    expect_to_worker(from_client(0, "{\"id\":1,\"method\":\"b\",\"sessionId\":\"s\"}"), 0);
}

Test(router, foreign_session_is_dropped_and_names_its_owner) {
    start(2);
    expect_to_worker(from_client(0, "{\"method\":\"a\",\"sessionId\":\"mine\"}"), 0);
    sb_route d = from_client(3, "{\"id\":4,\"method\":\"a\",\"sessionId\":\"mine\"}");
    expect_outcome(d, SB_ROUTE_DROP, SB_WHY_FOREIGN_SESSION);
    cr_assert_eq(d.other, 0);
    cr_assert_eq(session("\"mine\"")->client, 0, "ownership changed");
    cr_assert_eq(r.requests.slots.count, 0, "a dropped request must not be pending");
}

/* ---- 6.1.3 no session ------------------------------------------------- */

Test(router, message_without_session_is_round_robin_and_creates_no_session) {
    start(3);
    for (int i = 0; i < 7; i++) {
        sb_route d = from_client(0, "{\"jsonrpc\":\"2.0\",\"method\":\"ping\"}");
        expect_to_worker(d, i % 3);
        cr_assert_not(d.new_session);
        cr_assert_not(d.is_request);
    }
    cr_assert_eq(r.sessions.slots.count, 0);
}

Test(router, not_running_workers_are_skipped) {
    start(4);
    sb_router_set_running(&r, 1, false);
    sb_router_set_running(&r, 2, false);
    int expected[] = {0, 3, 0, 3};
    for (int i = 0; i < 4; i++)
        expect_to_worker(from_client(0, "{\"method\":\"x\"}"), expected[i]);
    /* Sessions too. */
    expect_to_worker(from_client(0, "{\"method\":\"x\",\"sessionId\":\"s\"}"), 0);
}

Test(router, no_running_worker_drops_with_no_worker) {
    cr_assert_eq(sb_router_init(&r, 2, 8), STDIO_BUS_OK); /* workers start not running */
    expect_outcome(from_client(0, "{\"method\":\"x\"}"), SB_ROUTE_DROP, SB_WHY_NO_WORKER);
    expect_outcome(from_client(0, "{\"id\":1,\"method\":\"x\"}"), SB_ROUTE_DROP, SB_WHY_NO_WORKER);
    sb_route d = from_client(0, "{\"id\":2,\"method\":\"x\",\"sessionId\":\"s\"}");
    expect_outcome(d, SB_ROUTE_DROP, SB_WHY_NO_WORKER);
    cr_assert_not(d.new_session);
    cr_assert_eq(r.sessions.slots.count, 0, "a dropped message must not create a session");
    cr_assert_eq(r.requests.slots.count, 0, "a dropped request must not be pending");
    /* Once a worker runs, the same session is created fresh. */
    sb_router_set_running(&r, 1, true);
    expect_to_worker(from_client(0, "{\"id\":2,\"method\":\"x\",\"sessionId\":\"s\"}"), 1);
}

/* ---- 6.2 pending requests --------------------------------------------- */

Test(router, request_is_recorded_against_its_worker_and_client) {
    start(2);
    sb_route d = from_client(4, "{\"jsonrpc\":\"2.0\",\"id\":\"r-1\",\"method\":\"m\"}");
    expect_to_worker(d, 0);
    cr_assert(d.is_request);
    cr_assert_eq(r.requests.slots.count, 1);
    cr_assert(sb_pending_holds(&r.requests, 0, sb_idkey_raw("\"r-1\"", 5)));
    cr_assert_not(sb_pending_holds(&r.requests, 1, sb_idkey_raw("\"r-1\"", 5)));
    cr_assert_eq(sb_pending_take(&r.requests, 0, sb_idkey_raw("\"r-1\"", 5), NULL, 0), 4);
}

Test(router, notification_is_not_recorded) {
    start(2);
    from_client(0, "{\"method\":\"m\",\"sessionId\":\"s\"}");
    from_client(0, "{\"method\":\"m\"}");
    cr_assert_eq(r.requests.slots.count, 0);
}

Test(router, routed_fields_point_into_the_line) {
    start(1);
    const char *line = "{\"id\":17,\"method\":\"m\",\"sessionId\":\"s\"}";
    sb_route d = from_client(0, line);
    cr_assert_eq(d.fields.id.raw, line + 6);
    cr_assert_eq(d.fields.id.raw_len, 2);
    cr_assert_eq(d.fields.session_id.type, SB_JSON_STRING);
}

/* ---- 6.3.1 responses -------------------------------------------------- */

Test(router, response_is_routed_to_its_client_then_forgotten) {
    start(2);
    expect_to_worker(from_client(3, "{\"id\":1,\"method\":\"m\"}"), 0);
    expect_to_client(from_worker(0, "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"ok\":true}}"), 3);
    cr_assert_eq(r.requests.slots.count, 0);
    /* SB-6.3.1-4: a second response with that id is unknown. */
    expect_outcome(from_worker(0, "{\"id\":1,\"result\":{}}"), SB_ROUTE_DROP, SB_WHY_UNKNOWN_ID);
}

Test(router, error_response_is_routed_too) {
    start(1);
    expect_to_worker(from_client(2, "{\"id\":\"x\",\"method\":\"m\"}"), 0);
    expect_to_client(
        from_worker(0, "{\"id\":\"x\",\"error\":{\"code\":-32601,\"message\":\"no\"}}"), 2);
}

Test(router, response_with_unknown_id_is_dropped) {
    start(2);
    expect_to_worker(from_client(0, "{\"id\":1,\"method\":\"m\"}"), 0);
    expect_outcome(from_worker(0, "{\"id\":2,\"result\":1}"), SB_ROUTE_DROP, SB_WHY_UNKNOWN_ID);
    /* "1" is not 1. */
    expect_outcome(from_worker(0, "{\"id\":\"1\",\"result\":1}"), SB_ROUTE_DROP, SB_WHY_UNKNOWN_ID);
    /* The request went to worker 0, not worker 1. */
    expect_outcome(from_worker(1, "{\"id\":1,\"result\":1}"), SB_ROUTE_DROP, SB_WHY_UNKNOWN_ID);
    cr_assert_eq(r.requests.slots.count, 1);
}

Test(router, response_without_id_is_dropped) {
    start(1);
    expect_outcome(from_worker(0, "{\"result\":1}"), SB_ROUTE_DROP, SB_WHY_UNKNOWN_ID);
}

Test(router, session_response_goes_to_the_requester_not_the_session_owner) {
    /* Responses follow the pending table (6.3.1), not the Session table. */
    start(1);
    expect_to_worker(from_client(1, "{\"id\":5,\"method\":\"m\",\"sessionId\":\"s\"}"), 0);
    expect_to_client(from_worker(0, "{\"id\":5,\"result\":null,\"sessionId\":\"s\"}"), 1);
}

/* ---- SB-I-3: the same id from two clients ----------------------------- */

Test(router, same_id_from_two_clients_lands_on_different_workers) {
    start(2);
    expect_to_worker(from_client(0, "{\"id\":1,\"method\":\"m\"}"), 0);
    expect_to_worker(from_client(0, "{\"id\":2,\"method\":\"m\"}"), 1);
    /* Round robin says worker 0, which already holds id 1. */
    expect_to_worker(from_client(1, "{\"id\":1,\"method\":\"m\"}"), 1);
    expect_to_client(from_worker(1, "{\"id\":1,\"result\":1}"), 1);
    expect_to_client(from_worker(0, "{\"id\":1,\"result\":1}"), 0);
    expect_to_client(from_worker(1, "{\"id\":2,\"result\":1}"), 0);
    cr_assert_eq(r.requests.slots.count, 0);
}

/* ---- SB-I-45: never two requests of one id value on one worker -------- */

Test(router, same_id_on_the_only_worker_is_held_until_answered) {
    start(1);
    expect_to_worker(from_client(0, "{\"id\":1,\"method\":\"m\"}"), 0);
    expect_outcome(from_client(1, "{\"id\":1,\"method\":\"m\"}"), SB_ROUTE_HOLD, SB_WHY_ID_IN_USE);
    cr_assert_eq(r.requests.slots.count, 1, "a held request records nothing");
    expect_to_client(from_worker(0, "{\"id\":1,\"result\":1}"), 0);
    expect_to_worker(from_client(1, "{\"id\":1,\"method\":\"m\"}"), 0);
    expect_to_client(from_worker(0, "{\"id\":1,\"result\":1}"), 1);
}

Test(router, same_id_is_held_when_every_worker_holds_it) {
    start(2);
    expect_to_worker(from_client(0, "{\"id\":7,\"method\":\"m\"}"), 0);
    expect_to_worker(from_client(1, "{\"id\":7,\"method\":\"m\"}"), 1);
    int cursor = r.rr_next;
    expect_outcome(from_client(2, "{\"id\":7,\"method\":\"m\"}"), SB_ROUTE_HOLD, SB_WHY_ID_IN_USE);
    cr_assert_eq(r.rr_next, cursor, "a held request does not move the round-robin cursor");
    expect_to_client(from_worker(1, "{\"id\":7,\"result\":1}"), 1);
    expect_to_worker(from_client(2, "{\"id\":7,\"method\":\"m\"}"), 1);
}

Test(router, same_id_in_two_sessions_on_one_worker_is_held) {
    /* A worker need not echo sessionId (SB-5.2.2-1 is a SHOULD): without it,
     * two answers with id 1 could not be told apart. */
    start(1);
    expect_to_worker(from_client(0, "{\"id\":1,\"method\":\"m\",\"sessionId\":\"a\"}"), 0);
    expect_outcome(from_client(1, "{\"id\":1,\"method\":\"m\",\"sessionId\":\"b\"}"), SB_ROUTE_HOLD,
                   SB_WHY_ID_IN_USE);
    cr_assert_eq(r.sessions.slots.count, 1, "a held request creates no session");
    expect_to_client(from_worker(0, "{\"id\":1,\"result\":1}"), 0);
    expect_to_worker(from_client(1, "{\"id\":1,\"method\":\"m\",\"sessionId\":\"b\"}"), 0);
}

Test(router, id_of_a_departed_client_is_held_until_its_late_answer) {
    start(1);
    expect_to_worker(from_client(0, "{\"id\":5,\"method\":\"slow\"}"), 0);
    sb_pending_orphan_sender(&r.requests, 0, NULL, NULL); /* client 0 leaves */
    expect_outcome(from_client(0, "{\"id\":5,\"method\":\"m\"}"), SB_ROUTE_HOLD, SB_WHY_ID_IN_USE);
    expect_outcome(from_worker(0, "{\"id\":5,\"result\":\"late\"}"), SB_ROUTE_DROP,
                   SB_WHY_CLIENT_GONE);
    expect_to_worker(from_client(0, "{\"id\":5,\"method\":\"m\"}"), 0);
    expect_to_client(from_worker(0, "{\"id\":5,\"result\":\"mine\"}"), 0);
}

Test(router, ids_of_the_same_value_are_kept_apart) {
    /* A worker that re-serialises answers 1.0 as 1, "\u0061" as "a". */
    static const char *pairs[][2] = {
        {"1", "1.0"},
        {"1", "1e0"},
        {"0", "-0"},
        {"100", "1E2"},
        {"-3", "-3.00"},
        {"\"a\"", "\"\\u0061\""},
        {"\"/\"", "\"\\/\""},
        {"\"\\n\"", "\"\\u000a\""},
        {"\"\\ud83d\\ude00\"", "\"\xf0\x9f\x98\x80\""},
        {"12345678901234567890", "12345678901234567891"},
    };
    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
        start(1);
        char a[128], b[128];
        snprintf(a, sizeof a, "{\"id\":%s,\"method\":\"m\"}", pairs[i][0]);
        snprintf(b, sizeof b, "{\"id\":%s,\"method\":\"m\"}", pairs[i][1]);
        expect_to_worker(from_client(0, a), 0);
        sb_route d = from_client(1, b);
        cr_assert_eq(d.action, SB_ROUTE_HOLD, "%s then %s: not held", pairs[i][0], pairs[i][1]);
        sb_router_fini(&r);
    }
}

Test(router, ids_of_different_values_share_a_worker) {
    static const char *pairs[][2] = {
        {"1", "\"1\""},           {"1", "10"},        {"1", "2"},
        {"1.5", "1.25"},          {"\"a\"", "\"A\""}, {"null", "\"null\""},
        {"\"\\u0061\"", "\"b\""}, {"0", "\"\""},
    };
    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
        start(1);
        char a[128], b[128];
        snprintf(a, sizeof a, "{\"id\":%s,\"method\":\"m\"}", pairs[i][0]);
        snprintf(b, sizeof b, "{\"id\":%s,\"method\":\"m\"}", pairs[i][1]);
        expect_to_worker(from_client(0, a), 0);
        expect_to_worker(from_client(1, b), 0);
        sb_router_fini(&r);
    }
}

Test(router, responses_still_match_the_exact_token) {
    /* SB-I-3: value equality keeps requests apart; it never matches a
     * response to a request written differently. */
    start(1);
    expect_to_worker(from_client(0, "{\"id\":1.0,\"method\":\"m\"}"), 0);
    expect_outcome(from_worker(0, "{\"id\":1,\"result\":1}"), SB_ROUTE_DROP, SB_WHY_UNKNOWN_ID);
    expect_to_client(from_worker(0, "{\"id\":1.0,\"result\":1}"), 0);
}

/* ---- 6.3.2 worker notifications --------------------------------------- */

Test(router, worker_notification_goes_to_the_session_owner) {
    start(2);
    expect_to_worker(from_client(6, "{\"method\":\"a\",\"sessionId\":\"s\"}"), 0);
    expect_to_client(from_worker(0, "{\"method\":\"progress\",\"sessionId\":\"s\"}"), 6);
    cr_assert_eq(r.upstream.slots.count, 0, "a notification is not a request");
}

Test(router, worker_notification_for_unknown_session_is_dropped) {
    start(1);
    expect_outcome(from_worker(0, "{\"method\":\"progress\",\"sessionId\":\"nope\"}"),
                   SB_ROUTE_DROP, SB_WHY_UNKNOWN_SESSION);
}

Test(router, worker_notification_after_its_owner_left_is_dropped) {
    start(1);
    expect_to_worker(from_client(2, "{\"method\":\"a\",\"sessionId\":\"s\"}"), 0);
    cr_assert_eq(sb_sessions_drop_client(&r.sessions, 2, NULL, NULL), 1);
    expect_outcome(from_worker(0, "{\"method\":\"progress\",\"sessionId\":\"s\"}"), SB_ROUTE_DROP,
                   SB_WHY_UNKNOWN_SESSION);
}

/* ---- 6.3.3 unroutable ------------------------------------------------- */

Test(router, worker_message_without_response_or_session_is_unroutable) {
    start(1);
    expect_outcome(from_worker(0, "{\"method\":\"log\"}"), SB_ROUTE_DROP, SB_WHY_UNROUTABLE);
    expect_outcome(from_worker(0, "{\"id\":3,\"method\":\"ask\"}"), SB_ROUTE_DROP,
                   SB_WHY_UNROUTABLE);
    expect_outcome(from_worker(0, "{}"), SB_ROUTE_DROP, SB_WHY_UNROUTABLE);
}

/* ---- SB-I-14, SB-I-15: server-to-client requests ---------------------- */

Test(router, client_response_to_a_worker_request_goes_back_to_that_worker) {
    start(3);
    from_client(0, "{\"method\":\"x\"}"); /* move the cursor: the session lands on 1 */
    expect_to_worker(from_client(0, "{\"id\":1,\"method\":\"a\",\"sessionId\":\"s\"}"), 1);
    expect_to_client(from_worker(1, "{\"id\":\"srv-1\",\"method\":\"sampling/createMessage\","
                                    "\"sessionId\":\"s\"}"),
                     0);
    cr_assert_eq(r.upstream.slots.count, 1);
    sb_route d = from_client(0, "{\"id\":\"srv-1\",\"result\":{}}");
    expect_to_worker(d, 1);
    cr_assert_not(d.is_request);
    cr_assert_eq(r.upstream.slots.count, 0);
    cr_assert_eq(r.requests.slots.count, 1, "the client's response is not a request");
}

Test(router, client_response_matching_nothing_is_dropped) {
    start(1);
    expect_outcome(from_client(0, "{\"id\":9,\"result\":{}}"), SB_ROUTE_DROP, SB_WHY_NO_REQUEST);
    expect_outcome(from_client(0, "{\"error\":{}}"), SB_ROUTE_DROP, SB_WHY_NO_REQUEST);
    cr_assert_eq(r.requests.slots.count, 0);
}

Test(router, client_response_from_another_client_does_not_match) {
    start(1);
    expect_to_worker(from_client(0, "{\"method\":\"a\",\"sessionId\":\"s\"}"), 0);
    expect_to_client(from_worker(0, "{\"id\":7,\"method\":\"ask\",\"sessionId\":\"s\"}"), 0);
    expect_outcome(from_client(1, "{\"id\":7,\"result\":{}}"), SB_ROUTE_DROP, SB_WHY_NO_REQUEST);
    cr_assert_eq(r.upstream.slots.count, 1);
    expect_to_worker(from_client(0, "{\"id\":7,\"result\":{}}"), 0);
}

Test(router, client_response_with_own_session_falls_back_to_the_session_worker) {
    start(2);
    from_client(0, "{\"method\":\"x\"}");
    expect_to_worker(from_client(0, "{\"method\":\"a\",\"sessionId\":\"s\"}"), 1);
    expect_to_worker(from_client(0, "{\"id\":99,\"result\":{},\"sessionId\":\"s\"}"), 1);
    /* Not for a session it does not own. */
    expect_outcome(from_client(1, "{\"id\":99,\"result\":{},\"sessionId\":\"s\"}"), SB_ROUTE_DROP,
                   SB_WHY_NO_REQUEST);
}

Test(router, client_response_to_a_stopped_worker_is_dropped) {
    start(1);
    expect_to_worker(from_client(0, "{\"method\":\"a\",\"sessionId\":\"s\"}"), 0);
    expect_to_client(from_worker(0, "{\"id\":7,\"method\":\"ask\",\"sessionId\":\"s\"}"), 0);
    sb_router_set_running(&r, 0, false);
    expect_outcome(from_client(0, "{\"id\":7,\"result\":{}}"), SB_ROUTE_DROP, SB_WHY_NO_REQUEST);
}

/* ---- rejects (4.3, 5.3) ----------------------------------------------- */

Test(router, invalid_json_is_rejected_from_either_side) {
    start(1);
    const char *bad[] = {"not json", "{", "{\"id\":1,}", "{\"id\":1}x", "{\"id\":01}"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        expect_outcome(from_client(0, bad[i]), SB_ROUTE_REJECT, SB_WHY_NOT_JSON);
        expect_outcome(from_worker(0, bad[i]), SB_ROUTE_REJECT, SB_WHY_NOT_JSON);
    }
}

Test(router, json_that_is_not_an_object_is_rejected) {
    start(1);
    const char *bad[] = {"[1]", "1", "\"x\"", "null", "[{\"id\":1,\"method\":\"m\"}]"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        expect_outcome(from_client(0, bad[i]), SB_ROUTE_REJECT, SB_WHY_NOT_OBJECT);
        expect_outcome(from_worker(0, bad[i]), SB_ROUTE_REJECT, SB_WHY_NOT_OBJECT);
    }
}

Test(router, id_of_a_bad_type_is_rejected) {
    start(1);
    const char *bad[] = {"{\"id\":true,\"method\":\"m\"}", "{\"id\":false,\"method\":\"m\"}",
                         "{\"id\":{},\"method\":\"m\"}", "{\"id\":[1],\"method\":\"m\"}"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        expect_outcome(from_client(0, bad[i]), SB_ROUTE_REJECT, SB_WHY_BAD_ID_TYPE);
        expect_outcome(from_worker(0, bad[i]), SB_ROUTE_REJECT, SB_WHY_BAD_ID_TYPE);
    }
    cr_assert_eq(r.requests.slots.count, 0);
}

Test(router, session_id_of_a_bad_type_is_rejected) {
    start(1);
    const char *bad[] = {
        "{\"method\":\"m\",\"sessionId\":1}", "{\"method\":\"m\",\"sessionId\":null}",
        "{\"method\":\"m\",\"sessionId\":[\"s\"]}", "{\"method\":\"m\",\"sessionId\":{}}"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        expect_outcome(from_client(0, bad[i]), SB_ROUTE_REJECT, SB_WHY_BAD_SESSION_TYPE);
        expect_outcome(from_worker(0, bad[i]), SB_ROUTE_REJECT, SB_WHY_BAD_SESSION_TYPE);
    }
    cr_assert_eq(r.sessions.slots.count, 0);
}

/* Builds {"id":<id>,"method":"m"} with a string id of n characters, or a
 * numeric id of n digits. */
static const char *line_with_id(char *buf, size_t size, size_t n, bool numeric) {
    char id[512];
    memset(id, numeric ? '7' : 'i', n);
    id[n] = '\0';
    snprintf(buf, size,
             numeric ? "{\"id\":%s,\"method\":\"m\"}" : "{\"id\":\"%s\",\"method\":\"m\"}", id);
    return buf;
}

static const char *line_with_session(char *buf, size_t size, size_t n) {
    char sid[512];
    memset(sid, 's', n);
    sid[n] = '\0';
    snprintf(buf, size, "{\"method\":\"m\",\"sessionId\":\"%s\"}", sid);
    return buf;
}

Test(router, string_id_at_the_limit_routes_one_over_is_rejected) {
    start(1);
    char line[1024];
    expect_to_worker(
        from_client(0, line_with_id(line, sizeof line, STDIO_BUS_MAX_REQUEST_ID_LEN, false)), 0);
    cr_assert_eq(r.requests.slots.count, 1);
    expect_outcome(
        from_client(0, line_with_id(line, sizeof line, STDIO_BUS_MAX_REQUEST_ID_LEN + 1, false)),
        SB_ROUTE_REJECT, SB_WHY_ID_TOO_LONG);
    cr_assert_eq(r.requests.slots.count, 1);
}

Test(router, numeric_id_at_the_limit_routes_one_over_is_rejected) {
    start(1);
    char line[1024];
    expect_to_worker(
        from_client(0, line_with_id(line, sizeof line, STDIO_BUS_MAX_REQUEST_ID_LEN, true)), 0);
    expect_outcome(
        from_client(0, line_with_id(line, sizeof line, STDIO_BUS_MAX_REQUEST_ID_LEN + 1, true)),
        SB_ROUTE_REJECT, SB_WHY_ID_TOO_LONG);
}

Test(router, long_id_from_a_worker_is_rejected) {
    start(1);
    char line[1024], id[256];
    memset(id, 'i', STDIO_BUS_MAX_REQUEST_ID_LEN + 1);
    id[STDIO_BUS_MAX_REQUEST_ID_LEN + 1] = '\0';
    snprintf(line, sizeof line, "{\"id\":\"%s\",\"result\":1}", id);
    expect_outcome(from_worker(0, line), SB_ROUTE_REJECT, SB_WHY_ID_TOO_LONG);
}

Test(router, session_id_at_the_limit_routes_one_over_is_rejected) {
    start(1);
    char line[1024];
    sb_route d = from_client(0, line_with_session(line, sizeof line, STDIO_BUS_MAX_SESSION_ID_LEN));
    expect_to_worker(d, 0);
    cr_assert(d.new_session);
    expect_outcome(
        from_client(0, line_with_session(line, sizeof line, STDIO_BUS_MAX_SESSION_ID_LEN + 1)),
        SB_ROUTE_REJECT, SB_WHY_SESSION_TOO_LONG);
    expect_outcome(
        from_worker(0, line_with_session(line, sizeof line, STDIO_BUS_MAX_SESSION_ID_LEN + 1)),
        SB_ROUTE_REJECT, SB_WHY_SESSION_TOO_LONG);
    cr_assert_eq(r.sessions.slots.count, 1);
}

Test(router, worker_request_with_a_full_length_session_and_id_is_remembered) {
    start(1);
    char line[2048], sid[STDIO_BUS_MAX_SESSION_ID_LEN + 1], id[STDIO_BUS_MAX_REQUEST_ID_LEN + 1];
    memset(sid, 's', STDIO_BUS_MAX_SESSION_ID_LEN);
    sid[STDIO_BUS_MAX_SESSION_ID_LEN] = '\0';
    memset(id, 'i', STDIO_BUS_MAX_REQUEST_ID_LEN);
    id[STDIO_BUS_MAX_REQUEST_ID_LEN] = '\0';
    snprintf(line, sizeof line, "{\"method\":\"a\",\"sessionId\":\"%s\"}", sid);
    expect_to_worker(from_client(0, line), 0);
    snprintf(line, sizeof line, "{\"id\":\"%s\",\"method\":\"ask\",\"sessionId\":\"%s\"}", id, sid);
    expect_to_client(from_worker(0, line), 0);
    cr_assert_eq(r.upstream.slots.count, 1);
    snprintf(line, sizeof line, "{\"id\":\"%s\",\"result\":{}}", id);
    expect_to_worker(from_client(0, line), 0);
}

Test(router, blank_lines_are_ignored) {
    start(1);
    const char *blank[] = {"", "\n", " ", "\t\t", "\r\n", "  \r\n"};
    for (size_t i = 0; i < sizeof blank / sizeof *blank; i++) {
        cr_assert_eq(from_client(0, blank[i]).action, SB_ROUTE_IGNORE, "client line %zu", i);
        cr_assert_eq(from_worker(0, blank[i]).action, SB_ROUTE_IGNORE, "worker line %zu", i);
    }
    /* Ignoring does not advance the round robin. */
    cr_assert_eq(r.rr_next, 0);
}

/* ---- full tables (SB-I-18) -------------------------------------------- */

Test(router, full_session_table_drops_new_sessions_only) {
    start(2);
    char line[128];
    for (int i = 0; i < STDIO_BUS_MAX_SESSIONS; i++) {
        snprintf(line, sizeof line, "{\"method\":\"m\",\"sessionId\":\"s%d\"}", i);
        expect_to_worker(from_client(0, line), i % 2);
    }
    cr_assert_eq(r.sessions.slots.count, STDIO_BUS_MAX_SESSIONS);
    expect_outcome(from_client(0, "{\"id\":1,\"method\":\"m\",\"sessionId\":\"one-more\"}"),
                   SB_ROUTE_DROP, SB_WHY_SESSIONS_FULL);
    cr_assert_eq(r.requests.slots.count, 0, "a dropped request must not be pending");
    /* Existing sessions and sessionless messages still flow. */
    expect_to_worker(from_client(0, "{\"method\":\"m\",\"sessionId\":\"s7\"}"), 1);
    expect_to_worker(from_client(0, "{\"method\":\"m\"}"), 0);
    /* One session gone: a new one fits again. */
    sb_sessions_remove(&r.sessions, session("\"s7\""));
    expect_to_worker(from_client(0, "{\"method\":\"m\",\"sessionId\":\"one-more\"}"), 1);
}

Test(router, full_pending_table_drops_requests_only) {
    start(2);
    char line[128];
    for (int i = 0; i < STDIO_BUS_MAX_PENDING_REQUESTS; i++) {
        snprintf(line, sizeof line, "{\"id\":%d,\"method\":\"m\"}", i);
        expect_to_worker(from_client(i % 8, line), i % 2);
    }
    cr_assert_eq(r.requests.slots.count, STDIO_BUS_MAX_PENDING_REQUESTS);
    /* SB-I-54: held, not dropped: nothing recorded, offered again later */
    expect_outcome(from_client(0, "{\"id\":\"x\",\"method\":\"m\"}"), SB_ROUTE_HOLD,
                   SB_WHY_PENDING_FULL);
    expect_outcome(from_client(0, "{\"id\":\"x\",\"method\":\"m\",\"sessionId\":\"new\"}"),
                   SB_ROUTE_HOLD, SB_WHY_PENDING_FULL);
    cr_assert_eq(r.sessions.slots.count, 0, "a held request must not create a session");
    /* Notifications still flow; a response frees a slot. */
    expect_to_worker(from_client(0, "{\"method\":\"m\"}"), 0);
    expect_to_client(from_worker(1, "{\"id\":3,\"result\":1}"), 3);
    expect_to_worker(from_client(0, "{\"id\":\"x\",\"method\":\"m\"}"), 1);
}

/* ---- fair shares of the tables (SB-I-51..SB-I-53) --------------------- */

static void worker_asks(int worker, const char *sid, int n, int client, bool delivered) {
    char line[160];
    for (int i = 0; i < n; i++) {
        snprintf(line, sizeof line, "{\"id\":\"q%d\",\"method\":\"ask\",\"sessionId\":\"%s\"}", i,
                 sid);
        sb_route d = from_worker(worker, line);
        if (delivered)
            expect_to_client(d, client);
        else
            cr_assert_eq(d.action, SB_ROUTE_DROP);
    }
}

Test(router, worker_request_beyond_the_clients_share_is_dropped_and_other_clients_served) {
    /* SB-I-52: a client that never answers its worker's requests holds at
     * most its share of the table; the others' answers still find theirs. */
    start(1);
    expect_to_worker(from_client(0, "{\"method\":\"a\",\"sessionId\":\"s\"}"), 0);
    expect_to_worker(from_client(1, "{\"method\":\"a\",\"sessionId\":\"t\"}"), 0);
    worker_asks(0, "s", SB_ROUTER_UPSTREAM_SHARE, 0, true);
    sb_route d = from_worker(0, "{\"id\":\"over\",\"method\":\"ask\",\"sessionId\":\"s\"}");
    expect_outcome(d, SB_ROUTE_DROP, SB_WHY_UPSTREAM_SHARE);
    cr_assert_eq(d.target, 0, "the client over its share is named");
    expect_to_client(from_worker(0, "{\"id\":\"t1\",\"method\":\"ask\",\"sessionId\":\"t\"}"), 1);
    expect_to_worker(from_client(1, "{\"id\":\"t1\",\"result\":{},\"sessionId\":\"t\"}"), 0);
    /* the client answers one: its next request is delivered again */
    expect_to_worker(from_client(0, "{\"id\":\"q0\",\"result\":{},\"sessionId\":\"s\"}"), 0);
    expect_to_client(from_worker(0, "{\"id\":\"again\",\"method\":\"ask\",\"sessionId\":\"s\"}"),
                     0);
}

Test(router, full_table_of_worker_requests_drops_the_request) {
    /* SB-I-52: one that cannot be recorded is not delivered either, since
     * its answer could not find its way back. */
    start_with(1, 1);
    r.upstream_share = STDIO_BUS_MAX_PENDING_REQUESTS + 1;
    expect_to_worker(from_client(0, "{\"method\":\"a\",\"sessionId\":\"s\"}"), 0);
    worker_asks(0, "s", STDIO_BUS_MAX_PENDING_REQUESTS, 0, true);
    expect_outcome(from_worker(0, "{\"id\":\"late\",\"method\":\"ask\",\"sessionId\":\"s\"}"),
                   SB_ROUTE_DROP, SB_WHY_UPSTREAM_FULL);
    cr_assert_eq(r.upstream.slots.count, STDIO_BUS_MAX_PENDING_REQUESTS);
}

/* n requests of one client; with several workers they go round-robin. */
static void client_asks(int client, int n, sb_route_why last) {
    char line[160];
    for (int i = 0; i < n; i++) {
        snprintf(line, sizeof line, "{\"id\":\"c%d-%d\",\"method\":\"m\"}", client, i);
        sb_route d = from_client(client, line);
        if (last == SB_WHY_NONE || i + 1 < n)
            expect_to_worker(d, r.worker_count == 1 ? 0 : d.target);
        else
            expect_outcome(d, SB_ROUTE_HOLD, last); /* SB-I-54: it waits */
    }
}

static void fill_what_it_may(int client) {
    char line[64];
    for (int i = 0;; i++) {
        snprintf(line, sizeof line, "{\"id\":\"g%d-%d\",\"method\":\"m\"}", client, i);
        sb_route d = from_client(client, line);
        if (d.action != SB_ROUTE_TO_WORKER) {
            expect_outcome(d, SB_ROUTE_HOLD, SB_WHY_CLIENT_SHARE); /* SB-I-54 */
            return;
        }
    }
}

Test(router, a_client_alone_may_use_the_whole_table) {
    /* SB-I-51: no one to share with; SB-I-54: the next one waits */
    start_with(1, 1);
    client_asks(0, STDIO_BUS_MAX_PENDING_REQUESTS, SB_WHY_NONE);
    client_asks(0, 1, SB_WHY_PENDING_FULL);
}

Test(router, no_number_of_clients_takes_a_connected_clients_floor) {
    /* issue 32 item 2: 1020 clients each as greedy as they may be leave the
     * four others their floor, and the table is full */
    cr_assert_eq(sb_router_init(&r, 1, STDIO_BUS_MAX_CONNECTIONS), STDIO_BUS_OK);
    sb_router_set_running(&r, 0, true);
    for (int c = 0; c < STDIO_BUS_MAX_CONNECTIONS; c++)
        sb_router_add_client(&r, c);
    for (int c = 0; c < STDIO_BUS_MAX_CONNECTIONS - 4; c++)
        fill_what_it_may(c);
    for (int c = STDIO_BUS_MAX_CONNECTIONS - 4; c < STDIO_BUS_MAX_CONNECTIONS; c++)
        client_asks(c, SB_ROUTER_FLOOR, SB_WHY_NONE);
    cr_assert_eq(r.requests.slots.count, STDIO_BUS_MAX_PENDING_REQUESTS);
}

Test(router, three_hogs_leave_a_connected_client_its_floor) {
    /* issue 32 item 2: before, 2048 + 1024 + 1024 left nothing */
    start_with(1, 4);
    for (int c = 0; c < 3; c++)
        fill_what_it_may(c);
    client_asks(3, SB_ROUTER_FLOOR, SB_WHY_NONE);
    cr_assert_eq(r.requests.slots.count, STDIO_BUS_MAX_PENDING_REQUESTS);
}

Test(router, four_clients_fill_the_table_and_no_more) {
    /* SB-8.2-3 with shares: the table still holds 4096 requests */
    start_with(1, 4);
    for (int c = 0; c < 4; c++)
        client_asks(c, STDIO_BUS_MAX_PENDING_REQUESTS / 4, SB_WHY_NONE);
    cr_assert_eq(r.requests.slots.count, STDIO_BUS_MAX_PENDING_REQUESTS);
    client_asks(0, 1, SB_WHY_PENDING_FULL);
}

/* Requests a departing client leaves behind, in the tests below */
#define LEFT_BEHIND (STDIO_BUS_MAX_PENDING_REQUESTS / 8)

Test(router, orphans_leave_their_clients_share_and_count_on_their_worker) {
    /* SB-I-53 */
    start(2);
    client_asks(0, LEFT_BEHIND, SB_WHY_NONE);
    int requests;
    sb_router_drop_client(&r, 0, NULL, NULL, &requests);
    cr_assert_eq(r.orphans_on[0] + r.orphans_on[1], LEFT_BEHIND);
    cr_assert_eq(sb_pending_count_sender(&r.requests, 0), 0, "a newcomer in slot 0 starts afresh");
    cr_assert_leq(sb_router_orphan_excess(&r), 0);
    r.orphan_budget = 10;
    cr_assert_gt(sb_router_orphan_excess(&r), 0);
    int holder = sb_router_orphan_holder(&r);
    cr_assert(holder == 0 || holder == 1);
    cr_assert_geq(r.orphans_on[holder], r.orphans_on[1 - holder]);
    cr_assert_gt(r.orphans_on[1 - holder], 0, "round-robin put some on each worker");
    sb_router_set_running(&r, holder, false); /* failed: on its way out */
    cr_assert_eq(sb_router_orphan_holder(&r), 1 - holder);
    int before = r.orphans_on[holder];
    sb_router_drop_worker(&r, holder, NULL, NULL);
    cr_assert_eq(r.orphans_on[holder], 0);
    cr_assert_eq(r.orphans, LEFT_BEHIND - before);
}

/* ---- sb_router_why, sb_router_token_len -------------------------------- */

Test(router, every_reason_has_a_text) {
    for (int why = SB_WHY_NONE; why <= SB_WHY_ID_IN_USE; why++) {
        const char *text = sb_router_why((sb_route_why)why);
        cr_assert_not_null(text);
        cr_assert_str_neq(text, "?", "reason %d has no text", why);
    }
}

Test(router, token_len_counts_strings_without_quotes) {
    sb_token s = {.type = SB_JSON_STRING, .raw = "\"abc\"", .raw_len = 5};
    sb_token n = {.type = SB_JSON_NUMBER, .raw = "12345", .raw_len = 5};
    cr_assert_eq(sb_router_token_len(&s), 3);
    cr_assert_eq(sb_router_token_len(&n), 5);
}

/* ---- the router's bookkeeping when a peer leaves ---------------------- */

static int visited;
static void count_visit(void *ctx, const sb_request *q) {
    (void)ctx;
    (void)q;
    visited++;
}

Test(router, departed_client_ends_its_sessions_and_orphans_its_requests) {
    start(2);
    expect_to_worker(from_client(0, "{\"id\":1,\"sessionId\":\"a\",\"method\":\"x\"}"), 0);
    expect_to_worker(from_client(0, "{\"id\":2,\"method\":\"x\"}"), 1);
    int requests = -1;
    visited = 0;
    cr_assert_eq(sb_router_drop_client(&r, 0, count_visit, NULL, &requests), 1);
    cr_assert_eq(requests, 2);
    cr_assert_eq(visited, 2);
    cr_assert_eq(r.orphans, 2);
    cr_assert_not(sb_router_client_has_pending(&r, 0));
    /* SB-I-23: a late answer reaches no one and leaves the orphan count */
    sb_route d = from_worker(1, "{\"id\":2,\"result\":{}}");
    cr_assert_eq(d.action, SB_ROUTE_DROP);
    cr_assert_eq(d.why, SB_WHY_CLIENT_GONE);
    cr_assert_eq(r.orphans, 1);
}

Test(router, exited_worker_drops_its_requests_and_counts_off_orphans) {
    start(1);
    expect_to_worker(from_client(0, "{\"id\":1,\"method\":\"x\"}"), 0);
    expect_to_worker(from_client(1, "{\"id\":2,\"method\":\"x\"}"), 0);
    int requests;
    sb_router_drop_client(&r, 1, NULL, NULL, &requests);
    cr_assert_eq(r.orphans, 1);
    visited = 0;
    cr_assert_eq(sb_router_drop_worker(&r, 0, count_visit, NULL), 2);
    cr_assert_eq(visited, 1, "only the request of the client still here is reported");
    cr_assert_eq(r.orphans, 0);
    cr_assert_not(sb_router_client_has_pending(&r, 0));
}

Test(router, dropping_a_worker_s_sessions_counts_them) {
    start(1);
    expect_to_worker(from_client(0, "{\"sessionId\":\"a\",\"method\":\"x\"}"), 0);
    expect_to_worker(from_client(0, "{\"sessionId\":\"b\",\"method\":\"x\"}"), 0);
    cr_assert_eq(sb_router_drop_sessions(&r, 0, NULL, NULL), 2);
    cr_assert_eq(sb_router_drop_sessions(&r, 0, NULL, NULL), 0);
}
