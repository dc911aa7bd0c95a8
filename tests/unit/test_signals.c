/* Unit tests for signal handling (src/os/signals.c; STYLE 9, SB-3.1-6,
 * SB-I-48): the self-pipe carries each signal's number, in order, and the
 * handler keeps errno; the flags and dispositions it installs; close puts
 * the defaults back. */
#include <criterion/criterion.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include "signals.h"
#include "status.h"

static int fd = -1;

static void open_signals(void) {
    fd = sb_signals_open();
    cr_assert_geq(fd, 0);
}

static void close_signals(void) {
    sb_signals_close();
}

TestSuite(signals, .init = open_signals, .fini = close_signals, .timeout = 10);

Test(signals, nothing_pending_reads_eagain) {
    cr_assert_eq(sb_signals_next(), STDIO_BUS_EAGAIN);
}

Test(signals, each_signal_arrives_as_its_number_in_order) {
    int sent[] = {SIGUSR1, SIGCHLD, SIGHUP, SIGUSR2, SIGTERM, SIGINT, SIGQUIT};
    for (size_t i = 0; i < sizeof sent / sizeof sent[0]; i++)
        cr_assert_eq(raise(sent[i]), 0);
    for (size_t i = 0; i < sizeof sent / sizeof sent[0]; i++)
        cr_assert_eq(sb_signals_next(), sent[i]);
    cr_assert_eq(sb_signals_next(), STDIO_BUS_EAGAIN);
}

Test(signals, handler_keeps_errno_even_when_the_pipe_is_full) {
    /* A full pipe already holds a wake-up: the write fails with EAGAIN,
     * which must not reach the code the signal interrupted. */
    for (int i = 0; i < 70000; i++)
        raise(SIGUSR1);
    errno = EDOM;
    raise(SIGUSR1);
    cr_assert_eq(errno, EDOM);
    int n = 0;
    while (sb_signals_next() == SIGUSR1)
        n++;
    cr_assert_geq(n, 4096, "the pipe held %d wake-ups", n);
}

Test(signals, pipe_is_nonblocking_and_close_on_exec) {
    cr_assert(fcntl(fd, F_GETFL) & O_NONBLOCK);
    cr_assert(fcntl(fd, F_GETFD) & FD_CLOEXEC);
}

Test(signals, handlers_restart_syscalls_and_ignore_child_stops) {
    int handled[] = {SIGCHLD, SIGTERM, SIGINT, SIGQUIT, SIGHUP, SIGUSR1, SIGUSR2};
    for (size_t i = 0; i < sizeof handled / sizeof handled[0]; i++) {
        struct sigaction sa;
        cr_assert_eq(sigaction(handled[i], NULL, &sa), 0);
        cr_assert_neq(sa.sa_handler, SIG_DFL, "signal %d has no handler", handled[i]);
        cr_assert_neq(sa.sa_handler, SIG_IGN);
        cr_assert(sa.sa_flags & SA_RESTART, "signal %d: no SA_RESTART", handled[i]);
    }
    struct sigaction chld;
    sigaction(SIGCHLD, NULL, &chld);
    cr_assert(chld.sa_flags & SA_NOCLDSTOP, "a stopped worker is not an exit");
}

Test(signals, sigpipe_is_ignored_so_writes_fail_with_epipe) {
    int p[2];
    cr_assert_eq(pipe(p), 0);
    close(p[0]);
    errno = 0;
    cr_assert_eq(write(p[1], "x", 1), -1);
    cr_assert_eq(errno, EPIPE);
    close(p[1]);
}

Test(signals, close_restores_defaults_and_closes_the_pipe) {
    sb_signals_close();
    struct sigaction sa;
    sigaction(SIGTERM, NULL, &sa);
    cr_assert_eq(sa.sa_handler, SIG_DFL);
    sigaction(SIGCHLD, NULL, &sa);
    cr_assert_eq(sa.sa_handler, SIG_DFL);
    cr_assert_eq(fcntl(fd, F_GETFD), -1, "the read end is closed");
    open_signals(); /* for the suite's fini */
}
