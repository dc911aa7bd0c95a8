/* Unit tests for the poll(2) event loop (src/os/loop.c). Every wait has a
 * deadline: a test that expects an event waits at most WAIT_MS for it. */
#include <criterion/criterion.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "loop.h"
#include "status.h"

#define WAIT_MS 5000

static sb_loop loop;

static void fini(void) {
    sb_loop_fini(&loop);
}

TestSuite(loop, .fini = fini);

typedef struct {
    int calls;
    int fd;
    short revents;
    void *data;
    sb_loop *loop;
} record;

static void on_event(sb_loop *l, void *data, int fd, short revents) {
    record *r = data;
    r->loop = l;
    r->calls++;
    r->fd = fd;
    r->revents = revents;
    r->data = data;
}

static void make_pipe(int fds[2]) {
    cr_assert_eq(pipe2(fds, O_NONBLOCK | O_CLOEXEC), 0, "pipe2: %s", strerror(errno));
}

static void make_readable(int wr) {
    cr_assert_eq(write(wr, "x", 1), 1);
}

static int64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- add / set / get / del -------------------------------------------- */

Test(loop, readable_fd_dispatches_its_handler_with_its_data) {
    int p[2];
    record rec = {0};
    make_pipe(p);
    cr_assert_eq(sb_loop_init(&loop), STDIO_BUS_OK);
    cr_assert_eq(sb_loop_add(&loop, p[0], POLLIN, on_event, &rec), STDIO_BUS_OK);
    cr_assert_eq(sb_loop_get(&loop, p[0]), POLLIN);
    make_readable(p[1]);
    cr_assert_eq(sb_loop_run_once(&loop, WAIT_MS), 1);
    cr_assert_eq(rec.calls, 1);
    cr_assert_eq(rec.fd, p[0]);
    cr_assert(rec.revents & POLLIN);
    cr_assert_eq(rec.data, &rec);
    cr_assert_eq(rec.loop, &loop, "a handler gets its loop (sb_bus_of_loop)");
    close(p[0]);
    close(p[1]);
}

Test(loop, level_triggered_until_the_data_is_read) {
    int p[2];
    record rec = {0};
    char c;
    make_pipe(p);
    sb_loop_init(&loop);
    cr_assert_eq(sb_loop_add(&loop, p[0], POLLIN, on_event, &rec), STDIO_BUS_OK);
    make_readable(p[1]);
    cr_assert_eq(sb_loop_run_once(&loop, WAIT_MS), 1);
    cr_assert_eq(sb_loop_run_once(&loop, 0), 1);
    cr_assert_eq(rec.calls, 2);
    cr_assert_eq(read(p[0], &c, 1), 1);
    cr_assert_eq(sb_loop_run_once(&loop, 0), 0);
    cr_assert_eq(rec.calls, 2);
    close(p[0]);
    close(p[1]);
}

Test(loop, set_changes_the_interest_mask) {
    int p[2];
    record rec = {0};
    make_pipe(p);
    sb_loop_init(&loop);
    cr_assert_eq(sb_loop_add(&loop, p[1], 0, on_event, &rec), STDIO_BUS_OK);
    cr_assert_eq(sb_loop_run_once(&loop, 0), 0, "an empty mask waits for nothing");
    cr_assert_eq(rec.calls, 0);

    sb_loop_set(&loop, p[1], POLLOUT);
    cr_assert_eq(sb_loop_get(&loop, p[1]), POLLOUT);
    cr_assert_eq(sb_loop_run_once(&loop, WAIT_MS), 1);
    cr_assert_eq(rec.calls, 1);
    cr_assert(rec.revents & POLLOUT);

    sb_loop_set(&loop, p[1], 0);
    cr_assert_eq(sb_loop_get(&loop, p[1]), 0);
    cr_assert_eq(sb_loop_run_once(&loop, 0), 0);
    cr_assert_eq(rec.calls, 1);
    close(p[0]);
    close(p[1]);
}

Test(loop, empty_mask_still_reports_hangup) {
    int p[2];
    record rec = {0};
    make_pipe(p);
    sb_loop_init(&loop);
    cr_assert_eq(sb_loop_add(&loop, p[0], 0, on_event, &rec), STDIO_BUS_OK);
    close(p[1]);
    cr_assert_eq(sb_loop_run_once(&loop, WAIT_MS), 1);
    cr_assert_eq(rec.calls, 1);
    cr_assert(rec.revents & POLLHUP);
    close(p[0]);
}

Test(loop, deleted_fd_is_not_dispatched) {
    int p[2];
    record rec = {0};
    make_pipe(p);
    sb_loop_init(&loop);
    cr_assert_eq(sb_loop_add(&loop, p[0], POLLIN, on_event, &rec), STDIO_BUS_OK);
    make_readable(p[1]);
    sb_loop_del(&loop, p[0]);
    cr_assert_eq(sb_loop_get(&loop, p[0]), 0);
    cr_assert_eq(loop.count, 0);
    cr_assert_eq(sb_loop_run_once(&loop, 0), 0);
    cr_assert_eq(rec.calls, 0);
    /* Deleting again, or an fd never seen, is a no-op. */
    sb_loop_del(&loop, p[0]);
    sb_loop_del(&loop, 100000);
    cr_assert_eq(loop.count, 0);
    /* And the fd can be registered again. */
    cr_assert_eq(sb_loop_add(&loop, p[0], POLLIN, on_event, &rec), STDIO_BUS_OK);
    cr_assert_eq(sb_loop_run_once(&loop, WAIT_MS), 1);
    cr_assert_eq(rec.calls, 1);
    close(p[0]);
    close(p[1]);
}

Test(loop, set_and_get_on_an_unregistered_fd_are_harmless) {
    sb_loop_init(&loop);
    sb_loop_set(&loop, 3, POLLIN);
    sb_loop_set(&loop, 100000, POLLIN);
    cr_assert_eq(sb_loop_get(&loop, 3), 0);
    cr_assert_eq(sb_loop_get(&loop, 100000), 0);
    cr_assert_eq(loop.count, 0);
}

/* ---- many fds: slot growth and dense-array swaps ---------------------- */

#define MANY 150

Test(loop, many_fds_each_dispatch_once_and_deletes_keep_the_rest_intact) {
    static int pipes[MANY][2];
    static record recs[MANY];
    static bool consumed[MANY];
    sb_loop_init(&loop);
    for (int i = 0; i < MANY; i++) {
        make_pipe(pipes[i]);
        cr_assert_eq(sb_loop_add(&loop, pipes[i][0], POLLIN, on_event, &recs[i]), STDIO_BUS_OK);
    }
    cr_assert_gt(pipes[MANY - 1][0], 64, "fds should exceed the first slot allocation");
    /* Delete every third: each delete moves the last dense entry. */
    for (int i = 0; i < MANY; i += 3)
        sb_loop_del(&loop, pipes[i][0]);
    for (int i = 0; i < MANY; i++)
        make_readable(pipes[i][1]);
    int dispatched = 0;
    for (int rounds = 0; dispatched < MANY - MANY / 3; rounds++) {
        cr_assert_lt(rounds, 10);
        int n = sb_loop_run_once(&loop, WAIT_MS);
        cr_assert_gt(n, 0);
        dispatched += n;
        for (int i = 0; i < MANY; i++) { /* consume so nothing fires twice */
            char c;
            if (recs[i].calls && !consumed[i]) {
                cr_assert_eq(read(pipes[i][0], &c, 1), 1);
                consumed[i] = true;
            }
        }
    }
    for (int i = 0; i < MANY; i++) {
        cr_assert_eq(recs[i].calls, i % 3 ? 1 : 0, "fd #%d fired %d times", i, recs[i].calls);
        if (recs[i].calls)
            cr_assert_eq(recs[i].fd, pipes[i][0], "handler %d got another fd", i);
    }
    for (int i = 0; i < MANY; i++) {
        close(pipes[i][0]);
        close(pipes[i][1]);
    }
}

/* ---- changes made by a handler during dispatch ------------------------ */

typedef struct {
    sb_loop *loop;
    int own_fd;
    int other_fd;
    int calls;
} deleter;

static void delete_other(sb_loop *l, void *data, int fd, short revents) {
    cr_assert_eq(l, &loop, "a handler gets its loop");
    (void)revents;
    deleter *d = data;
    cr_assert_eq(fd, d->own_fd);
    d->calls++;
    sb_loop_del(d->loop, d->other_fd);
}

Test(loop, handler_removed_during_dispatch_does_not_fire) {
    /* Both fds are ready in the same poll; whichever handler runs first
     * removes the other, which must then not run. */
    int a[2], b[2];
    make_pipe(a);
    make_pipe(b);
    sb_loop_init(&loop);
    deleter da = {&loop, a[0], b[0], 0}, db = {&loop, b[0], a[0], 0};
    cr_assert_eq(sb_loop_add(&loop, a[0], POLLIN, delete_other, &da), STDIO_BUS_OK);
    cr_assert_eq(sb_loop_add(&loop, b[0], POLLIN, delete_other, &db), STDIO_BUS_OK);
    make_readable(a[1]);
    make_readable(b[1]);
    struct pollfd both[2] = {{a[0], POLLIN, 0}, {b[0], POLLIN, 0}};
    cr_assert_eq(poll(both, 2, WAIT_MS), 2, "both fds must be ready before dispatch");
    int n = sb_loop_run_once(&loop, WAIT_MS);
    cr_assert_eq(da.calls + db.calls, 1, "a removed handler fired (a %d, b %d)", da.calls,
                 db.calls);
    cr_assert_eq(n, 1, "run_once reports %d events dispatched, but 1 handler ran", n);
    close(a[0]);
    close(a[1]);
    close(b[0]);
    close(b[1]);
}

typedef struct {
    sb_loop *loop;
    int victim_fd; /* closed and replaced by a fresh, empty pipe */
    int fresh_wr;  /* write end of the fresh pipe */
    record *fresh; /* the new owner's record */
    int calls;
} replacer;

static void replace_other(sb_loop *l, void *data, int fd, short revents) {
    cr_assert_eq(l, &loop, "a handler gets its loop");
    (void)fd;
    (void)revents;
    replacer *r = data;
    r->calls++;
    if (r->calls > 1)
        return;
    /* The victim's owner goes away and a new connection reuses its fd
     * number, as accept() would hand out the lowest free fd. */
    sb_loop_del(r->loop, r->victim_fd);
    int fresh[2];
    make_pipe(fresh);
    cr_assert_eq(dup3(fresh[0], r->victim_fd, O_CLOEXEC), r->victim_fd);
    close(fresh[0]);
    r->fresh_wr = fresh[1];
    cr_assert_eq(sb_loop_add(r->loop, r->victim_fd, POLLIN, on_event, r->fresh), STDIO_BUS_OK);
}

Test(loop, re_registered_fd_does_not_get_the_stale_event) {
    int a[2], b[2];
    record victim = {0}, fresh = {0};
    make_pipe(a);
    make_pipe(b);
    sb_loop_init(&loop);
    replacer rep = {&loop, b[0], -1, &fresh, 0};
    /* Dispatch follows registration order: a's handler runs first and
     * hands b's fd number to a new owner while b's event is still due. */
    cr_assert_eq(sb_loop_add(&loop, a[0], POLLIN, replace_other, &rep), STDIO_BUS_OK);
    cr_assert_eq(sb_loop_add(&loop, b[0], POLLIN, on_event, &victim), STDIO_BUS_OK);
    make_readable(a[1]);
    make_readable(b[1]);
    struct pollfd both[2] = {{a[0], POLLIN, 0}, {b[0], POLLIN, 0}};
    cr_assert_eq(poll(both, 2, WAIT_MS), 2);
    sb_loop_run_once(&loop, WAIT_MS);
    cr_assert_eq(rep.calls, 1);
    cr_assert_eq(victim.calls, 0, "the old owner ran after being removed");
    cr_assert_eq(fresh.calls, 0, "the new owner got the old owner's event");

    /* The new pipe is empty: nothing for the new owner until it is written. */
    char c;
    cr_assert_eq(read(a[0], &c, 1), 1);
    cr_assert_eq(sb_loop_run_once(&loop, 0), 0);
    cr_assert_eq(fresh.calls, 0);
    make_readable(rep.fresh_wr);
    cr_assert_eq(sb_loop_run_once(&loop, WAIT_MS), 1);
    cr_assert_eq(fresh.calls, 1);
    cr_assert_eq(fresh.fd, b[0]);
    close(a[0]);
    close(a[1]);
    close(b[0]);
    close(b[1]);
    close(rep.fresh_wr);
}

static void reregister_self(sb_loop *l, void *data, int fd, short revents) {
    cr_assert_eq(l, &loop, "a handler gets its loop");
    (void)revents;
    replacer *r = data;
    r->calls++;
    sb_loop_del(r->loop, fd);
    cr_assert_eq(sb_loop_add(r->loop, fd, POLLIN, on_event, r->fresh), STDIO_BUS_OK);
}

Test(loop, handler_may_unregister_and_reregister_its_own_fd) {
    int p[2];
    record next = {0};
    make_pipe(p);
    sb_loop_init(&loop);
    replacer self = {&loop, p[0], -1, &next, 0};
    cr_assert_eq(sb_loop_add(&loop, p[0], POLLIN, reregister_self, &self), STDIO_BUS_OK);
    make_readable(p[1]);
    cr_assert_eq(sb_loop_run_once(&loop, WAIT_MS), 1);
    cr_assert_eq(self.calls, 1);
    cr_assert_eq(next.calls, 0);
    /* The byte is still there: the new handler sees it on the next round. */
    cr_assert_eq(sb_loop_run_once(&loop, WAIT_MS), 1);
    cr_assert_eq(self.calls, 1);
    cr_assert_eq(next.calls, 1);
    close(p[0]);
    close(p[1]);
}

typedef struct {
    sb_loop *loop;
    int calls;
    int added[2 * MANY];
    int added_count;
} adder;

static void add_many(sb_loop *l, void *data, int fd, short revents) {
    cr_assert_eq(l, &loop, "a handler gets its loop");
    (void)fd;
    (void)revents;
    adder *a = data;
    if (a->calls++)
        return;
    /* Enough registrations to reallocate every array during dispatch. */
    for (int i = 0; i < MANY; i++) {
        int p[2];
        make_pipe(p);
        a->added[a->added_count++] = p[0];
        a->added[a->added_count++] = p[1];
        cr_assert_eq(sb_loop_add(a->loop, p[0], POLLIN, on_event, NULL), STDIO_BUS_OK);
    }
}

Test(loop, registrations_during_dispatch_do_not_lose_pending_events) {
    int a[2], b[2];
    record rb = {0};
    make_pipe(a);
    make_pipe(b);
    sb_loop_init(&loop);
    adder ad = {.loop = &loop};
    cr_assert_eq(sb_loop_add(&loop, a[0], POLLIN, add_many, &ad), STDIO_BUS_OK);
    cr_assert_eq(sb_loop_add(&loop, b[0], POLLIN, on_event, &rb), STDIO_BUS_OK);
    make_readable(a[1]);
    make_readable(b[1]);
    struct pollfd both[2] = {{a[0], POLLIN, 0}, {b[0], POLLIN, 0}};
    cr_assert_eq(poll(both, 2, WAIT_MS), 2);
    cr_assert_eq(sb_loop_run_once(&loop, WAIT_MS), 2);
    cr_assert_eq(ad.calls, 1);
    cr_assert_eq(rb.calls, 1, "the event after the growing handler was lost");
    cr_assert_eq(rb.fd, b[0]);
    cr_assert_eq(loop.count, 2 + MANY);
    for (int i = 0; i < ad.added_count; i++)
        close(ad.added[i]);
    close(a[0]);
    close(a[1]);
    close(b[0]);
    close(b[1]);
}

/* ---- timeouts and signals --------------------------------------------- */

Test(loop, nothing_ready_returns_zero_after_the_timeout) {
    int p[2];
    record rec = {0};
    make_pipe(p);
    sb_loop_init(&loop);
    cr_assert_eq(sb_loop_add(&loop, p[0], POLLIN, on_event, &rec), STDIO_BUS_OK);
    int64_t start = now_ms();
    cr_assert_eq(sb_loop_run_once(&loop, 50), 0);
    int64_t elapsed = now_ms() - start;
    cr_assert_geq(elapsed, 45, "returned after %lld ms of a 50 ms timeout", (long long)elapsed);
    cr_assert_lt(elapsed, WAIT_MS);
    cr_assert_eq(rec.calls, 0);
    close(p[0]);
    close(p[1]);
}

Test(loop, zero_timeout_does_not_block) {
    sb_loop_init(&loop);
    int64_t start = now_ms();
    cr_assert_eq(sb_loop_run_once(&loop, 0), 0);
    cr_assert_lt(now_ms() - start, 1000);
}

Test(loop, ready_fd_returns_before_the_timeout) {
    int p[2];
    record rec = {0};
    make_pipe(p);
    sb_loop_init(&loop);
    cr_assert_eq(sb_loop_add(&loop, p[0], POLLIN, on_event, &rec), STDIO_BUS_OK);
    make_readable(p[1]);
    int64_t start = now_ms();
    cr_assert_eq(sb_loop_run_once(&loop, 60000), 1);
    cr_assert_lt(now_ms() - start, WAIT_MS);
    close(p[0]);
    close(p[1]);
}

static volatile sig_atomic_t alarms;
static void on_alarm(int sig) {
    (void)sig;
    alarms++;
}

Test(loop, interrupted_poll_is_not_an_error) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_alarm; /* no SA_RESTART: poll returns EINTR */
    cr_assert_eq(sigaction(SIGALRM, &sa, NULL), 0);
    sb_loop_init(&loop);
    struct itimerval it = {{0, 0}, {0, 20000}};
    cr_assert_eq(setitimer(ITIMER_REAL, &it, NULL), 0);
    int64_t start = now_ms();
    cr_assert_eq(sb_loop_run_once(&loop, WAIT_MS), 0);
    cr_assert_lt(now_ms() - start, WAIT_MS, "poll was not interrupted");
    cr_assert_eq(alarms, 1);
}
