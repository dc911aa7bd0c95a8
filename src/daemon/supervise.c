#include "supervise.h"
#include "affinity_exit.h"
#include "clock.h"
#include "log.h"
#include "relay.h"
#include "status.h"

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void on_worker_event(sb_loop *l, void *data, int fd, short revents);

/* ---- workers -------------------------------------------------------- */

static void on_worker_stderr(sb_loop *l, void *data, int fd, short revents);

/* Sets one of the worker's deadlines (its timer, where it is stored);
 * 0 = none. A timer that fires is due: it is disarmed when what it waits
 * for is over. */
static void schedule(sb_bus *d, sb_worker *w, int which, int64_t at) {
    if (at)
        sb_bus_arm(d, &w->peer, which, at);
    else
        sb_bus_disarm(d, &w->peer, which);
}

void sb_supervise_restart_at(sb_bus *d, sb_worker *w, int64_t at) {
    schedule(d, w, SB_TIMER_RESTART, at);
}

void sb_supervise_timer(sb_bus *d, sb_worker *w, int which, int64_t now) {
    switch (which) {
    case SB_TIMER_RESTART:
        if (d->phase >= SB_PHASE_DRAINING)
            break;
        if (sb_supervise_spawn(d, w) < 0 && w->pid <= 0) {
            /* exec failed: count it as an exit of this slot */
            long delay = sb_restart_decide(&w->restarts, d->limits, now);
            if (delay < 0) {
                w->given_up = true;
                schedule(d, w, SB_TIMER_RESTART, 0);
                sb_error(w->peer.name, "not restarting: max_restarts reached");
            } else {
                schedule(d, w, SB_TIMER_RESTART, now + delay);
            }
        }
        break;
    case SB_TIMER_LOST:
        if (w->pid > 0 && w->state == SB_WORKER_RUNNING) { /* SB-I-39, SB-I-46 */
            if (w->lost_stdout)
                sb_supervise_fail(d, w, SB_MUTE_OUTPUT, "closed its stdout");
            else
                sb_supervise_fail(d, w, SB_KEEP_OUTPUT, "closed its stdin");
        }
        break;
    case SB_TIMER_KILL:
        if (w->pid > 0 && w->retired_ms && !w->term_sent && d->phase < SB_PHASE_DRAINING) {
            /* SB-X-19: its stop grace is over */
            sb_warn(w->peer.name,
                    "did not exit within stop_grace_ms=%ld of its stdin closing: SIGTERM",
                    d->limits->stop_grace_ms);
            w->term_sent = true;
            sb_relay_close_stdin(d, &w->peer); /* what was not written by now never will be */
            w->close_when_written = false;
            schedule(d, w, SB_TIMER_KILL, now + (int64_t)d->limits->drain_timeout_sec * 1000);
            sb_worker_signal(w, SIGTERM);
        } else if (w->pid > 0 && d->phase < SB_PHASE_DRAINING) {
            sb_warn(w->peer.name, "did not exit after SIGTERM: SIGKILL");
            sb_worker_signal(w, SIGKILL);
        }
        break;
    case SB_TIMER_FULL: /* SB-7.3.1-4 */
        if (w->peer.full_since_ms &&
            now - w->peer.full_since_ms >= (int64_t)d->limits->backpressure_timeout_sec * 1000)
            sb_supervise_fail(d, w, SB_KEEP_OUTPUT,
                              "stdin queue full for backpressure_timeout_sec=%d",
                              d->limits->backpressure_timeout_sec);
        break;
    }
}

void sb_supervise_close_fds(sb_bus *d, sb_worker *w) {
    sb_peer *p = &w->peer;
    sb_relay_close_stdin(d, &w->peer);
    if (p->in_fd >= 0) {
        sb_loop_del(&d->loop, p->in_fd);
        close(p->in_fd);
        p->in_fd = -1;
    }
    if (w->stderr_fd >= 0) {
        sb_worker_relay_stderr(w, true);
        sb_loop_del(&d->loop, w->stderr_fd);
        close(w->stderr_fd);
        w->stderr_fd = -1;
    }
    sb_frame_fini(&p->in);
    sb_frame_init(&p->in, d->limits->max_input_buffer);
    p->blocked_on = NULL;
}

/* SB-X-20: w is no longer on its way back to idle: started, or never to be. */
static void recycled(sb_bus *d, sb_worker *w) {
    if (w->recycling) {
        w->recycling = false;
        sb_router_recycling(&d->router, -1);
        if (d->round.held.count)
            d->reoffer_held = true; /* those waiting for it bind elsewhere, or share */
    }
}

int sb_supervise_spawn(sb_bus *d, sb_worker *w) {
    schedule(d, w, SB_TIMER_RESTART, 0);
    recycled(d, w);
    sb_worker_enter(w, SB_WORKER_STARTING, &d->router);
    if (sb_worker_start(w) < 0) {
        sb_worker_enter(w, SB_WORKER_STOPPED, &d->router);
        return STDIO_BUS_ERR;
    }
    sb_worker_enter(w, SB_WORKER_RUNNING, &d->router);
    d->live_workers++;
    w->peer.on_event = on_worker_event;
    if (sb_loop_add(&d->loop, w->peer.in_fd, POLLIN, on_worker_event, w) < 0 ||
        sb_loop_add(&d->loop, w->peer.out_fd, 0, on_worker_event, w) < 0 ||
        sb_loop_add(&d->loop, w->stderr_fd, POLLIN, on_worker_stderr, w) < 0) {
        sb_error(w->peer.name, "out of memory registering its pipes");
        sb_supervise_fail(d, w, SB_MUTE_OUTPUT, "cannot be watched");
        return STDIO_BUS_ERR;
    }
    if (d->round.held.count)
        d->reoffer_held = true; /* SB-I-45: one more worker to go to */
    return STDIO_BUS_OK;
}

static void log_session_invalidated(void *ctx, const sb_session *s) {
    sb_worker *w = ctx;
    sb_debug(w->peer.name, "session %.*s invalidated", (int)s->key_len, s->key);
}

static void invalidate_sessions(sb_bus *d, sb_worker *w) {
    int n = sb_router_drop_sessions(&d->router, w->id, log_session_invalidated, w);
    if (n)
        sb_warn(w->peer.name, "%d session(s) invalidated", n);
}

/* SB-5.3: log, invalidate its sessions, SIGTERM, restart per policy (once
 * the exit is reaped). With SB_MUTE_OUTPUT its later output is not routed;
 * a worker whose stdin broke keeps its output, so responses it wrote
 * before exiting still arrive (SB-I-40). */
void sb_supervise_fail(sb_bus *d, sb_worker *w, sb_fail_output output, const char *fmt, ...) {
    if (w->pid <= 0 || w->state == SB_WORKER_MUTED)
        return;
    if (w->state == SB_WORKER_STOPPING || w->state == SB_WORKER_RETIRING) {
        /* already on its way out; maybe now mute it */
        if (output == SB_MUTE_OUTPUT) {
            sb_worker_enter(w, SB_WORKER_MUTED, &d->router);
            sb_watch_update(d, &w->peer);
        }
        return;
    }
    char reason[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(reason, sizeof reason, fmt, ap);
    va_end(ap);
    sb_error(w->peer.name, "%s: %s", reason,
             w->reaped ? "the worker has exited already" : "terminating the worker");
    sb_worker_enter(w, output == SB_MUTE_OUTPUT ? SB_WORKER_MUTED : SB_WORKER_STOPPING, &d->router);
    invalidate_sessions(d, w);
    if (d->round.held.count)
        d->reoffer_held = true; /* SB-I-45: fewer workers to wait for */
    schedule(d, w, SB_TIMER_KILL, sb_now_ms() + (int64_t)d->limits->drain_timeout_sec * 1000);
    sb_worker_signal(w, SIGTERM);
    if (w->peer.out_fd >= 0)
        sb_relay_close_stdin(d, &w->peer); /* nothing more goes to it */
    sb_watch_update(d, &w->peer);
}

/* The worker's stdin broke (EPIPE, or POLLHUP/POLLERR on the pipe). Almost
 * always the worker is exiting and SIGCHLD is on its way: stop sending to
 * it, keep routing what it wrote, and only if it is still alive a moment
 * later treat it as a worker that closed its stdin (SB-I-39). */
#define SB_STDIN_LOST_GRACE_MS 1000

void sb_supervise_stdin_lost(sb_bus *d) {
    for (int i = 0; i < d->round.stdin_lost.count; i++) {
        sb_worker *w = (sb_worker *)d->round.stdin_lost.at[i];
        /* out_fd >= 0: the slot has a new process since (SB-X-15) */
        if (w->peer.out_fd < 0 && w->state == SB_WORKER_RUNNING && d->phase < SB_PHASE_DRAINING &&
            !sb_timers_armed(&d->timers, sb_bus_timer(d, &w->peer, SB_TIMER_LOST))) {
            schedule(d, w, SB_TIMER_LOST, sb_now_ms() + SB_STDIN_LOST_GRACE_MS);
            w->lost_stdout = false;
        }
    }
    d->round.stdin_lost.count = 0;
}

/* A worker's stdout at EOF: how long its exit may take to be seen before
 * it counts as a worker that closed its stdout (SB-I-46). */
#define SB_STDOUT_LOST_GRACE_MS 1000

/* The worker's stdout ended. */
void sb_supervise_stdout_eof(sb_bus *d, sb_worker *w) {
    sb_peer *p = &w->peer;
    p->in_eof = true;
    /* Almost always the worker is exiting and its exit (SIGCHLD) does
     * the cleanup. Until then it answers nothing more: no new session
     * or sessionless message goes to it, and if it is still running a
     * moment later it has closed its stdout (SB-I-46). */
    sb_loop_del(&d->loop, p->in_fd);
    close(p->in_fd);
    p->in_fd = -1;
    sb_worker_publish(w, &d->router);
    if (w->state == SB_WORKER_RUNNING && d->phase < SB_PHASE_DRAINING &&
        !sb_timers_armed(&d->timers, sb_bus_timer(d, p, SB_TIMER_LOST))) {
        schedule(d, w, SB_TIMER_LOST, sb_now_ms() + SB_STDOUT_LOST_GRACE_MS);
        w->lost_stdout = true;
    }
}

void sb_supervise_verdict(sb_bus *d, sb_worker *w, sb_relay_verdict v) {
    switch (v.event) {
    case SB_RELAY_OK:
        break;
    case SB_RELAY_ENDED:
    case SB_RELAY_READ_FAILED: /* its stdout failed: as at EOF */
        sb_supervise_stdout_eof(d, w);
        break;
    case SB_RELAY_MALFORMED: /* SB-5.3 */
        sb_supervise_fail(d, w, SB_MUTE_OUTPUT, "malformed output (%s)", sb_router_why(v.why));
        break;
    case SB_RELAY_OVERFLOW: /* SB-7.3.2-1, SB-7.3.2-2 */
        sb_supervise_fail(d, w, SB_MUTE_OUTPUT, "line longer than max_input_buffer (%zu bytes)",
                          d->limits->max_input_buffer);
        break;
    case SB_RELAY_NOMEM:
        sb_supervise_fail(d, w, SB_MUTE_OUTPUT, "out of memory");
        break;
    }
}

typedef struct {
    sb_bus *d;
    sb_worker *w;
} orphan_ctx;

static void discard_orphan(void *ctx, const sb_request *r) {
    orphan_ctx *oc = ctx;
    sb_client *c = &oc->d->clients.at[r->sender];
    /* SB-7.1.2-4; a retired worker's are its departed client's (SB-X-19) */
    sb_log(oc->w->retired_ms ? SB_LOG_INFO : SB_LOG_WARN, oc->w->peer.name,
           "pending request id=%.*s from %s discarded: worker exited", (int)r->id_len, r->id,
           c->peer.name);
    sb_relay_send_error(oc->d, c, r->id, r->id_len, r->session, r->session_len, "worker exited");
}

/* SB-I-40: responses the worker wrote before exiting are still in the
 * pipe: route them before the cleanup discards what they answer. Orphans
 * of the worker may go on writing into that pipe forever, so what is
 * read is what the pipe holds now, and no more. */
static void drain_at_exit(sb_bus *d, sb_worker *w) {
    sb_peer *p = &w->peer;
    if (p->in_fd < 0)
        return;
    size_t left = sb_worker_pipe_pending(p->in_fd);
    while (left > 0 && w->state != SB_WORKER_MUTED && !p->blocked_on) {
        size_t avail;
        char *space = sb_frame_space(&p->in, &avail);
        if (!space) {
            if (errno != ENOMEM)
                sb_supervise_verdict(d, w, (sb_relay_verdict){SB_RELAY_OVERFLOW, SB_WHY_NONE, 0});
            return;
        }
        ssize_t got;
        do
            got = read(p->in_fd, space, avail < left ? avail : left);
        while (got < 0 && errno == EINTR);
        if (got <= 0)
            return;
        sb_frame_commit(&p->in, (size_t)got);
        left -= (size_t)got;
        sb_relay_verdict v = sb_relay_process(d, p);
        if (v.event != SB_RELAY_OK) {
            sb_supervise_verdict(d, w, v);
            return;
        }
    }
}

sb_worker_exit sb_supervise_exited(sb_bus *d, sb_worker *w, int status) {
    sb_worker_exit e = {.retired = w->retired_ms != 0};
    drain_at_exit(d, w);
    d->live_workers--;
    if (sb_frame_pending(&w->peer.in)) /* SB-I-25 */
        sb_warn(w->peer.name, "%zu byte(s) after its last newline discarded",
                sb_frame_pending(&w->peer.in));
    /* An exit we asked for is news, not a warning. */
    bool asked = d->phase >= SB_PHASE_DRAINING || e.retired; /* SB-X-19: its client left */
    sb_log_level level = asked ? SB_LOG_INFO : SB_LOG_WARN;
    if (WIFSIGNALED(status))
        sb_log(level, w->peer.name, "exited: killed by signal %d (%s)", WTERMSIG(status),
               strsignal(WTERMSIG(status)));
    else
        sb_log(level, w->peer.name, "exited with status %d", WEXITSTATUS(status));

    /* SB-7.1.2-1..4, each step logged. */
    sb_worker_enter(w, SB_WORKER_STOPPED, &d->router);
    sb_info(w->peer.name, "state STOPPED");
    sb_supervise_close_fds(d, w);
    sb_info(w->peer.name, "pipes closed");
    invalidate_sessions(d, w);
    orphan_ctx oc = {d, w};
    int discarded = sb_router_drop_worker(&d->router, w->id, discard_orphan, &oc);
    if (discarded)
        sb_log(e.retired ? SB_LOG_INFO : SB_LOG_WARN, w->peer.name,
               "%d pending request(s) discarded", discarded);
    if (d->round.held.count)
        d->reoffer_held = true; /* SB-I-45: its ids are free */
    w->pid = -1;
    schedule(d, w, SB_TIMER_KILL, 0);
    schedule(d, w, SB_TIMER_LOST, 0);

    w->retired_ms = 0;
    w->term_sent = w->room_kill = w->close_when_written = false;
    return e;
}

void sb_supervise_after_exit(sb_bus *d, sb_worker *w, sb_worker_exit e) {
    if (d->phase >= SB_PHASE_DRAINING) {
        recycled(d, w);
        return;
    }
    if (e.retired) { /* SB-X-20: recycled, not failed: a fresh one at once */
        sb_info(w->peer.name, "restarting fresh for its next client");
        schedule(d, w, SB_TIMER_RESTART, sb_now_ms());
        return;
    }
    /* SB-7.1.3-1..3, SB-I-9, SB-I-10 */
    long delay = sb_restart_decide(&w->restarts, d->limits, sb_now_ms());
    if (delay < 0) {
        w->given_up = true;
        sb_error(w->peer.name,
                 "not restarting: %d restart(s) within restart_window_sec=%d (max_restarts=%d)",
                 sb_restart_recent(&w->restarts, d->limits, sb_now_ms()),
                 d->limits->restart_window_sec, d->limits->max_restarts);
        return;
    }
    schedule(d, w, SB_TIMER_RESTART, sb_now_ms() + delay);
    sb_warn(w->peer.name, "restarting in %ld ms", delay);
}

static void on_worker_event(sb_loop *l, void *data, int fd, short revents) {
    sb_worker *w = data;
    sb_bus *d = sb_bus_of_loop(l);
    sb_peer *p = &w->peer;
    if (fd == p->out_fd) {
        if (revents & (POLLERR | POLLHUP)) {
            sb_relay_stdin_lost(d, &w->peer);
            return;
        }
        if (revents & POLLOUT)
            sb_relay_write(d, p);
        return;
    }
    if (fd == p->in_fd && !sb_watch_park_if_paused(d, p, fd, revents))
        sb_supervise_verdict(d, w, sb_relay_read(d, p));
}

static void on_worker_stderr(sb_loop *l, void *data, int fd, short revents) {
    sb_worker *w = data;
    sb_bus *d = sb_bus_of_loop(l);
    (void)revents;
    if (sb_worker_relay_stderr(w, false) == STDIO_BUS_EOF) {
        sb_loop_del(&d->loop, fd);
        close(fd);
        w->stderr_fd = -1;
    }
}

static sb_worker *worker_of_pid(sb_bus *d, pid_t pid) {
    for (int i = 0; i < d->worker_count; i++)
        if (d->workers[i].pid == pid)
            return &d->workers[i];
    return NULL;
}

void sb_supervise_reap(sb_bus *d) {
    /* SB-7.1.1-2: WNOHANG in a loop; one SIGCHLD may stand for many exits. */
    for (;;) {
        /* Look before reaping (WNOWAIT): while a worker is a zombie its
         * process group id cannot be reused, so what it left in its group
         * is killed without hitting anyone else (SB-X-18). */
        siginfo_t info;
        info.si_pid = 0;
        if (waitid(P_ALL, 0, &info, WEXITED | WNOHANG | WNOWAIT) < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        if (info.si_pid <= 0)
            break;
        sb_worker *w = worker_of_pid(d, info.si_pid);
        if (w)
            sb_worker_end_group(w);
        int status;
        pid_t pid;
        do
            pid = waitpid(info.si_pid, &status, WNOHANG);
        while (pid < 0 && errno == EINTR);
        if (pid <= 0)
            break;
        if (!w)
            continue; /* a stray (SB-X-22): its exit is no worker's, nor a restart's */
        /* Routing its last lines may fail it (5.3): no signal then. */
        w->reaped = true;
        sb_worker_exit e = sb_supervise_exited(d, w, status);
        if (!sb_supervise_affinity_exited(d, w, e.retired)) /* SB-X-15: else its slot waits */
            sb_supervise_after_exit(d, w, e);
    }
    /* SB-X-22: a worker that exited left its children to the daemon */
    sb_supervise_end_strays(d);
}

/* SB-X-16, SB-X-19: the worker's only client ended: the worker sees the
 * end of its input as it would with that client alone, once what the
 * client sent is written to it; it serves no one else (SB-X-20) and gets
 * stop_grace_ms to exit on its own, then SIGTERM, then SIGKILL after
 * drain_timeout_sec. What it writes meanwhile is still routed. */
void sb_supervise_retire(sb_bus *d, sb_worker *w) {
    if (w->pid <= 0 || w->state != SB_WORKER_RUNNING)
        return; /* already on its way out */
    sb_info(w->peer.name, "its client ended: closing its stdin, letting it exit");
    w->retired_ms = sb_now_ms();
    if (!w->pool->per_connection && !w->recycling) { /* SB-X-20: back fresh once it exits */
        w->recycling = true;
        sb_router_recycling(&d->router, +1);
    }
    sb_worker_enter(w, SB_WORKER_RETIRING, &d->router); /* no one new is bound to it */
    if (d->round.held.count)
        d->reoffer_held = true; /* SB-I-45: fewer workers to wait for */
    if (sb_outq_len(&w->peer.out) == 0)
        sb_relay_close_stdin(d, &w->peer);
    else
        w->close_when_written = true; /* sb_relay_write closes it */
    schedule(d, w, SB_TIMER_KILL, sb_now_ms() + d->limits->stop_grace_ms);
    sb_watch_update(d, &w->peer);
}

/* SB-I-53: requests of departed clients stay until their worker answers
 * or exits (SB-I-47). Past their budget, the worker that holds the most of
 * them, and answers none, is the one to restart, as SB-I-17 does with a
 * worker that stops reading: its exit discards them. */
void sb_supervise_shed_orphans(sb_bus *d) {
    int excess = sb_router_orphan_excess(&d->router);
    while (excess > 0) {
        int id = sb_router_orphan_holder(&d->router);
        if (id < 0)
            return; /* the rest are on workers already on their way out */
        sb_worker *w = &d->workers[id];
        int held = d->router.orphans_on[id];
        sb_supervise_fail(d, w, SB_KEEP_OUTPUT,
                          "holds %d unanswered request(s) of clients that have left, more than "
                          "departed clients may hold (%d in all)",
                          held, d->router.orphan_budget);
        if (d->router.running[id])
            return; /* could not be failed: never loop on it */
        excess -= held;
    }
}
