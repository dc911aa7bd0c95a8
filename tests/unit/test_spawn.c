/* Unit tests for spawning (src/os/spawn.c; STYLE 10, spec 3.3): exec failure
 * reported through the pipe, the child's signal mask and dispositions
 * reset, no descriptor of the spawn leaking into the child, the parent's
 * mask restored. As in libuv's tests, the test binary doubles as the child:
 * with SB_SPAWN_HELPER in its environment it reports on itself and exits
 * before criterion starts. */
#include <criterion/criterion.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "signals.h"
#include "spawn.h"
#include "status.h"

#define MAX_FD 256

/* The child: one line of open fds, one of blocked signals, one of signals
 * not at their default disposition, one of its pid and process group, then
 * its stdin echoed. */
__attribute__((constructor)) static void spawn_helper(void) {
    if (!getenv("SB_SPAWN_HELPER"))
        return;
    char out[4096];
    size_t n = 0;
    n += (size_t)snprintf(out + n, sizeof out - n, "fds");
    for (int fd = 0; fd < MAX_FD; fd++)
        if (fcntl(fd, F_GETFD) >= 0)
            n += (size_t)snprintf(out + n, sizeof out - n, " %d", fd);
    sigset_t mask;
    sigprocmask(SIG_SETMASK, NULL, &mask);
    n += (size_t)snprintf(out + n, sizeof out - n, "\nblocked");
    for (int s = 1; s < NSIG; s++)
        if (sigismember(&mask, s) == 1)
            n += (size_t)snprintf(out + n, sizeof out - n, " %d", s);
    n += (size_t)snprintf(out + n, sizeof out - n, "\nhandled");
    for (int s = 1; s < NSIG; s++) {
        struct sigaction sa;
        if (sigaction(s, NULL, &sa) == 0 && sa.sa_handler != SIG_DFL)
            n += (size_t)snprintf(out + n, sizeof out - n, " %d", s);
    }
    n += (size_t)snprintf(out + n, sizeof out - n, "\npid %d pgid %d\n", (int)getpid(),
                          (int)getpgid(0));
    ssize_t w = write(STDOUT_FILENO, out, n);
    char buf[256];
    ssize_t got;
    while ((got = read(STDIN_FILENO, buf, sizeof buf)) > 0)
        w = write(STDOUT_FILENO, buf, (size_t)got);
    (void)w;
    _exit(0);
}

static char *helper_env[] = {"SB_SPAWN_HELPER=1", NULL};

/* Everything the child writes until EOF (its stdout is non-blocking). */
static void read_all(int fd, char *buf, size_t size) {
    size_t n = 0;
    for (;;) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        cr_assert_gt(poll(&p, 1, 10000), 0, "the child wrote nothing for 10 s");
        ssize_t got = read(fd, buf + n, size - 1 - n);
        if (got < 0 && errno == EAGAIN)
            continue;
        cr_assert_geq(got, 0);
        if (got == 0)
            break;
        n += (size_t)got;
    }
    buf[n] = '\0';
}

static const char *line_after(const char *out, const char *key) {
    const char *p = strstr(out, key);
    cr_assert_not_null(p, "no '%s' line in: %s", key, out);
    return p + strlen(key);
}

/* Runs the helper; returns its report. */
static void run_helper(char *out, size_t size, unsigned flags, sb_child *child) {
    char self[4096];
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    cr_assert_gt(len, 0);
    self[len] = '\0';
    char *argv[] = {self, NULL};
    int exec_errno = -1;
    cr_assert_eq(sb_spawn(self, argv, helper_env, flags, child, &exec_errno), STDIO_BUS_OK, "%s",
                 strerror(errno));
    cr_assert_eq(exec_errno, 0);
    cr_assert_eq(write(child->stdin_fd, "ping\n", 5), 5);
    close(child->stdin_fd);
    read_all(child->stdout_fd, out, size);
    int status;
    cr_assert_eq(waitpid(child->pid, &status, 0), child->pid);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

TestSuite(spawn, .timeout = 30);

Test(spawn, exec_failure_is_reported_with_its_errno) {
    char *argv[] = {"/nonexistent/worker", NULL};
    sb_child child;
    int exec_errno = 0;
    cr_assert_eq(sb_spawn("/nonexistent/worker", argv, NULL, 0, &child, &exec_errno),
                 STDIO_BUS_ERR);
    cr_assert_eq(exec_errno, ENOENT, "exec_errno %d (%s)", exec_errno, strerror(exec_errno));
    cr_assert_eq(errno, ENOENT);
    cr_assert_gt(child.pid, 0, "the child was forked, then reaped");
    cr_assert_eq(waitpid(child.pid, NULL, WNOHANG), -1, "already reaped");
}

Test(spawn, child_starts_with_no_signal_blocked_or_handled) {
    /* What the daemon has: its handlers and an ignored SIGPIPE (signals.c),
     * and here also a blocked signal. None of it may reach the worker. (A
     * sanitizer's own handlers, installed as the child starts, may.) */
    cr_assert_geq(sb_signals_open(), 0);
    sigset_t usr1, before, after;
    sigemptyset(&usr1);
    sigaddset(&usr1, SIGUSR1);
    sigprocmask(SIG_BLOCK, &usr1, &before);
    sigprocmask(SIG_SETMASK, NULL, &before);

    char out[4096];
    sb_child child;
    run_helper(out, sizeof out, 0, &child);

    sigprocmask(SIG_SETMASK, NULL, &after);
    sigprocmask(SIG_UNBLOCK, &usr1, NULL);
    sb_signals_close();
    for (int s = 1; s < NSIG; s++)
        cr_assert_eq(sigismember(&after, s), sigismember(&before, s),
                     "signal %d: the parent's mask is not what it was before the spawn", s);
    cr_assert(strncmp(line_after(out, "blocked"), "\n", 1) == 0, "child: %s", out);
    const char *p = line_after(out, "handled");
    int sig, used;
    while (sscanf(p, " %d%n", &sig, &used) == 1 && *p != '\n') {
        int daemons[] = {SIGCHLD, SIGTERM, SIGINT, SIGQUIT, SIGHUP, SIGUSR1, SIGUSR2, SIGPIPE};
        for (size_t i = 0; i < sizeof daemons / sizeof daemons[0]; i++)
            cr_assert_neq(sig, daemons[i], "the child inherited the daemon's signal %d: %s", sig,
                          out);
        p += used;
    }
    cr_assert_not_null(strstr(out, "ping\n"), "the child's stdin and stdout are the pipes");
    close(child.stdout_fd);
    close(child.stderr_fd);
}

Test(spawn, no_descriptor_of_the_spawn_leaks_into_the_child) {
    /* What the child may hold beyond 0-2: what this process holds without
     * close-on-exec (the test runner's own descriptors), nothing else. */
    bool inheritable[MAX_FD] = {0};
    for (int fd = 3; fd < MAX_FD; fd++) {
        int flags = fcntl(fd, F_GETFD);
        inheritable[fd] = flags >= 0 && !(flags & FD_CLOEXEC);
    }
    char out[4096];
    sb_child child;
    run_helper(out, sizeof out, 0, &child);
    const char *p = line_after(out, "fds");
    int fd, used, seen = 0;
    while (sscanf(p, " %d%n", &fd, &used) == 1) {
        cr_assert(fd <= 2 || inheritable[fd], "fd %d leaked into the child: %s", fd, out);
        cr_assert_neq(fd, child.stdin_fd);
        cr_assert_neq(fd, child.stdout_fd);
        cr_assert_neq(fd, child.stderr_fd);
        seen |= fd <= 2 ? 1 << fd : 0;
        p += used;
    }
    cr_assert_eq(seen, 7, "the child has its stdin, stdout and stderr");
    /* The parent's ends: non-blocking and close-on-exec. */
    int ends[] = {child.stdout_fd, child.stderr_fd};
    for (int i = 0; i < 2; i++) {
        cr_assert(fcntl(ends[i], F_GETFL) & O_NONBLOCK);
        cr_assert(fcntl(ends[i], F_GETFD) & FD_CLOEXEC);
        close(ends[i]);
    }
}

/* SB-X-18: a connection's worker leads a process group of its own, so a
 * signal to the group reaches whatever it starts. */
Test(spawn, group_flag_makes_the_child_lead_a_process_group) {
    char out[4096];
    sb_child child;
    run_helper(out, sizeof out, SB_SPAWN_GROUP, &child);
    int pid, pgid;
    cr_assert_eq(sscanf(line_after(out, "\npid"), " %d pgid %d", &pid, &pgid), 2, "%s", out);
    cr_assert_eq(pid, child.pid);
    cr_assert_eq(pgid, child.pid, "child pgid %d, pid %d", pgid, pid);
}

Test(spawn, without_the_flag_the_child_stays_in_the_daemons_group) {
    char out[4096];
    sb_child child;
    run_helper(out, sizeof out, 0, &child);
    int pid, pgid;
    cr_assert_eq(sscanf(line_after(out, "\npid"), " %d pgid %d", &pid, &pgid), 2, "%s", out);
    cr_assert_eq(pgid, (int)getpgid(0));
}
