/* Unit tests for the worker's stderr relay (src/bus/worker.c; SB-I-7, issue 14):
 * at exit it reads what the pipe holds then, and stops even when something
 * (an orphan of the worker) never stops writing. */
#include <criterion/criterion.h>

#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "bus_limits.h"
#include "log.h"
#include "status.h"
#include "worker.h"

static sb_worker w;
static sb_pool_config pool = {.id = "p"};
static sb_limits limits = {.max_input_buffer = SB_DEFAULT_MAX_INPUT_BUFFER,
                           .max_output_queue = SB_DEFAULT_MAX_OUTPUT_QUEUE,
                           .max_restarts = SB_DEFAULT_MAX_RESTARTS};

static void setup(void) {
    sb_log_set_level(SB_LOG_ERROR); /* relayed lines are INFO: keep the test's stderr quiet */
    cr_assert_eq(sb_worker_init(&w, 0, &pool, &limits), STDIO_BUS_OK);
}

static void teardown(void) {
    sb_worker_fini(&w);
}

TestSuite(worker, .init = setup, .fini = teardown, .timeout = 20);

Test(worker, relay_at_exit_stops_on_a_stream_that_never_ends) {
    /* /dev/zero never runs dry and never ends, as a pipe kept full by an
     * orphan of the worker: the relay must still return. */
    w.stderr_fd = open("/dev/zero", O_RDONLY | O_NONBLOCK);
    cr_assert_geq(w.stderr_fd, 0);
    cr_assert_eq(sb_worker_relay_stderr(&w, true), STDIO_BUS_OK);
    cr_assert_eq(w.stderr_len, 0, "the partial line was relayed");
    close(w.stderr_fd);
}

Test(worker, relay_at_exit_takes_what_the_pipe_holds) {
    int p[2];
    cr_assert_eq(pipe2(p, O_NONBLOCK), 0);
    char chunk[1000];
    memset(chunk, 'x', sizeof chunk);
    chunk[sizeof chunk - 1] = '\n';
    for (int i = 0; i < 10; i++)
        cr_assert_eq(write(p[1], chunk, sizeof chunk), (ssize_t)sizeof chunk);
    cr_assert_eq(write(p[1], "tail", 4), 4);
    w.stderr_fd = p[0];
    cr_assert_eq(sb_worker_pipe_pending(p[0]), 10004);
    /* the write end stays open: no EOF comes, and the relay does not wait for one */
    cr_assert_eq(sb_worker_relay_stderr(&w, true), STDIO_BUS_OK);
    cr_assert_eq(sb_worker_pipe_pending(p[0]), 0, "what was in the pipe was read");
    cr_assert_eq(w.stderr_len, 0, "the partial line was relayed");
    close(p[0]);
    close(p[1]);
}

Test(worker, relay_reads_once_per_call_otherwise) {
    int p[2];
    cr_assert_eq(pipe2(p, O_NONBLOCK), 0);
    char big[3 * SB_WORKER_STDERR_LINE];
    memset(big, 'y', sizeof big);
    cr_assert_eq(write(p[1], big, sizeof big), (ssize_t)sizeof big);
    w.stderr_fd = p[0];
    cr_assert_eq(sb_worker_relay_stderr(&w, false), STDIO_BUS_OK);
    cr_assert_eq(sb_worker_pipe_pending(p[0]), 2 * SB_WORKER_STDERR_LINE);
    close(p[1]);
    close(p[0]);
}

Test(worker, relayed_stderr_is_held_to_its_budget) {
    /* 200,000 empty lines would be ~19 MB of log; the budget keeps it to
     * SB_WORKER_STDERR_BUDGET a second, and the rest is counted. */
    sb_log_set_level(SB_LOG_INFO);
    char in_path[] = "/tmp/sb-relay-in-XXXXXX", out_path[] = "/tmp/sb-relay-out-XXXXXX";
    int in = mkstemp(in_path), out = mkstemp(out_path);
    cr_assert(in >= 0 && out >= 0);
    unlink(in_path);
    unlink(out_path);
    static char newlines[200000];
    memset(newlines, '\n', sizeof newlines);
    cr_assert_eq(write(in, newlines, sizeof newlines), (ssize_t)sizeof newlines);
    lseek(in, 0, SEEK_SET);
    cr_assert_eq(dup2(out, STDERR_FILENO), STDERR_FILENO);
    w.stderr_fd = in;
    sb_worker_relay_stderr(&w, true);
    off_t logged = lseek(out, 0, SEEK_END);
    cr_assert_lt(logged, SB_WORKER_STDERR_BUDGET + 4096, "%lld bytes of log", (long long)logged);
    char tail[512] = {0};
    pread(out, tail, sizeof tail - 1, logged > 400 ? logged - 400 : 0);
    cr_assert(strstr(tail, "byte(s) of worker stderr dropped"), "no drop count: %s", tail);
    close(in);
    close(out);
}
