/* The helper process of --spawn-child (see child.h). */
#include "child.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/status.h"

/* The helper: what a daemonized process looks like to its reaper. Its pid
 * goes up the pipe once it is in its own session, so the worker logs it
 * only when a test may look for it (report_fd -1: its parent did). */
static void helper(int report_fd) {
    signal(SIGTERM, SIG_DFL); /* the worker's handlers write to its self-pipe */
    signal(SIGINT, SIG_DFL);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    int null = open("/dev/null", O_RDWR);
    if (null >= 0) { /* as daemon(3): the worker's pipes are not its to hold */
        dup2(null, STDIN_FILENO);
        dup2(null, STDOUT_FILENO);
        dup2(null, STDERR_FILENO);
    }
    if (report_fd >= 0) {
        pid_t self = getpid();
        ssize_t r = write(report_fd, &self, sizeof self);
        (void)r;
        close(report_fd);
    }
    for (;;)
        pause();
}

/* One try: the helper's pid, or -1 with errno set (0: it went before it
 * could report itself). */
static pid_t spawn_once(mw_child_kind how) {
    int p[2];
    if (pipe2(p, O_CLOEXEC) < 0)
        return -1;
    pid_t pid = fork();
    if (pid == 0) {
        close(p[0]);
        if (how != MW_CHILD_GROUP)
            setsid();
        if (how == MW_CHILD_DOUBLE_FORK) {
            pid_t grandchild = fork();
            if (grandchild != 0) {
                /* Its pid goes up from here, before it is orphaned: a daemon
                 * that is its subreaper may kill it at once (SB-X-22), and the
                 * worker has started it all the same. */
                if (grandchild > 0) {
                    ssize_t r = write(p[1], &grandchild, sizeof grandchild);
                    (void)r;
                }
                _exit(grandchild < 0 ? 1 : 0); /* the helper is orphaned now */
            }
            close(p[1]);
            p[1] = -1;
        }
        helper(p[1]);
    }
    int fork_errno = errno;
    close(p[1]);
    pid_t helper_pid = -1;
    ssize_t n;
    do
        n = read(p[0], &helper_pid, sizeof helper_pid);
    while (n < 0 && errno == EINTR);
    int read_errno = errno;
    close(p[0]);
    if (pid > 0 && how == MW_CHILD_DOUBLE_FORK)
        while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {
        }
    if (pid < 0) {
        errno = fork_errno;
        return -1;
    }
    if (n != (ssize_t)sizeof helper_pid) {
        errno = n < 0 ? read_errno : 0;
        return -1;
    }
    return helper_pid;
}

/* A few tries: on a loaded machine under a sanitizer a fork may fail for
 * a moment, and the worker would exit for its own helper, not the daemon. */
int mw_child_spawn(const mw_log *log, mw_child_kind how) {
    if (how == MW_CHILD_NONE)
        return MC_OK;
    pid_t helper_pid = -1;
    for (int attempt = 0; attempt < 3 && helper_pid < 0; attempt++)
        helper_pid = spawn_once(how);
    if (helper_pid < 0)
        return MC_ERR;
    char rec[32];
    int len = snprintf(rec, sizeof rec, "%ld", (long)helper_pid);
    mw_log_record(log, "child", rec, (size_t)len);
    return MC_OK;
}
