/* Unit tests for the strays' verdict (src/os/strays.c, SB-X-22): the kernel's
 * list of the daemon's children read as it comes, cut reads included, and
 * which children are killed: not a running worker, nor in a running
 * worker's process group. The last test runs the OS side (subreaper.c) on
 * a real orphan. */
#include <criterion/criterion.h>

#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "status.h"
#include "strays.h"
#include "subreaper.h"

static int parse(const char *text, pid_t *out, int cap) {
    return sb_strays_parse(text, strlen(text), out, cap);
}

Test(strays, children_file_is_pids_each_followed_by_a_space) {
    pid_t p[4];
    cr_assert_eq(parse("", p, 4), 0);
    cr_assert_eq(parse("12 345 6789 ", p, 4), 3);
    cr_assert_eq(p[0], 12);
    cr_assert_eq(p[1], 345);
    cr_assert_eq(p[2], 6789);
}

Test(strays, a_number_cut_by_a_short_read_is_left_for_the_next_look) {
    pid_t p[4];
    cr_assert_eq(parse("12 34", p, 4), 1);
    cr_assert_eq(p[0], 12);
}

Test(strays, more_pids_than_room_is_efull_with_the_first_kept) {
    pid_t p[2];
    cr_assert_eq(parse("1 2 3 ", p, 2), STDIO_BUS_EFULL);
    cr_assert_eq(p[0], 1);
    cr_assert_eq(p[1], 2);
}

Test(strays, text_that_is_not_a_children_file_is_an_error) {
    pid_t p[4];
    cr_assert_eq(parse("12\n", p, 4), STDIO_BUS_ERR);
    cr_assert_eq(parse("a ", p, 4), STDIO_BUS_ERR);
    cr_assert_eq(parse("0 ", p, 4), STDIO_BUS_ERR);
    cr_assert_eq(parse("1  2 ", p, 4), STDIO_BUS_ERR);
    cr_assert_eq(parse("99999999999 ", p, 4), STDIO_BUS_ERR);
}

/* Workers 100 and 200 run, each leading its group (SB-X-18). */
Test(strays, what_left_every_running_workers_group_is_doomed) {
    const pid_t workers[] = {100, 200};
    sb_stray kids[] = {
        {100, 100}, /* a worker */
        {101, 100}, /* orphaned in worker 100's group: its group goes with it */
        {150, 150}, /* left its group (setsid) and lost its parent */
        {200, 200}, /* a worker */
        {160, 142}, /* a double fork's grandchild in a dead leader's group */
        {300, 99},  /* in the group of a worker that was reaped */
    };
    int strays = -1;
    int n = sb_strays_doomed(kids, 6, workers, 2, &strays);
    cr_assert_eq(strays, 4, "every child but the two workers");
    cr_assert_eq(n, 3);
    cr_assert_eq(kids[0].pid, 150);
    cr_assert_eq(kids[1].pid, 160);
    cr_assert_eq(kids[2].pid, 300);
}

Test(strays, with_no_worker_running_every_child_is_doomed) {
    sb_stray kids[] = {{7, 7}, {8, 7}};
    int strays;
    cr_assert_eq(sb_strays_doomed(kids, 2, NULL, 0, &strays), 2);
    cr_assert_eq(strays, 2);
}

/* The OS side: a child that double-forks comes back to us (a subreaper),
 * is listed with its group, and is killed. The test process becomes a
 * subreaper for good: it is one test binary run on its own (--jobs 1). */
Test(strays, a_double_forked_grandchild_comes_back_listed_and_is_killed) {
    cr_assert_eq(sb_subreaper_start(), STDIO_BUS_OK);
    int p[2];
    cr_assert_eq(pipe(p), 0);
    pid_t mid = fork();
    if (mid == 0) {
        setsid();
        pid_t g = fork();
        if (g == 0) {
            pid_t self = getpid();
            if (write(p[1], &self, sizeof self) != sizeof self)
                _exit(1);
            for (;;)
                pause();
        }
        _exit(0);
    }
    pid_t grandchild;
    cr_assert_eq(read(p[0], &grandchild, sizeof grandchild), (ssize_t)sizeof grandchild);
    cr_assert_eq(waitpid(mid, NULL, 0), mid);
    sb_stray kids[8];
    bool more;
    int n = sb_subreaper_children(kids, 8, &more);
    cr_assert_eq(n, 1, "the grandchild is ours now");
    cr_assert_not(more);
    cr_assert_eq(kids[0].pid, grandchild);
    cr_assert_eq(kids[0].pgid, mid, "its group is its dead parent's session");
    sb_subreaper_kill(&kids[0]);
    int status;
    cr_assert_eq(waitpid(grandchild, &status, 0), grandchild);
    cr_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    cr_assert_eq(sb_subreaper_children(kids, 8, &more), 0);
    close(p[0]);
    close(p[1]);
}
