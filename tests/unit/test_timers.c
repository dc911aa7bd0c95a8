/* Unit tests for the timer set (src/os/timers.c): the next deadline and the
 * order in which due timers come out. */
#include <criterion/criterion.h>

#include <stdint.h>

#include "status.h"
#include "timers.h"

static sb_timers t;

static void init(void) {
    cr_assert_eq(sb_timers_init(&t, 16), STDIO_BUS_OK);
}

static void fini(void) {
    sb_timers_fini(&t);
}

TestSuite(timers, .init = init, .fini = fini);

Test(timers, empty_set_has_no_deadline_and_nothing_due) {
    cr_assert_eq(sb_timers_next(&t), INT64_MAX);
    cr_assert_eq(sb_timers_take(&t, INT64_MAX - 1), STDIO_BUS_EAGAIN);
}

Test(timers, next_deadline_is_the_earliest_armed) {
    sb_timers_arm(&t, 3, 500);
    sb_timers_arm(&t, 7, 200);
    sb_timers_arm(&t, 1, 900);
    cr_assert_eq(sb_timers_next(&t), 200);
    sb_timers_disarm(&t, 7);
    cr_assert_eq(sb_timers_next(&t), 500);
}

Test(timers, rearming_replaces_the_deadline) {
    sb_timers_arm(&t, 2, 100);
    sb_timers_arm(&t, 2, 700);
    cr_assert_eq(sb_timers_next(&t), 700);
    sb_timers_arm(&t, 2, 50);
    cr_assert_eq(sb_timers_next(&t), 50);
    cr_assert_eq(t.count, 1, "one timer, armed once");
}

Test(timers, nothing_is_due_before_its_deadline) {
    sb_timers_arm(&t, 5, 1000);
    cr_assert_eq(sb_timers_take(&t, 999), STDIO_BUS_EAGAIN);
    cr_assert(sb_timers_armed(&t, 5));
    cr_assert_eq(sb_timers_take(&t, 1000), 5);
    cr_assert_not(sb_timers_armed(&t, 5), "a taken timer is disarmed");
    cr_assert_eq(sb_timers_next(&t), INT64_MAX);
}

Test(timers, due_timers_come_out_earliest_first_lower_id_on_a_tie) {
    sb_timers_arm(&t, 9, 30);
    sb_timers_arm(&t, 4, 10);
    sb_timers_arm(&t, 6, 20);
    sb_timers_arm(&t, 2, 20);
    sb_timers_arm(&t, 8, 99); /* not due */
    int order[4];
    for (int i = 0; i < 4; i++)
        order[i] = sb_timers_take(&t, 50);
    cr_assert_eq(order[0], 4);
    cr_assert_eq(order[1], 2);
    cr_assert_eq(order[2], 6);
    cr_assert_eq(order[3], 9);
    cr_assert_eq(sb_timers_take(&t, 50), STDIO_BUS_EAGAIN);
    cr_assert_eq(sb_timers_next(&t), 99);
}

Test(timers, disarming_keeps_the_others) {
    for (int id = 0; id < 16; id++)
        sb_timers_arm(&t, id, 1000 + id);
    for (int id = 0; id < 16; id += 2)
        sb_timers_disarm(&t, id);
    sb_timers_disarm(&t, 0); /* twice: nothing */
    cr_assert_eq(t.count, 8);
    cr_assert_eq(sb_timers_next(&t), 1001);
    for (int id = 1; id < 16; id += 2)
        cr_assert_eq(sb_timers_take(&t, 5000), id);
}

Test(timers, deadline_is_that_of_an_armed_timer_else_zero) {
    cr_assert_eq(sb_timers_deadline(&t, 3), 0);
    sb_timers_arm(&t, 3, 70);
    cr_assert_eq(sb_timers_deadline(&t, 3), 70);
    sb_timers_disarm(&t, 3);
    cr_assert_eq(sb_timers_deadline(&t, 3), 0, "a disarmed timer has no deadline");
}
