/* Unit tests for connection affinity: the binding table (src/base/affinity.c)
 * and the routing it changes (src/route/router.c; SPEC.md SB-X-11..SB-X-15). */
#include <criterion/criterion.h>

#include <stdio.h>
#include <string.h>

#include "affinity.h"
#include "router.h"
#include "status.h"

/* ---- the table --------------------------------------------------------- */

static sb_affinity a;

static void table_fini(void) {
    sb_affinity_fini(&a);
}

TestSuite(affinity, .fini = table_fini);

Test(affinity, everything_starts_unbound) {
    cr_assert_eq(sb_affinity_init(&a, 3, 4), STDIO_BUS_OK);
    for (int c = 0; c < 4; c++)
        cr_assert_eq(sb_affinity_worker(&a, c), SB_AFFINITY_UNBOUND);
    for (int w = 0; w < 3; w++) {
        cr_assert_eq(sb_affinity_client(&a, w), SB_AFFINITY_UNBOUND);
        cr_assert_eq(sb_affinity_count(&a, w), 0);
    }
    cr_assert_eq(sb_affinity_unbind(&a, 2), SB_AFFINITY_UNBOUND);
}

Test(affinity, a_worker_with_one_client_names_it_and_with_two_is_shared) {
    cr_assert_eq(sb_affinity_init(&a, 2, 4), STDIO_BUS_OK);
    sb_affinity_bind(&a, 3, 1);
    cr_assert_eq(sb_affinity_worker(&a, 3), 1);
    cr_assert_eq(sb_affinity_client(&a, 1), 3);
    sb_affinity_bind(&a, 0, 1);
    cr_assert_eq(sb_affinity_client(&a, 1), SB_AFFINITY_SHARED);
    cr_assert_eq(sb_affinity_count(&a, 1), 2);
    cr_assert_eq(sb_affinity_client(&a, 0), SB_AFFINITY_UNBOUND);
    /* the one that stays is named again, whichever leaves */
    cr_assert_eq(sb_affinity_unbind(&a, 3), 1);
    cr_assert_eq(sb_affinity_client(&a, 1), 0);
    cr_assert_eq(sb_affinity_worker(&a, 3), SB_AFFINITY_UNBOUND);
}

Test(affinity, unbinding_from_the_middle_keeps_the_list) {
    cr_assert_eq(sb_affinity_init(&a, 1, 5), STDIO_BUS_OK);
    for (int c = 0; c < 5; c++)
        sb_affinity_bind(&a, c, 0);
    cr_assert_eq(sb_affinity_unbind(&a, 2), 0);
    cr_assert_eq(sb_affinity_unbind(&a, 4), 0); /* the head */
    cr_assert_eq(sb_affinity_unbind(&a, 0), 0); /* the tail */
    cr_assert_eq(sb_affinity_count(&a, 0), 2);
    bool seen[5] = {false};
    int c, n = 0;
    while ((c = sb_affinity_first(&a, 0)) >= 0) {
        seen[c] = true;
        cr_assert_eq(sb_affinity_unbind(&a, c), 0);
        n++;
    }
    cr_assert_eq(n, 2);
    cr_assert(seen[1] && seen[3]);
    cr_assert_eq(sb_affinity_count(&a, 0), 0);
}

Test(affinity, a_client_can_bind_again_after_unbinding) {
    cr_assert_eq(sb_affinity_init(&a, 2, 1), STDIO_BUS_OK);
    sb_affinity_bind(&a, 0, 0);
    sb_affinity_unbind(&a, 0);
    sb_affinity_bind(&a, 0, 1);
    cr_assert_eq(sb_affinity_worker(&a, 0), 1);
    cr_assert_eq(sb_affinity_client(&a, 0), SB_AFFINITY_UNBOUND);
    cr_assert_eq(sb_affinity_client(&a, 1), 0);
}

/* ---- routing with affinity ------------------------------------------- */

static sb_router r;

static void router_fini(void) {
    sb_router_fini(&r);
}

static void start(int workers, sb_affinity_mode mode) {
    cr_assert_eq(sb_router_init(&r, workers, 8), STDIO_BUS_OK);
    cr_assert_eq(sb_router_set_affinity(&r, mode), STDIO_BUS_OK);
    for (int w = 0; w < workers; w++)
        sb_router_set_running(&r, w, true);
}

static sb_route from_client(int client, const char *line) {
    return sb_router_from_client(&r, client, line, strlen(line));
}

static sb_route from_worker(int worker, const char *line) {
    return sb_router_from_worker(&r, worker, line, strlen(line));
}

static void expect(sb_route d, sb_route_action action, int target) {
    cr_assert_eq(d.action, action, "action %d (%s), expected %d", d.action, sb_router_why(d.why),
                 action);
    if (action == SB_ROUTE_TO_WORKER || action == SB_ROUTE_TO_CLIENT)
        cr_assert_eq(d.target, target, "target %d, expected %d", d.target, target);
}

static void expect_drop(sb_route d, sb_route_why why) {
    cr_assert_eq(d.action, SB_ROUTE_DROP, "action %d, expected DROP", d.action);
    cr_assert_eq(d.why, why, "why \"%s\", expected \"%s\"", sb_router_why(d.why),
                 sb_router_why(why));
}

TestSuite(router_affinity, .fini = router_fini);

Test(router_affinity, a_connection_is_bound_round_robin_at_its_first_sessionless_message) {
    start(3, SB_AFFINITY_CONNECTION);
    sb_route d = from_client(0, "{\"method\":\"notifications/initialized\"}");
    expect(d, SB_ROUTE_TO_WORKER, 0);
    cr_assert(d.new_binding);
    d = from_client(1, "{\"id\":1,\"method\":\"initialize\"}");
    expect(d, SB_ROUTE_TO_WORKER, 1);
    cr_assert(d.new_binding);
    for (int i = 0; i < 6; i++) {
        char line[64];
        snprintf(line, sizeof line, "{\"id\":%d,\"method\":\"tools/list\"}", 10 + i);
        d = from_client(i % 2, line);
        expect(d, SB_ROUTE_TO_WORKER, i % 2);
        cr_assert(!d.new_binding);
    }
    cr_assert_eq(r.rr_next, 2, "the cursor moved only to bind");
}

Test(router_affinity, sessions_keep_the_spec_routing_in_connection_mode) {
    start(2, SB_AFFINITY_CONNECTION);
    expect(from_client(0, "{\"id\":1,\"method\":\"a\"}"), SB_ROUTE_TO_WORKER, 0);
    /* a new session goes round-robin (6.1.1), not to the bound worker */
    expect(from_client(0, "{\"id\":2,\"method\":\"a\",\"sessionId\":\"s\"}"), SB_ROUTE_TO_WORKER,
           1);
    expect(from_client(0, "{\"method\":\"n\",\"sessionId\":\"s\"}"), SB_ROUTE_TO_WORKER, 1);
}

Test(router_affinity, a_bound_request_whose_id_is_pending_waits) {
    start(2, SB_AFFINITY_CONNECTION);
    expect(from_client(0, "{\"id\":1,\"method\":\"a\"}"), SB_ROUTE_TO_WORKER, 0);
    sb_route d = from_client(0, "{\"id\":1,\"method\":\"a\"}");
    cr_assert_eq(d.action, SB_ROUTE_HOLD, "not moved to the other worker: it is bound");
    expect(from_worker(0, "{\"id\":1,\"result\":{}}"), SB_ROUTE_TO_CLIENT, 0);
    expect(from_client(0, "{\"id\":1,\"method\":\"a\"}"), SB_ROUTE_TO_WORKER, 0);
}

Test(router_affinity, a_connection_whose_worker_stopped_is_not_moved) {
    start(2, SB_AFFINITY_CONNECTION);
    expect(from_client(0, "{\"method\":\"a\"}"), SB_ROUTE_TO_WORKER, 0);
    sb_router_set_running(&r, 0, false);
    expect_drop(from_client(0, "{\"method\":\"a\"}"), SB_WHY_WORKER_DOWN);
    expect_drop(from_client(0, "{\"id\":3,\"method\":\"a\"}"), SB_WHY_WORKER_DOWN);
    cr_assert_eq(r.requests.slots.count, 0);
    /* unbound (the daemon closed it), a new client is bound to a running worker */
    sb_affinity_unbind(&r.affinity, 0);
    expect(from_client(0, "{\"method\":\"a\"}"), SB_ROUTE_TO_WORKER, 1);
}

Test(router_affinity, a_worker_message_without_session_goes_to_its_one_client) {
    start(2, SB_AFFINITY_CONNECTION);
    expect_drop(from_worker(0, "{\"method\":\"notifications/message\"}"), SB_WHY_UNBOUND_WORKER);
    expect(from_client(5, "{\"method\":\"a\"}"), SB_ROUTE_TO_WORKER, 0);
    expect(from_worker(0, "{\"method\":\"notifications/progress\"}"), SB_ROUTE_TO_CLIENT, 5);
    expect_drop(from_worker(1, "{\"method\":\"notifications/message\"}"), SB_WHY_UNBOUND_WORKER);
    /* a response is still routed by its id alone (6.3.1) */
    expect_drop(from_worker(0, "{\"id\":\"x\",\"result\":{}}"), SB_WHY_UNKNOWN_ID);
}

Test(router_affinity, a_worker_request_is_answered_back_to_that_worker) {
    start(2, SB_AFFINITY_CONNECTION);
    expect(from_client(3, "{\"method\":\"a\"}"), SB_ROUTE_TO_WORKER, 0);
    expect(from_worker(0, "{\"id\":0,\"method\":\"roots/list\"}"), SB_ROUTE_TO_CLIENT, 3);
    cr_assert_eq(r.upstream.slots.count, 1);
    expect(from_client(3, "{\"id\":0,\"result\":{\"roots\":[]}}"), SB_ROUTE_TO_WORKER, 0);
    cr_assert_eq(r.upstream.slots.count, 0);
    expect_drop(from_client(3, "{\"id\":0,\"result\":{}}"), SB_WHY_NO_REQUEST);
}

Test(router_affinity, a_new_connection_waits_for_a_worker_rather_than_share_one) {
    start(1, SB_AFFINITY_CONNECTION);
    expect(from_client(0, "{\"method\":\"a\"}"), SB_ROUTE_TO_WORKER, 0);
    sb_route d = from_client(1, "{\"id\":1,\"method\":\"initialize\"}"); /* SB-X-24 */
    cr_assert_eq(d.action, SB_ROUTE_HOLD, "bound beside a live client");
    cr_assert_eq(d.why, SB_WHY_NO_FREE_WORKER);
    cr_assert_eq(r.requests.slots.count, 0, "a held request is not recorded");
    cr_assert_eq(sb_affinity_worker(&r.affinity, 1), SB_AFFINITY_UNBOUND);
    /* with a sessionId, the spec's routing applies at once */
    expect(from_client(1, "{\"id\":2,\"method\":\"a\",\"sessionId\":\"s\"}"), SB_ROUTE_TO_WORKER,
           0);
    /* its worker no longer running (recycled after its client left), it still waits */
    sb_affinity_unbind(&r.affinity, 0);
    sb_router_set_running(&r, 0, false);
    r.recycling = 1;
    cr_assert_eq(from_client(1, "{\"id\":1,\"method\":\"initialize\"}").why, SB_WHY_NO_FREE_WORKER);
    r.recycling = 0;
    sb_router_set_running(&r, 0, true);
    d = from_client(1, "{\"id\":1,\"method\":\"initialize\"}");
    expect(d, SB_ROUTE_TO_WORKER, 0);
    cr_assert(d.new_binding);
}

Test(router_affinity, with_no_worker_running_an_unbound_connection_is_not_held) {
    start(1, SB_AFFINITY_CONNECTION);
    sb_router_set_running(&r, 0, false);
    expect_drop(from_client(0, "{\"id\":1,\"method\":\"a\"}"), SB_WHY_NO_WORKER);
}

/* No routing binds two clients to one worker (SB-X-24); the rule for a
 * worker that has several (SB-X-12) holds for bindings made otherwise. */
Test(router_affinity, a_shared_worker_sends_its_own_messages_to_no_one) {
    start(1, SB_AFFINITY_CONNECTION);
    expect(from_client(0, "{\"method\":\"a\"}"), SB_ROUTE_TO_WORKER, 0);
    sb_affinity_bind(&r.affinity, 1, 0);
    expect(from_client(1, "{\"method\":\"a\"}"), SB_ROUTE_TO_WORKER, 0);
    expect_drop(from_worker(0, "{\"method\":\"notifications/message\"}"), SB_WHY_SHARED_WORKER);
    expect_drop(from_worker(0, "{\"id\":0,\"method\":\"roots/list\"}"), SB_WHY_SHARED_WORKER);
    cr_assert_eq(r.upstream.slots.count, 0);
    /* with a sessionId, the spec's routing still applies */
    expect(from_client(1, "{\"id\":1,\"method\":\"a\",\"sessionId\":\"s\"}"), SB_ROUTE_TO_WORKER,
           0);
    expect(from_worker(0, "{\"method\":\"n\",\"sessionId\":\"s\"}"), SB_ROUTE_TO_CLIENT, 1);
    sb_affinity_unbind(&r.affinity, 0);
    expect(from_worker(0, "{\"method\":\"notifications/message\"}"), SB_ROUTE_TO_CLIENT, 1);
}

Test(router_affinity, exclusive_mode_sends_everything_of_a_connection_to_its_worker) {
    start(3, SB_AFFINITY_EXCLUSIVE);
    sb_affinity_bind(&r.affinity, 0, 2);
    sb_affinity_bind(&r.affinity, 1, 0);
    expect(from_client(0, "{\"id\":1,\"method\":\"a\"}"), SB_ROUTE_TO_WORKER, 2);
    /* new sessions too, never another connection's worker */
    for (int i = 0; i < 4; i++) {
        char line[64];
        snprintf(line, sizeof line, "{\"id\":%d,\"method\":\"a\",\"sessionId\":\"s%d\"}", 10 + i,
                 i);
        expect(from_client(0, line), SB_ROUTE_TO_WORKER, 2);
    }
    expect(from_client(1, "{\"id\":1,\"method\":\"a\",\"sessionId\":\"t\"}"), SB_ROUTE_TO_WORKER,
           0);
    /* an unbound connection has no worker to go to */
    expect_drop(from_client(4, "{\"method\":\"a\"}"), SB_WHY_NO_WORKER);
    expect_drop(from_client(4, "{\"method\":\"a\",\"sessionId\":\"u\"}"), SB_WHY_NO_WORKER);
}

Test(router_affinity, off_by_default) {
    cr_assert_eq(sb_router_init(&r, 2, 8), STDIO_BUS_OK);
    sb_router_set_running(&r, 0, true);
    sb_router_set_running(&r, 1, true);
    expect(from_client(0, "{\"method\":\"a\"}"), SB_ROUTE_TO_WORKER, 0);
    expect(from_client(0, "{\"method\":\"a\"}"), SB_ROUTE_TO_WORKER, 1);
    expect_drop(from_worker(0, "{\"method\":\"notifications/message\"}"), SB_WHY_UNROUTABLE);
}
