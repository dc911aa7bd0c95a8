#include "spawn.h"
#include "status.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

static void close_pair(int p[2]) {
    for (int i = 0; i < 2; i++)
        if (p[i] >= 0)
            close(p[i]);
}

/* Builds environ + extra (extra overrides variables with the same name). */
static char **build_env(char *const extra[]) {
    size_t base = 0, more = 0;
    while (environ && environ[base])
        base++;
    while (extra && extra[more])
        more++;
    char **env = malloc((base + more + 1) * sizeof *env);
    if (!env)
        return NULL;
    size_t n = 0;
    for (size_t i = 0; i < base; i++) {
        int overridden = 0;
        for (size_t j = 0; j < more && !overridden; j++) {
            size_t key = strcspn(extra[j], "=");
            overridden = strncmp(environ[i], extra[j], key + 1) == 0;
        }
        if (!overridden)
            env[n++] = environ[i];
    }
    for (size_t j = 0; j < more; j++)
        env[n++] = extra[j];
    env[n] = NULL;
    return env;
}

static void child_exec(const char *path, char *const argv[], char **env, unsigned flags, int in[2],
                       int out[2], int err[2], int report_fd) {
    /* Reset what the daemon changed: handlers and mask are inherited. The
     * dispositions go first, while every signal is still blocked (see
     * sb_spawn), so none of the daemon's handlers can run in the child. */
    for (int s = 1; s < NSIG; s++)
        if (s != SIGKILL && s != SIGSTOP)
            signal(s, SIG_DFL);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);

    if ((flags & SB_SPAWN_GROUP) && setpgid(0, 0) < 0)
        goto failed;
    if (dup2(in[0], STDIN_FILENO) < 0 || dup2(out[1], STDOUT_FILENO) < 0 ||
        dup2(err[1], STDERR_FILENO) < 0)
        goto failed;
    execve(path, argv, env);
failed:;
    int e = errno;
    ssize_t ignored = write(report_fd, &e, sizeof e);
    (void)ignored;
    _exit(127);
}

int sb_spawn(const char *path, char *const argv[], char *const extra_env[], unsigned flags,
             sb_child *child, int *exec_errno) {
    int in[2] = {-1, -1}, out[2] = {-1, -1}, err[2] = {-1, -1}, report[2] = {-1, -1};
    *exec_errno = 0;
    child->pid = -1;
    char **env = build_env(extra_env);
    if (!env || pipe2(in, O_CLOEXEC) < 0 || pipe2(out, O_CLOEXEC) < 0 ||
        pipe2(err, O_CLOEXEC) < 0 || pipe2(report, O_CLOEXEC) < 0)
        goto fail;

    /* Every signal blocked around fork(), as libuv's uv_spawn does: a
     * signal arriving between fork() and the reset in child_exec would run
     * the daemon's handler in the child, which writes the signal number to
     * the daemon's self-pipe (shared with the parent after fork) and so
     * reports a signal the daemon never got, e.g. a SIGTERM meant for the
     * child as a shutdown request. The parent restores its mask at once. */
    sigset_t all, saved_mask;
    sigfillset(&all);
    if (sigprocmask(SIG_SETMASK, &all, &saved_mask) < 0)
        goto fail;
    pid_t pid = fork();
    if (pid == 0)
        child_exec(path, argv, env, flags, in, out, err, report[1]);
    int fork_errno = errno;
    if (pid > 0 && (flags & SB_SPAWN_GROUP))
        setpgid(pid, pid); /* as the child does: EACCES once it has exec'd, when it did already */
    sigprocmask(SIG_SETMASK, &saved_mask, NULL);
    if (pid < 0) {
        errno = fork_errno;
        goto fail;
    }

    free(env);
    env = NULL;
    close(in[0]);
    close(out[1]);
    close(err[1]);
    close(report[1]);
    in[0] = out[1] = err[1] = report[1] = -1;

    /* The report pipe closes on exec (0 bytes) or carries exec's errno. */
    int e = 0;
    ssize_t n;
    do
        n = read(report[0], &e, sizeof e);
    while (n < 0 && errno == EINTR);
    close(report[0]);
    child->pid = pid;
    if (n == (ssize_t)sizeof e) {
        *exec_errno = e;
        int status;
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
        }
        close(in[1]);
        close(out[0]);
        close(err[0]);
        errno = e;
        return STDIO_BUS_ERR;
    }
    fcntl(in[1], F_SETFL, O_NONBLOCK);
    fcntl(out[0], F_SETFL, O_NONBLOCK);
    fcntl(err[0], F_SETFL, O_NONBLOCK);
    child->stdin_fd = in[1];
    child->stdout_fd = out[0];
    child->stderr_fd = err[0];
    return STDIO_BUS_OK;

fail:;
    int saved = errno;
    free(env);
    close_pair(in);
    close_pair(out);
    close_pair(err);
    close_pair(report);
    errno = saved;
    return STDIO_BUS_ERR;
}
