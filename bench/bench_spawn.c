#include "bench_spawn.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void close_fd(int *fd) {
    if (*fd >= 0)
        close(*fd);
    *fd = -1;
}

pid_t bench_spawn(char *const argv[], int *to_child, int *from_child, char *err, size_t err_size) {
    int in[2] = {-1, -1}, out[2] = {-1, -1}, report[2] = {-1, -1};
    int piped = to_child && from_child;
    if (pipe2(report, O_CLOEXEC) < 0 ||
        (piped && (pipe2(in, O_CLOEXEC) < 0 || pipe2(out, O_CLOEXEC) < 0))) {
        snprintf(err, err_size, "pipe: %s", strerror(errno));
        goto fail;
    }
    if (!piped && (in[0] = open("/dev/null", O_RDONLY | O_CLOEXEC)) < 0) {
        snprintf(err, err_size, "/dev/null: %s", strerror(errno));
        goto fail;
    }
    pid_t pid = fork();
    if (pid < 0) {
        snprintf(err, err_size, "fork: %s", strerror(errno));
        goto fail;
    }
    if (pid == 0) {
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        for (int s = 1; s < NSIG; s++)
            signal(s, SIG_DFL);
        if (dup2(in[0], STDIN_FILENO) >= 0 && (!piped || dup2(out[1], STDOUT_FILENO) >= 0))
            execvp(argv[0], argv);
        int e = errno;
        ssize_t ignored = write(report[1], &e, sizeof e);
        (void)ignored;
        _exit(127);
    }
    close_fd(&report[1]);
    close_fd(&in[0]);
    close_fd(&out[1]);
    int e = 0;
    ssize_t n;
    do
        n = read(report[0], &e, sizeof e);
    while (n < 0 && errno == EINTR);
    close_fd(&report[0]);
    if (n == (ssize_t)sizeof e) {
        snprintf(err, err_size, "exec %s: %s", argv[0], strerror(e));
        waitpid(pid, NULL, 0);
        goto fail;
    }
    if (piped) {
        fcntl(in[1], F_SETFL, O_NONBLOCK);
        fcntl(out[0], F_SETFL, O_NONBLOCK);
        *to_child = in[1];
        *from_child = out[0];
    }
    return pid;
fail:
    close_fd(&in[0]);
    close_fd(&in[1]);
    close_fd(&out[0]);
    close_fd(&out[1]);
    close_fd(&report[0]);
    close_fd(&report[1]);
    return -1;
}
