/* Unit tests for worker supervision (src/daemon/supervise.c) with real child
 * processes (/bin/sh) on pipes: spawn, exit and restart (7.1), failure on
 * malformed output (5.3) reported by the relay, shutdown (10.2). The test
 * waits for a child's exit itself (waitid, WNOWAIT), then reaps it through
 * sb_supervise_reap as the daemon does on SIGCHLD. */
#include <criterion/criterion.h>

#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bus_limits.h"
#include "clock.h"
#include "log.h"
#include "phase.h"
#include "relay.h"
#include "status.h"
#include "supervise.h"

static sb_bus d;
static char *argv[4] = {"/bin/sh", "-c", NULL, NULL};
static sb_pool_config pool = {.id = "p", .instances = 1, .resolved = "/bin/sh", .argv = argv};
static sb_config cfg = {
    .pools = &pool,
    .pool_count = 1,
    .worker_count = 1,
    .limits = {.max_input_buffer = SB_DEFAULT_MAX_INPUT_BUFFER,
               .max_output_queue = SB_DEFAULT_MAX_OUTPUT_QUEUE,
               .max_restarts = SB_DEFAULT_MAX_RESTARTS,
               .restart_window_sec = SB_DEFAULT_RESTART_WINDOW_SEC,
               .drain_timeout_sec = SB_DEFAULT_DRAIN_TIMEOUT_SEC,
               .backpressure_timeout_sec = SB_DEFAULT_BACKPRESSURE_TIMEOUT_SEC,
               .restart_backoff_ms = SB_DEFAULT_RESTART_BACKOFF_MS,
               .restart_backoff_max_ms = SB_DEFAULT_RESTART_BACKOFF_MAX_MS},
};
static sb_options opt = {.mode = SB_MODE_UNIX};
static sb_worker *w;

static void setup(void) {
    sb_log_set_level(SB_LOG_ERROR);
    cr_assert_eq(sb_bus_init(&d, &cfg, &opt), STDIO_BUS_OK);
    w = &d.workers[0];
}

static void teardown(void) {
    if (w->pid > 0) {
        sb_worker_signal(w, SIGKILL);
        waitpid(w->pid, NULL, 0);
    }
    sb_supervise_close_fds(&d, w);
    sb_worker_fini(w);
    sb_bus_fini(&d);
}

TestSuite(supervise, .init = setup, .fini = teardown, .timeout = 20);

static void start(const char *script) {
    argv[2] = (char *)script;
    cr_assert_eq(sb_supervise_spawn(&d, w), STDIO_BUS_OK);
}

/* Waits for the worker's exit, then reaps it as SIGCHLD would. */
static void reap_exit(void) {
    siginfo_t info;
    cr_assert_eq(waitid(P_PID, (id_t)w->pid, &info, WEXITED | WNOWAIT), 0);
    sb_supervise_reap(&d);
}

static bool armed(int which) {
    return sb_timers_armed(&d.timers, sb_bus_timer(&d, &w->peer, which));
}

Test(supervise, spawned_worker_runs_and_is_routed) {
    start("exec sleep 30");
    cr_assert_eq(w->state, SB_WORKER_RUNNING);
    cr_assert(sb_worker_routes_output(w));
    cr_assert(d.router.running[0]);
    cr_assert_gt(w->pid, 0);
    cr_assert_eq(d.live_workers, 1);
}

/* 7.1.2, 7.1.3: an exit is reaped, the worker is STOPPED with its pipes
 * closed, and its restart is scheduled. */
Test(supervise, exited_worker_is_stopped_and_its_restart_scheduled) {
    start("exit 3");
    reap_exit();
    cr_assert_eq(w->state, SB_WORKER_STOPPED);
    cr_assert_not(sb_worker_routes_output(w));
    cr_assert_not(d.router.running[0]);
    cr_assert_eq(w->pid, -1);
    cr_assert_eq(w->peer.in_fd, -1);
    cr_assert_eq(w->peer.out_fd, -1);
    cr_assert_eq(d.live_workers, 0);
    cr_assert(armed(SB_TIMER_RESTART));
    cr_assert_not(armed(SB_TIMER_KILL));
}

/* 5.3: the relay reports a malformed line; supervision fails the worker:
 * MUTED (its output no longer routed), its stdin closed, SIGTERM, a kill
 * timer. */
Test(supervise, malformed_output_fails_the_worker) {
    start("echo not-json; exec sleep 30");
    struct pollfd pfd = {.fd = w->peer.in_fd, .events = POLLIN};
    cr_assert_eq(poll(&pfd, 1, 10000), 1);
    sb_relay_verdict v = sb_relay_read(&d, &w->peer);
    cr_assert_eq(v.event, SB_RELAY_MALFORMED);
    sb_supervise_verdict(&d, w, v);
    cr_assert_eq(w->state, SB_WORKER_MUTED);
    cr_assert_not(sb_worker_routes_output(w), "a failed worker's further output is not routed");
    cr_assert_not(d.router.running[0]);
    cr_assert_eq(w->peer.out_fd, -1, "nothing more goes to it");
    cr_assert(armed(SB_TIMER_KILL));
    reap_exit(); /* SIGTERM ended sleep */
    cr_assert_eq(w->state, SB_WORKER_STOPPED);
    cr_assert(armed(SB_TIMER_RESTART), "a failed worker is restarted (5.3)");
    cr_assert_not(armed(SB_TIMER_KILL));
}

/* 10.2: at shutdown every worker is told to stop, and none restarts. */
Test(supervise, stopped_at_shutdown_and_not_restarted) {
    start("exec sleep 30");
    sb_phase_enter(&d, SB_PHASE_DRAINING, sb_now_ms() + 1000);
    sb_supervise_stop_all(&d);
    cr_assert_eq(w->state, SB_WORKER_STOPPING);
    cr_assert_eq(w->peer.out_fd, -1);
    reap_exit();
    cr_assert_eq(w->state, SB_WORKER_STOPPED);
    cr_assert_not(armed(SB_TIMER_RESTART));
}

/* A worker's answer goes to the client it is pending for; the worker's
 * lines come through its stdout pipe. */
Test(supervise, worker_lines_are_read_from_its_pipe) {
    start("read line; echo \"$line\"; exec sleep 30");
    const char *line = "{\"jsonrpc\":\"2.0\",\"method\":\"note\"}\n";
    sb_relay_send(&d, &w->peer, line, strlen(line), NULL);
    sb_relay_flush(&d);
    struct pollfd pfd = {.fd = w->peer.in_fd, .events = POLLIN};
    cr_assert_eq(poll(&pfd, 1, 10000), 1);
    sb_relay_verdict v = sb_relay_read(&d, &w->peer);
    cr_assert_eq(v.event, SB_RELAY_OK, "a notification without a session: dropped, not malformed");
    cr_assert_eq(w->state, SB_WORKER_RUNNING);
}

/* Issue 33: whether a worker takes messages lives in its state and pipes;
 * the router's view is derived from them on every change. Its stdin lost,
 * a worker still RUNNING takes no more messages, and its output is still
 * routed (SB-I-40). */
Test(supervise, router_view_follows_a_lost_stdin) {
    start("exec sleep 30");
    sb_relay_stdin_lost(&d, &w->peer);
    cr_assert_eq(w->state, SB_WORKER_RUNNING);
    cr_assert_not(d.router.running[0], "a worker whose stdin is lost takes no more messages");
    cr_assert(sb_worker_routes_output(w));
    sb_supervise_stdin_lost(&d);
    cr_assert(armed(SB_TIMER_LOST), "failed if still alive a moment later (SB-I-39)");
}

/* SB-X-19: a retiring worker takes no one new, and what it writes is still
 * routed; failed for its output meanwhile, it is MUTED and still counts as
 * retired (recycled, SB-X-20, not restarted by policy). */
Test(supervise, retiring_worker_takes_no_one_and_may_be_muted) {
    start("exec sleep 30");
    sb_supervise_retire(&d, w);
    cr_assert_eq(w->state, SB_WORKER_RETIRING);
    cr_assert_not(d.router.running[0]);
    cr_assert(sb_worker_routes_output(w));
    cr_assert_gt(w->retired_ms, 0);
    sb_supervise_fail(&d, w, SB_MUTE_OUTPUT, "wrote a malformed line");
    cr_assert_eq(w->state, SB_WORKER_MUTED);
    cr_assert_not(sb_worker_routes_output(w));
    cr_assert_gt(w->retired_ms, 0, "still retired: recycled once it exits");
}
