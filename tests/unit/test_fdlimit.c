/* Unit tests for the descriptor budget (src/os/fdlimit.c; issue 14): the soft
 * RLIMIT_NOFILE is raised to what MAX_CONNECTIONS clients and the workers
 * need, never lowered, never above the hard limit. */
#include <criterion/criterion.h>

#include "bus_limits.h"
#include "fdlimit.h"

Test(fdlimit, need_counts_clients_three_pipes_per_worker_and_a_margin) {
    cr_assert_eq(sb_fdlimit_need(0), STDIO_BUS_MAX_CONNECTIONS + SB_FDLIMIT_MARGIN);
    cr_assert_eq(sb_fdlimit_need(64), STDIO_BUS_MAX_CONNECTIONS + 192 + SB_FDLIMIT_MARGIN);
}

Test(fdlimit, low_soft_limit_is_raised_to_the_need) {
    cr_assert_eq(sb_fdlimit_target(64, 4096, 1100), 1100);
    cr_assert_eq(sb_fdlimit_target(1024, RLIM_INFINITY, 1100), 1100);
}

Test(fdlimit, hard_limit_caps_the_raise) {
    cr_assert_eq(sb_fdlimit_target(64, 512, 1100), 512);
    cr_assert_eq(sb_fdlimit_target(40, 40, 1100), 40);
}

Test(fdlimit, enough_is_left_alone) {
    cr_assert_eq(sb_fdlimit_target(1100, 4096, 1100), 1100);
    cr_assert_eq(sb_fdlimit_target(65536, 1048576, 1100), 65536,
                 "a higher soft limit is never lowered");
    cr_assert_eq(sb_fdlimit_target(RLIM_INFINITY, RLIM_INFINITY, 1100), RLIM_INFINITY);
}
