/* Unit tests for logging (src/os/log.c; issue 14): a log line never blocks the
 * caller, whatever stderr is; lines stderr cannot take are dropped and
 * counted, and the count is written once it takes lines again. */
#include <criterion/criterion.h>

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "log.h"

static int reader = -1;

/* Puts a pipe (or a socket pair) nobody reads yet on fd 2; returns the
 * other end. */
static void stderr_to(int kind) {
    int p[2];
    if (kind == SOCK_STREAM)
        cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, p), 0);
    else
        cr_assert_eq(pipe(p), 0);
    int w = p[1];
    reader = p[0];
    cr_assert_eq(dup2(w, STDERR_FILENO), STDERR_FILENO);
    close(w);
    fcntl(reader, F_SETFL, O_NONBLOCK);
}

/* Everything written to fd 2 so far. */
static char *drain(size_t *len) {
    size_t cap = 1 << 20, n = 0;
    char *buf = malloc(cap + 1);
    ssize_t got;
    while ((got = read(reader, buf + n, cap - n)) > 0)
        n += (size_t)got;
    buf[n] = '\0';
    *len = n;
    return buf;
}

static int count(const char *text, const char *needle) {
    int n = 0;
    for (const char *p = text; (p = strstr(p, needle)); p++)
        n++;
    return n;
}

static void full_stderr_drops_and_counts(int kind) {
    sb_log_set_level(SB_LOG_INFO);
    stderr_to(kind);
    char pad[100];
    memset(pad, 'x', sizeof pad - 1);
    pad[sizeof pad - 1] = '\0';
    for (int i = 0; i < 20000; i++) /* ~2.6 MB: far more than the pipe or socket holds */
        sb_info("test", "line %d %s", i, pad);
    cr_assert(sb_log_backlog(), "nothing was dropped: stderr took 2.6 MB?");
    size_t len;
    char *first = drain(&len);
    int written = count(first, "[test] line ");
    cr_assert_gt(written, 10);
    cr_assert_lt(written, 20000);
    cr_assert_eq(first[len - 1], '\n', "a line was cut short");
    /* stderr is empty again: the count comes before anything else */
    cr_assert_eq(sb_log_flush(), 1);
    cr_assert_not(sb_log_backlog());
    sb_info("test", "after");
    char *second = drain(&len);
    char expected[128];
    snprintf(expected, sizeof expected, "stdio_bus: %d log line(s) dropped", 20000 - written);
    cr_assert(strstr(second, expected) == second, "got: %.200s", second);
    cr_assert_eq(count(second, "[test] after"), 1);
    free(first);
    free(second);
}

Test(log, a_pipe_nobody_reads_never_blocks, .timeout = 20) {
    full_stderr_drops_and_counts(0);
}

Test(log, a_socket_nobody_reads_never_blocks, .timeout = 20) {
    full_stderr_drops_and_counts(SOCK_STREAM);
}

Test(log, the_count_waits_until_stderr_takes_lines, .timeout = 20) {
    sb_log_set_level(SB_LOG_INFO);
    stderr_to(0);
    char big[1500];
    memset(big, 'y', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    while (!sb_log_backlog())
        sb_info(NULL, "%s", big);
    cr_assert_eq(sb_log_flush(), 0, "stderr is still full");
    size_t len;
    free(drain(&len));
    cr_assert_eq(sb_log_flush(), 1);
    char *note = drain(&len);
    cr_assert(strstr(note, "stdio_bus: 1 log line(s) dropped"), "got: %.200s", note);
    free(note);
}

Test(log, a_closed_stderr_is_an_error_not_a_wait, .timeout = 20) {
    sb_log_set_level(SB_LOG_INFO);
    stderr_to(0);
    close(reader); /* nobody will ever read: writes fail with EPIPE */
    signal(SIGPIPE, SIG_IGN);
    sb_info(NULL, "lost");
    cr_assert(sb_log_backlog());
    cr_assert_lt(sb_log_flush(), 0);
}
