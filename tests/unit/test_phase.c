/* Unit tests for the daemon's phase and its one writer (src/bus/phase.c):
 * each phase with a deadline has it in one field and one timer, and a
 * new phase replaces the last one's. */
#include <criterion/criterion.h>

#include "bus_limits.h"
#include "log.h"
#include "phase.h"
#include "status.h"

static sb_bus d;
static sb_pool_config pool = {.id = "p", .instances = 1};
static sb_config cfg = {.pools = &pool, .pool_count = 1, .worker_count = 1};
static sb_options opt = {.mode = SB_MODE_STDIO};

static void setup(void) {
    sb_log_set_level(SB_LOG_ERROR);
    cr_assert_eq(sb_bus_init(&d, &cfg, &opt), STDIO_BUS_OK);
}

static void teardown(void) {
    sb_worker_fini(&d.workers[0]);
    sb_bus_fini(&d);
}

TestSuite(phase, .init = setup, .fini = teardown, .timeout = 10);

Test(phase, starts_serving_with_no_deadline) {
    cr_assert_eq(d.phase, SB_PHASE_SERVING);
    cr_assert_eq(sb_timers_next(&d.timers), INT64_MAX);
}

/* SB-I-5 then 10.2: stdin EOF lingers until its deadline, shutdown drains
 * until its own; the timer always holds the current phase's deadline. */
Test(phase, each_phase_has_its_deadline_in_one_timer) {
    sb_phase_enter(&d, SB_PHASE_LINGER, 5000);
    cr_assert_eq(d.phase, SB_PHASE_LINGER);
    cr_assert_eq(sb_timers_deadline(&d.timers, SB_TIMER_PHASE), 5000);

    sb_phase_enter(&d, SB_PHASE_DRAINING, 9000);
    cr_assert_eq(d.phase, SB_PHASE_DRAINING);
    cr_assert_eq(sb_timers_deadline(&d.timers, SB_TIMER_PHASE), 9000, "replaced, not added");
    cr_assert_eq(d.timers.count, 1);

    sb_phase_enter(&d, SB_PHASE_DONE, 0);
    cr_assert_eq(d.phase, SB_PHASE_DONE);
    cr_assert_not(sb_timers_armed(&d.timers, SB_TIMER_PHASE), "DONE has no deadline");
}

/* SB-10.2-4: past drain_timeout_sec the workers are SIGKILLed and the
 * daemon waits SB_KILL_REAP_MS at most for their exits, never in waitpid(). */
Test(phase, killing_has_its_own_deadline_after_draining) {
    sb_phase_enter(&d, SB_PHASE_DRAINING, 9000);
    sb_phase_enter(&d, SB_PHASE_KILLING, 9000 + SB_KILL_REAP_MS);
    cr_assert_eq(d.phase, SB_PHASE_KILLING);
    cr_assert_eq(sb_timers_deadline(&d.timers, SB_TIMER_PHASE), 9000 + SB_KILL_REAP_MS);
    sb_phase_enter(&d, SB_PHASE_DONE, 0);
    cr_assert_not(sb_timers_armed(&d.timers, SB_TIMER_PHASE));
    cr_assert_str_eq(sb_phase_name(SB_PHASE_KILLING), "KILLING");
}

/* The stdio client left while lingering: nothing left to wait for. */
Test(phase, linger_can_be_cut_short) {
    sb_phase_enter(&d, SB_PHASE_LINGER, 5000);
    sb_phase_enter(&d, SB_PHASE_LINGER, 1000);
    cr_assert_eq(sb_timers_deadline(&d.timers, SB_TIMER_PHASE), 1000);
}

Test(phase, names) {
    cr_assert_str_eq(sb_phase_name(SB_PHASE_DRAINING), "DRAINING");
}
