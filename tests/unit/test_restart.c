/* Unit tests for the restart policy (src/base/restart.c; spec 7.1.3, SB-I-9,
 * SB-I-10): exponential backoff with a cap, and no more than max_restarts
 * restarts inside a sliding restart_window_sec. Time is an argument, so
 * nothing here waits. */
#include <criterion/criterion.h>

#include <stdint.h>

#include "bus_limits.h"
#include "restart.h"
#include "status.h"

static sb_restart_history h;

static void fini(void) {
    sb_restart_fini(&h);
}

static sb_limits limits(int max_restarts, int window_sec, long backoff_ms, long backoff_max_ms) {
    sb_limits l = {
        .max_input_buffer = SB_DEFAULT_MAX_INPUT_BUFFER,
        .max_output_queue = SB_DEFAULT_MAX_OUTPUT_QUEUE,
        .max_restarts = max_restarts,
        .restart_window_sec = window_sec,
        .drain_timeout_sec = SB_DEFAULT_DRAIN_TIMEOUT_SEC,
        .backpressure_timeout_sec = SB_DEFAULT_BACKPRESSURE_TIMEOUT_SEC,
        .restart_backoff_ms = backoff_ms,
        .restart_backoff_max_ms = backoff_max_ms,
    };
    return l;
}

TestSuite(restart, .fini = fini);

Test(restart, backoff_doubles_then_caps) {
    sb_limits l = limits(10, 3600, 100, 1000);
    cr_assert_eq(sb_restart_init(&h, l.max_restarts), STDIO_BUS_OK);
    long expected[] = {100, 200, 400, 800, 1000, 1000, 1000};
    for (int i = 0; i < 7; i++) {
        long delay = sb_restart_decide(&h, &l, 1000 + i * 10);
        cr_assert_eq(delay, expected[i], "restart %d: delay %ld, expected %ld", i, delay,
                     expected[i]);
    }
}

Test(restart, cap_that_is_not_a_power_of_two_multiple_is_exact) {
    sb_limits l = limits(10, 3600, 300, 1000);
    cr_assert_eq(sb_restart_init(&h, l.max_restarts), STDIO_BUS_OK);
    cr_assert_eq(sb_restart_decide(&h, &l, 0), 300);
    cr_assert_eq(sb_restart_decide(&h, &l, 1), 600);
    cr_assert_eq(sb_restart_decide(&h, &l, 2), 1000);
    cr_assert_eq(sb_restart_decide(&h, &l, 3), 1000);
}

Test(restart, default_schedule_starts_at_one_second_and_caps_at_thirty) {
    sb_limits l = limits(100, 60, SB_DEFAULT_RESTART_BACKOFF_MS, SB_DEFAULT_RESTART_BACKOFF_MAX_MS);
    cr_assert_eq(sb_restart_init(&h, l.max_restarts), STDIO_BUS_OK);
    long expected[] = {1000, 2000, 4000, 8000, 16000, 30000, 30000};
    for (int i = 0; i < 7; i++)
        cr_assert_eq(sb_restart_decide(&h, &l, i), expected[i], "restart %d", i);
}

Test(restart, huge_restart_count_does_not_overflow_the_delay) {
    sb_limits l = limits(200, 86400, 1, 86400000);
    cr_assert_eq(sb_restart_init(&h, l.max_restarts), STDIO_BUS_OK);
    long delay = 0;
    for (int i = 0; i < 200; i++) {
        delay = sb_restart_decide(&h, &l, i);
        cr_assert(delay >= 1 && delay <= 86400000, "restart %d: delay %ld", i, delay);
    }
    cr_assert_eq(delay, 86400000);
}

Test(restart, exactly_max_restarts_are_allowed_in_a_window) {
    sb_limits l = limits(5, 60, 10, 10000);
    cr_assert_eq(sb_restart_init(&h, l.max_restarts), STDIO_BUS_OK);
    for (int i = 0; i < 5; i++) {
        cr_assert_eq(sb_restart_recent(&h, &l, i * 1000), i);
        cr_assert_geq(sb_restart_decide(&h, &l, i * 1000), 0, "restart %d refused", i);
    }
    cr_assert_eq(sb_restart_recent(&h, &l, 5000), 5);
    cr_assert_eq(sb_restart_decide(&h, &l, 5000), STDIO_BUS_EFULL);
    /* A refusal is not recorded as a restart. */
    cr_assert_eq(sb_restart_recent(&h, &l, 5000), 5);
    cr_assert_eq(sb_restart_decide(&h, &l, 59000), STDIO_BUS_EFULL);
}

Test(restart, max_restarts_zero_never_restarts) {
    sb_limits l = limits(0, 60, 10, 100);
    cr_assert_eq(sb_restart_init(&h, 0), STDIO_BUS_OK);
    cr_assert_eq(sb_restart_decide(&h, &l, 0), STDIO_BUS_EFULL);
    cr_assert_eq(sb_restart_decide(&h, &l, 1000000000), STDIO_BUS_EFULL);
    cr_assert_eq(sb_restart_recent(&h, &l, 0), 0);
}

Test(restart, old_restarts_expire_as_the_window_slides) {
    /* max 3 in 10 s: restarts at t = 0, 1, 2 s fill the window. */
    sb_limits l = limits(3, 10, 100, 100000);
    cr_assert_eq(sb_restart_init(&h, l.max_restarts), STDIO_BUS_OK);
    cr_assert_eq(sb_restart_decide(&h, &l, 0), 100);
    cr_assert_eq(sb_restart_decide(&h, &l, 1000), 200);
    cr_assert_eq(sb_restart_decide(&h, &l, 2000), 400);
    cr_assert_eq(sb_restart_decide(&h, &l, 9999), STDIO_BUS_EFULL);
    /* Just after t = 0 leaves the window, one restart is allowed again, and
     * its backoff counts only the two restarts still inside. */
    cr_assert_eq(sb_restart_recent(&h, &l, 10001), 2);
    cr_assert_eq(sb_restart_decide(&h, &l, 10001), 400);
    cr_assert_eq(sb_restart_decide(&h, &l, 10002), STDIO_BUS_EFULL);
    /* t = 1 s leaves at 11 s. */
    cr_assert_eq(sb_restart_decide(&h, &l, 11001), 400);
    /* Long after everything expired, the schedule starts over. */
    cr_assert_eq(sb_restart_recent(&h, &l, 100000), 0);
    cr_assert_eq(sb_restart_decide(&h, &l, 100000), 100);
}

Test(restart, a_restart_exactly_one_window_ago_no_longer_counts) {
    sb_limits l = limits(1, 10, 100, 1000);
    cr_assert_eq(sb_restart_init(&h, l.max_restarts), STDIO_BUS_OK);
    cr_assert_eq(sb_restart_decide(&h, &l, 5000), 100);
    cr_assert_eq(sb_restart_decide(&h, &l, 14999), STDIO_BUS_EFULL);
    cr_assert_eq(sb_restart_recent(&h, &l, 15000), 0);
    cr_assert_eq(sb_restart_decide(&h, &l, 15000), 100);
}

Test(restart, ring_keeps_the_newest_restarts_over_many_cycles) {
    /* Restarts spaced just over window / max apart never hit the limit;
     * the ring must always evict the oldest, not an arbitrary slot. */
    sb_limits l = limits(4, 4, 1, 1000);
    cr_assert_eq(sb_restart_init(&h, l.max_restarts), STDIO_BUS_OK);
    for (int i = 0; i < 1000; i++) {
        int64_t now = (int64_t)i * 1001;
        cr_assert_geq(sb_restart_decide(&h, &l, now), 0, "restart %d at %lld refused", i,
                      (long long)now);
        cr_assert_leq(sb_restart_recent(&h, &l, now), 4);
    }
    /* Four restarts in quick succession after that: the fifth is refused. */
    int64_t t = 2000000;
    for (int i = 0; i < 4; i++)
        cr_assert_geq(sb_restart_decide(&h, &l, t + i), 0);
    cr_assert_eq(sb_restart_decide(&h, &l, t + 4), STDIO_BUS_EFULL);
}

Test(restart, monotonic_times_near_zero_and_negative_work) {
    /* CLOCK_MONOTONIC may start near zero; a window reaching before it must
     * not count the empty slots. */
    sb_limits l = limits(2, 60, 50, 1000);
    cr_assert_eq(sb_restart_init(&h, l.max_restarts), STDIO_BUS_OK);
    cr_assert_eq(sb_restart_recent(&h, &l, 0), 0);
    cr_assert_eq(sb_restart_decide(&h, &l, -5), 50);
    cr_assert_eq(sb_restart_decide(&h, &l, 0), 100);
    cr_assert_eq(sb_restart_decide(&h, &l, 1), STDIO_BUS_EFULL);
}

Test(restart, fini_releases_and_resets) {
    cr_assert_eq(sb_restart_init(&h, 3), STDIO_BUS_OK);
    cr_assert_not_null(h.times);
    cr_assert_eq(h.cap, 3);
    sb_restart_fini(&h);
    cr_assert_null(h.times);
    cr_assert_eq(h.cap, 0);
}
