#include "worker.h"
#include "log.h"
#include "spawn.h"
#include "status.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

const char *sb_worker_state_name(sb_worker_state s) {
    static const char *const names[] = {"STARTING", "RUNNING", "RETIRING",
                                        "STOPPING", "MUTED",   "STOPPED"};
    return names[s];
}

/* Appendix B:
 *   STOPPED -> STARTING        spawn (fork/exec in progress)
 *   STARTING -> RUNNING        exec succeeded
 *   STARTING -> STOPPED        no process could be started
 *   RUNNING -> RETIRING        its client left (SB-X-16, SB-X-19)
 *   RUNNING -> STOPPING        failed keeping its output (SB-I-40), shutdown (10.2)
 *   RUNNING, RETIRING, STOPPING -> MUTED   failed for its output (5.3)
 *   any but STARTING, STOPPED -> STOPPED   exited and reaped (7.1.2) */
void sb_worker_enter(sb_worker *w, sb_worker_state to, sb_router *view) {
    static const unsigned char allowed[] = {
        [SB_WORKER_STARTING] = 1u << SB_WORKER_RUNNING | 1u << SB_WORKER_STOPPED,
        [SB_WORKER_RUNNING] = 1u << SB_WORKER_RETIRING | 1u << SB_WORKER_STOPPING |
                              1u << SB_WORKER_MUTED | 1u << SB_WORKER_STOPPED,
        [SB_WORKER_RETIRING] = 1u << SB_WORKER_MUTED | 1u << SB_WORKER_STOPPED,
        [SB_WORKER_STOPPING] = 1u << SB_WORKER_MUTED | 1u << SB_WORKER_STOPPED,
        [SB_WORKER_MUTED] = 1u << SB_WORKER_STOPPED,
        [SB_WORKER_STOPPED] = 1u << SB_WORKER_STARTING,
    };
    if (!(allowed[w->state] & 1u << to))
        sb_error(w->peer.name, "state %s -> %s is not a transition of Appendix B",
                 sb_worker_state_name(w->state), sb_worker_state_name(to));
    w->state = to;
    sb_worker_publish(w, view);
}

void sb_worker_publish(const sb_worker *w, sb_router *view) {
    sb_router_set_running(
        view, w->id, w->state == SB_WORKER_RUNNING && w->peer.in_fd >= 0 && w->peer.out_fd >= 0);
}

void sb_worker_name(sb_worker *w) {
    if (w->pid > 0)
        snprintf(w->peer.name, sizeof w->peer.name, "worker %d pool=%.20s pid=%d", w->id,
                 w->pool->id, (int)w->pid);
    else
        snprintf(w->peer.name, sizeof w->peer.name, "worker %d pool=%.20s", w->id, w->pool->id);
}

int sb_worker_init(sb_worker *w, int id, const sb_pool_config *pool, const sb_limits *limits) {
    memset(w, 0, sizeof *w);
    static const sb_client_state no_client = SB_CLIENT_FREE;
    w->peer.kind = SB_PEER_WORKER;
    w->peer.client_state = &no_client;
    w->peer.index = id;
    w->peer.in_fd = w->peer.out_fd = w->stderr_fd = -1;
    w->id = id;
    w->pool = pool;
    w->state = SB_WORKER_STOPPED;
    sb_frame_init(&w->peer.in, limits->max_input_buffer);
    sb_outq_init(&w->peer.out, limits->max_output_queue);
    snprintf(w->env_id, sizeof w->env_id, "STDIO_BUS_WORKER_ID=%d", id);
    snprintf(w->env_pool, sizeof w->env_pool, "STDIO_BUS_POOL_ID=%.256s", pool->id);
    w->stderr_buf = malloc(SB_WORKER_STDERR_LINE);
    if (!w->stderr_buf || sb_restart_init(&w->restarts, limits->max_restarts) < 0)
        return STDIO_BUS_ERR;
    sb_worker_name(w);
    return STDIO_BUS_OK;
}

void sb_worker_fini(sb_worker *w) {
    sb_frame_fini(&w->peer.in);
    sb_outq_fini(&w->peer.out);
    sb_restart_fini(&w->restarts);
    free(w->stderr_buf);
    w->stderr_buf = NULL;
}

int sb_worker_start(sb_worker *w) {
    char *extra_env[] = {w->env_id, w->env_pool, NULL};
    sb_child child;
    int exec_errno;
    w->pid = -1;
    w->reaped = false;
    sb_worker_name(w);
    /* A connection's worker leads a process group, so that stopping it
     * stops what it started too (issue 27): see sb_worker_signal. */
    unsigned flags = w->pool->affinity ? SB_SPAWN_GROUP : 0;
    if (sb_spawn(w->pool->resolved, w->pool->argv, extra_env, flags, &child, &exec_errno) < 0) {
        if (exec_errno)
            sb_error(w->peer.name, "exec %s failed: %s", w->pool->resolved, strerror(exec_errno));
        else
            sb_error(w->peer.name, "cannot start %s: %s", w->pool->resolved, strerror(errno));
        return STDIO_BUS_ERR;
    }
    w->pid = child.pid;
    w->peer.out_fd = child.stdin_fd;
    w->peer.in_fd = child.stdout_fd;
    w->stderr_fd = child.stderr_fd;
    w->stderr_len = 0;
    w->peer.in_eof = false;
    w->peer.blocked_on = NULL;
    w->peer.full_since_ms = 0;
    sb_worker_name(w);
    sb_info(w->peer.name, "started %s", w->pool->resolved);
    return STDIO_BUS_OK;
}

void sb_worker_signal(sb_worker *w, int sig) {
    if (w->pid > 0 && !w->reaped) /* a reaped pid may be someone else's by now */
        kill(w->pool->affinity ? -w->pid : w->pid, sig);
}

void sb_worker_end_group(sb_worker *w) {
    if (w->pool->affinity && w->pid > 0 && !w->reaped)
        kill(-w->pid, SIGKILL);
}

static int64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void report_dropped(sb_worker *w) {
    if (!w->relay_dropped)
        return;
    sb_warn(w->peer.name,
            "%zu byte(s) of worker stderr dropped (%ld line(s)): over %d bytes of log "
            "per second",
            w->relay_dropped, w->relay_dropped_lines, SB_WORKER_STDERR_BUDGET);
    w->relay_dropped = 0;
    w->relay_dropped_lines = 0;
}

static void relay_line(sb_worker *w, const char *line, size_t len) {
    if (!sb_log_enabled(SB_LOG_INFO))
        return;
    int64_t now = now_ms();
    if (now - w->relay_since_ms >= 1000) {
        report_dropped(w);
        w->relay_since_ms = now;
        w->relay_used = 0;
    }
    size_t cost = len + SB_WORKER_RELAY_LINE_COST;
    if (w->relay_used + cost > SB_WORKER_STDERR_BUDGET) {
        w->relay_dropped += len + 1;
        w->relay_dropped_lines++;
        return;
    }
    w->relay_used += cost;
    if (len && line[len - 1] == '\r')
        len--;
    sb_log(SB_LOG_INFO, w->peer.name, "stderr: %.*s", (int)len, line);
}

size_t sb_worker_pipe_pending(int fd) {
    int n;
    if (ioctl(fd, FIONREAD, &n) < 0 || n < 0)
        return SB_WORKER_EXIT_READ_MAX;
    return (size_t)n < SB_WORKER_EXIT_READ_MAX ? (size_t)n : SB_WORKER_EXIT_READ_MAX;
}

int sb_worker_relay_stderr(sb_worker *w, bool at_exit) {
    int rc = STDIO_BUS_OK;
    size_t left = at_exit ? sb_worker_pipe_pending(w->stderr_fd) : SB_WORKER_STDERR_LINE;
    while (left > 0) {
        size_t room = SB_WORKER_STDERR_LINE - w->stderr_len;
        ssize_t n = read(w->stderr_fd, w->stderr_buf + w->stderr_len, room < left ? room : left);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK))
                rc = STDIO_BUS_EOF;
            break;
        }
        w->stderr_len += (size_t)n;
        left -= (size_t)n;
        size_t start = 0;
        char *nl;
        while ((nl = memchr(w->stderr_buf + start, '\n', w->stderr_len - start))) {
            relay_line(w, w->stderr_buf + start, (size_t)(nl - (w->stderr_buf + start)));
            start = (size_t)(nl - w->stderr_buf) + 1;
        }
        if (start == 0 && w->stderr_len == SB_WORKER_STDERR_LINE) {
            relay_line(w, w->stderr_buf, w->stderr_len); /* split an over-long line */
            start = w->stderr_len;
        }
        memmove(w->stderr_buf, w->stderr_buf + start, w->stderr_len - start);
        w->stderr_len -= start;
        if (!at_exit)
            break; /* one read per wake-up: a chatty worker must not starve the loop */
    }
    if ((rc == STDIO_BUS_EOF || at_exit) && w->stderr_len) {
        relay_line(w, w->stderr_buf, w->stderr_len);
        w->stderr_len = 0;
    }
    if (rc == STDIO_BUS_EOF || at_exit)
        report_dropped(w);
    return rc;
}
