#include "load_server.h"
#include "bench_spawn.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

int64_t load_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int write_config(load_server *s, const load_opts *o, char *err, size_t err_size) {
    snprintf(s->config, sizeof s->config, "/tmp/bench_load.%d.json", (int)getpid());
    if (strpbrk(o->worker, "\"\\")) {
        snprintf(err, err_size, "--worker: quotes and backslashes are not supported in the path");
        return -1;
    }
    FILE *f = fopen(s->config, "w");
    if (!f) {
        snprintf(err, err_size, "%s: %s", s->config, strerror(errno));
        return -1;
    }
    fprintf(f, "{\"pools\":[{\"id\":\"b\",\"command\":\"%s\",\"args\":[", o->worker);
    for (int i = 0; i < o->worker_argc; i++)
        fprintf(f, "%s\"%s\"", i ? "," : "", o->worker_args[i]);
    fprintf(f,
            "],\"instances\":%d}],\"limits\":{\"max_input_buffer\":%zu,"
            "\"max_output_queue\":%zu}}\n",
            o->instances, o->max_input_buffer, o->max_output_queue);
    s->config_written = 1;
    if (fclose(f) != 0) {
        snprintf(err, err_size, "%s: write failed", s->config);
        return -1;
    }
    return 0;
}

int load_server_start(load_server *s, const load_opts *o, char *err, size_t err_size) {
    memset(s, 0, sizeof *s);
    s->pid = -1;
    s->to_fd = s->from_fd = -1;
    if (o->config)
        snprintf(s->config, sizeof s->config, "%s", o->config);
    else if (write_config(s, o, err, err_size) < 0)
        return -1;

    char *argv[3 * LOAD_MAX_ARGS + 8];
    int n = 0;
    for (int i = 0; i < o->wrap_argc; i++)
        argv[n++] = o->wrap[i];
    argv[n++] = (char *)o->server;
    argv[n++] = "--config";
    argv[n++] = s->config;
    if (o->mode == BENCH_STDIO) {
        argv[n++] = "--stdio";
    } else if (o->mode == BENCH_UNIX) {
        snprintf(s->address, sizeof s->address, "/tmp/bench_load.%d.sock", (int)getpid());
        argv[n++] = "--unix";
        argv[n++] = s->address;
    } else {
        int port = bench_net_free_port();
        if (port < 0) {
            snprintf(err, err_size, "no free TCP port");
            return -1;
        }
        snprintf(s->address, sizeof s->address, "127.0.0.1:%d", port);
        argv[n++] = "--tcp";
        argv[n++] = s->address;
    }
    argv[n++] = "--log-level";
    argv[n++] = (char *)o->log_level;
    for (int i = 0; i < o->server_argc; i++)
        argv[n++] = (char *)o->server_args[i];
    argv[n] = NULL;
    if (o->mode == BENCH_STDIO)
        s->pid = bench_spawn(argv, &s->to_fd, &s->from_fd, err, err_size);
    else
        s->pid = bench_spawn(argv, NULL, NULL, err, err_size);
    return s->pid < 0 ? -1 : 0;
}

int load_server_connect(const load_server *s, const load_opts *o, int64_t deadline_ns) {
    for (;;) {
        int fd = bench_net_connect(o->mode, s->address);
        if (fd >= 0)
            return fd;
        if ((errno != ENOENT && errno != ECONNREFUSED) || load_now_ns() > deadline_ns)
            return -1;
        if (waitpid(s->pid, NULL, WNOHANG) == s->pid)
            return -1; /* it died before listening */
        /* Not listening yet: the socket file appears at bind(). Back off
         * briefly; the deadline bounds the wait. */
        struct timespec pause = {0, 2000000};
        nanosleep(&pause, NULL);
    }
}

/* Waits for the exit of pid until deadline_ns. Returns the status, or -1. */
static int wait_exit(pid_t pid, int64_t deadline_ns) {
    int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
    for (;;) {
        int status;
        pid_t r = waitpid(pid, &status, WNOHANG);
        if (r == pid) {
            if (pidfd >= 0)
                close(pidfd);
            return status;
        }
        if (r < 0 && errno != EINTR) {
            if (pidfd >= 0)
                close(pidfd);
            return -1;
        }
        int64_t left_ms = (deadline_ns - load_now_ns()) / 1000000;
        if (left_ms <= 0) {
            if (pidfd >= 0)
                close(pidfd);
            return -1;
        }
        if (pidfd >= 0) {
            struct pollfd p = {pidfd, POLLIN, 0};
            poll(&p, 1, (int)(left_ms > 1000 ? 1000 : left_ms));
        } else {
            struct timespec pause = {0, 5000000};
            nanosleep(&pause, NULL);
        }
    }
}

int load_server_stop(load_server *s, double timeout_sec) {
    int status = -1;
    if (s->pid > 0) {
        if (s->to_fd >= 0) { /* SB-I-5: stdin EOF ends a stdio-mode daemon */
            close(s->to_fd);
            s->to_fd = -1;
        } else {
            kill(s->pid, SIGTERM);
        }
        status = wait_exit(s->pid, load_now_ns() + (int64_t)(timeout_sec * 1e9));
        if (status < 0) {
            fprintf(stderr, "bench_load: server did not exit within %.0f s: SIGKILL\n",
                    timeout_sec);
            kill(s->pid, SIGKILL);
            waitpid(s->pid, NULL, 0);
        }
        s->pid = -1;
    }
    if (s->from_fd >= 0)
        close(s->from_fd);
    s->from_fd = -1;
    if (s->config_written)
        unlink(s->config);
    if (s->address[0] == '/')
        unlink(s->address);
    return status;
}
