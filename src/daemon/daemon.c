/* The daemon's phases (serving, lingering after stdin EOF, draining at
 * shutdown, done) and its loop: signals, timers, the end of each dispatch
 * round, start-up and tear-down. */
#include "daemon.h"
#include "bus.h"
#include "bus_limits.h"
#include "clients.h"
#include "clock.h"
#include "fdlimit.h"
#include "listener.h"
#include "log.h"
#include "memory.h"
#include "phase.h"
#include "relay.h"
#include "signals.h"
#include "status.h"
#include "stderr_watch.h"
#include "supervise.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* What the daemon's loop holds beside the bus, which no other part of the
 * daemon reads: the listening socket, the stderr watch, the signal fd. */
typedef struct {
    sb_bus bus;
    sb_listener listener;
    sb_stderr_watch stderr_watch;
    int signal_fd;
} sb_daemon;

/* ---- shutdown (spec 10) --------------------------------------------- */

static void remove_socket_file(sb_listener *ln) {
    if (!sb_net_unlink_unix(ln->unix_path, &ln->unix_id)) /* SB-I-22 */
        sb_warn(NULL, "unix:%s is no longer our socket file: left in place", ln->unix_path);
    ln->unix_path = NULL;
}

static void begin_shutdown(sb_daemon *dm, const char *why) {
    sb_bus *d = &dm->bus;
    if (d->phase >= SB_PHASE_DRAINING)
        return; /* SB-I-21: a second trigger changes nothing */
    sb_info(NULL, "shutting down (%s)", why);
    sb_phase_enter(d, SB_PHASE_DRAINING,
                   sb_now_ms() + (int64_t)d->limits->drain_timeout_sec * 1000);
    sb_listener *ln = &dm->listener;
    if (ln->fd >= 0) { /* SB-10.2-1 */
        sb_loop_del(&d->loop, ln->fd);
        close(ln->fd);
        ln->fd = -1;
        sb_timers_disarm(&d->timers, SB_TIMER_ACCEPT);
        if (ln->accept_failing)
            sb_info(NULL, "%ld connection(s) closed unserved since accept() last failed",
                    ln->accept_refused);
        if (ln->unix_path)
            remove_socket_file(ln);
    }
    for (int i = 0; i < STDIO_BUS_MAX_CONNECTIONS; i++)
        if (d->clients.at[i].peer.kind == SB_PEER_CLIENT)
            sb_watch_update(d, &d->clients.at[i].peer);
    sb_supervise_stop_all(d); /* SB-10.2-2 */
}

static bool clients_flushed(const sb_bus *d) {
    for (int i = 0; i < STDIO_BUS_MAX_CONNECTIONS; i++)
        if (d->clients.at[i].peer.kind == SB_PEER_CLIENT &&
            sb_outq_len(&d->clients.at[i].peer.out) && d->clients.at[i].state != SB_CLIENT_DOOMED)
            return false;
    return true;
}

/* ---- the loop ------------------------------------------------------- */

static void on_signal_event(sb_loop *l, void *data, int fd, short revents) {
    sb_daemon *dm = data;
    (void)l;
    (void)fd;
    (void)revents;
    int sig;
    bool child = false;
    while ((sig = sb_signals_next()) > 0) {
        if (sig == SIGCHLD)
            child = true;
        else if (sig == SIGTERM || sig == SIGINT || sig == SIGQUIT) /* SB-3.1-6, SB-I-48 */
            begin_shutdown(dm, sig == SIGTERM ? "SIGTERM" : sig == SIGINT ? "SIGINT" : "SIGQUIT");
        else /* SB-I-48: SIGHUP, SIGUSR1, SIGUSR2 */
            sb_info(NULL, "%s received: ignored (nothing to reload)",
                    sig == SIGHUP    ? "SIGHUP"
                    : sig == SIGUSR1 ? "SIGUSR1"
                                     : "SIGUSR2");
    }
    if (child) /* SB-7.1.1-1 */
        sb_supervise_reap(&dm->bus);
}

static void finish_round(sb_daemon *dm) {
    sb_bus *d = &dm->bus;
    /* Peers resumed after backpressure may hold complete lines that no new
     * read will announce. */
    for (int i = 0;; i++) {
        if (d->reoffer_held) { /* the one place held clients are released */
            d->reoffer_held = false;
            sb_relay_release_held(d);
        }
        if (i >= d->round.ready.count)
            break;
        sb_peer *p = d->round.ready.at[i];
        p->queued = false;
        if (p->kind == SB_PEER_FREE || sb_peer_client_state(p) == SB_CLIENT_DOOMED)
            continue;
        sb_relay_verdict v = sb_relay_process(d, p);
        if (v.event == SB_RELAY_OK)
            continue;
        if (p->kind == SB_PEER_WORKER)
            sb_supervise_verdict(d, &d->workers[p->index], v);
        else
            sb_clients_verdict(d, sb_bus_client(d, p), v);
    }
    d->round.ready.count = 0;
    sb_relay_flush(d);
    if (d->over_budget)
        sb_clients_enforce_budget(d); /* SB-X-17 */
    if (d->round.stdin_lost.count)
        sb_supervise_stdin_lost(d);
    for (int i = 0; i < d->round.doomed.count; i++) {
        sb_peer *p = d->round.doomed.at[i];
        if (p->kind == SB_PEER_CLIENT)
            sb_clients_close(d, sb_bus_client(d, p));
    }
    d->round.doomed.count = 0;
    sb_listener_slot_freed(&dm->listener, d); /* SB-X-21: a client's end may have freed one */
}

/* Buffers of a client that has not sent anything for a sweep period go
 * back to the allocator, so an idle connection costs a few hundred bytes
 * (issue 7) while a busy one allocates nothing per message. The sweep
 * timer runs only while some client still holds buffers. */
static void check_pending_full(sb_bus *d);

static void sweep_idle(sb_bus *d, int64_t now) {
    check_pending_full(d); /* SB-I-47: while clients are active, once a sweep period */
    bool again = false;
    for (int i = 0; i < STDIO_BUS_MAX_CONNECTIONS; i++) {
        sb_client *cl = &d->clients.at[i];
        sb_peer *c = &cl->peer;
        if (c->kind != SB_PEER_CLIENT)
            continue;
        if (!cl->active && sb_frame_pending(&c->in) == 0)
            sb_frame_shrink(&c->in);
        if (!cl->active && sb_outq_len(&c->out) == 0)
            sb_outq_clear(&c->out);
        if (d->limits->max_client_memory)
            sb_relay_recount(d, cl); /* SB-X-17 */
        if (cl->active || c->in.data || c->out.data)
            again = true;
        cl->active = false;
    }
    /* A worker's buffers grown for one large line go back too; those of
     * the busy size stay, so a busy worker allocates nothing per message. */
    for (int i = 0; i < d->worker_count; i++) {
        sb_peer *p = &d->workers[i].peer;
        if (p->in.cap > SB_FRAME_BUSY_CAP && sb_frame_pending(&p->in) == 0)
            sb_frame_shrink(&p->in);
        if (p->out.cap > SB_FRAME_BUSY_CAP && sb_outq_len(&p->out) == 0)
            sb_outq_clear(&p->out);
    }
    if (again)
        sb_timers_arm(&d->timers, SB_TIMER_SWEEP, now + SB_IDLE_SWEEP_MS);
    else
        sb_memory_give_back(); /* the load is over: its freed pages go back (issue 27) */
}

/* SB-I-47: requests of departed clients may fill the pending table until
 * their worker answers or exits. Say once per episode how much of it they
 * hold, so that the worker to restart can be found. */
static void check_pending_full(sb_bus *d) {
    if (!sb_router_requests_full(&d->router)) {
        d->pending_full = false;
        return;
    }
    if (d->pending_full)
        return;
    d->pending_full = true;
    sb_warn(NULL,
            "pending request table full (%d entries, %d of them for clients that have left): "
            "new requests are discarded until workers answer or exit",
            STDIO_BUS_MAX_PENDING_REQUESTS, d->router.orphans);
}

/* The phase's deadline (its timer, the one place it is kept) passed with
 * something still to wait for. */
static void phase_deadline_reached(sb_daemon *dm, int64_t now) {
    sb_bus *d = &dm->bus;
    if (d->phase == SB_PHASE_LINGER) {
        begin_shutdown(dm, "stdin EOF, drain_timeout_sec reached with requests in flight");
    } else if (d->phase == SB_PHASE_DRAINING) { /* SB-10.2-4 */
        sb_supervise_kill_remaining(d);
        sb_phase_enter(d, SB_PHASE_KILLING, now + SB_KILL_REAP_MS);
    } else if (d->phase == SB_PHASE_KILLING) {
        sb_supervise_report_unreaped(d, SB_KILL_REAP_MS);
        sb_phase_enter(d, SB_PHASE_DONE, 0);
    }
}

/* Every timer due at `now`, earliest first. Timers re-armed at or before
 * `now` while firing wait for the next turn (which polls without waiting). */
static void check_timers(sb_daemon *dm, int64_t now) {
    sb_bus *d = &dm->bus;
    if (d->round.ending.count) /* answers routed last turn may have settled them */
        sb_clients_close_ended(d);
    int id;
    for (int n = d->timers.count; n > 0 && (id = sb_timers_take(&d->timers, now)) >= 0; n--) {
        switch (id) {
        case SB_TIMER_PHASE:
            phase_deadline_reached(dm, now);
            break;
        case SB_TIMER_SWEEP:
            sweep_idle(d, now);
            break;
        case SB_TIMER_ACCEPT:
            sb_listener_resume(&dm->listener, d);
            break;
        default: {
            int worker, client, which = sb_bus_timer_decode(d, id, &worker, &client);
            if (worker >= 0)
                sb_supervise_timer(d, &d->workers[worker], which, now);
            else
                sb_clients_timer(d, &d->clients.at[client], which, now);
        }
        }
    }
}

/* Milliseconds poll may sleep: until the next timer, or until an fd or a
 * signal wakes it (-1) when none is armed. One clock read a turn: the time
 * this turn took (well under a millisecond but for huge batches) only makes
 * a timer late by as much, and saves a clock read per message at low load. */
static int poll_timeout(const sb_bus *d, int64_t now) {
    int64_t deadline = sb_timers_next(&d->timers);
    if (deadline == INT64_MAX)
        return -1;
    int64_t wait = deadline - now;
    return wait < 0 ? 0 : wait > 60000 ? 60000 : (int)wait;
}

/* The phase ends early once nothing is left to wait for. */
static void check_phase(sb_daemon *dm) {
    sb_bus *d = &dm->bus;
    if (d->phase == SB_PHASE_LINGER) {
        const sb_client *c = &d->clients.at[0];
        bool client_done = c->peer.kind != SB_PEER_CLIENT ||
                           (!sb_clients_has_pending(d, c) && sb_outq_len(&c->peer.out) == 0);
        if (client_done)
            begin_shutdown(dm, "stdin EOF, nothing in flight");
    }
    /* SB-X-22: and the strays killed are reaped, so that what they leave
     * comes back to the daemon, not to init */
    if (d->phase == SB_PHASE_DRAINING && d->live_workers == 0 && d->reaper.left == 0 &&
        clients_flushed(d))
        sb_phase_enter(d, SB_PHASE_DONE, 0);
    /* past drain_timeout_sec the clients are not waited for (SB-10.2-4) */
    if (d->phase == SB_PHASE_KILLING && d->live_workers == 0 && d->reaper.left == 0)
        sb_phase_enter(d, SB_PHASE_DONE, 0);
}

static void daemon_fini(sb_daemon *dm) {
    sb_bus *d = &dm->bus;
    /* SB-10.2-5 */
    for (int i = 0; i < STDIO_BUS_MAX_CONNECTIONS && d->clients.at; i++)
        if (d->clients.at[i].peer.kind == SB_PEER_CLIENT) {
            sb_peer *c = &d->clients.at[i].peer;
            if (c->in_fd > STDERR_FILENO)
                close(c->in_fd);
            if (c->out_fd > STDERR_FILENO && c->out_fd != c->in_fd)
                close(c->out_fd);
            sb_frame_fini(&c->in);
            sb_outq_fini(&c->out);
        }
    for (int i = 0; i < d->worker_count && d->workers; i++) {
        sb_supervise_close_fds(d, &d->workers[i]);
        sb_worker_fini(&d->workers[i]);
    }
    if (dm->listener.fd >= 0) {
        close(dm->listener.fd);
        if (dm->listener.unix_path)
            remove_socket_file(&dm->listener);
    }
    if (dm->listener.spare_fd >= 0)
        close(dm->listener.spare_fd);
    if (dm->signal_fd >= 0)
        sb_signals_close();
    if (d->mode == SB_MODE_STDIO) { /* give the terminal back as we found it */
        fcntl(STDIN_FILENO, F_SETFL, d->stdin_flags);
        fcntl(STDOUT_FILENO, F_SETFL, d->stdout_flags);
    }
    sb_bus_fini(d);
}

int sb_daemon_run(const sb_config *cfg, const sb_options *opt) {
    sb_daemon dm = {.signal_fd = -1};
    sb_bus *d = &dm.bus;
    sb_listener_init(&dm.listener);
    sb_memory_tune();
    sb_fdlimit_raise(sb_bus_worker_slots(cfg));
    int rc = sb_bus_init(d, cfg, opt);
    d->client_end = sb_supervise_client_end; /* SB-X-16, SB-X-19 */
    if (rc == 0)
        sb_supervise_reaper_start(d); /* SB-X-22 */
    if (rc == 0) {
        dm.signal_fd = sb_signals_open();
        if (dm.signal_fd < 0 ||
            sb_loop_add(&d->loop, dm.signal_fd, POLLIN, on_signal_event, &dm) < 0) {
            sb_error(NULL, "cannot set up signal handling: %s", strerror(errno));
            rc = STDIO_BUS_ERR;
        }
    }
    /* Workers first, so a client's first line finds them running. */
    for (int i = 0; rc == 0 && i < d->worker_count; i++) /* SB-3.1-2; SB-X-15: not per connection */
        if (!d->workers[i].pool->per_connection && sb_supervise_spawn(d, &d->workers[i]) < 0)
            sb_supervise_restart_at(d, &d->workers[i], sb_now_ms() + d->limits->restart_backoff_ms);
    if (rc == 0)
        rc = opt->mode == SB_MODE_STDIO ? sb_clients_start_stdio(d)
                                        : sb_listener_start(&dm.listener, d, opt);
    if (rc < 0) {
        begin_shutdown(&dm, "start-up failed");
        while (d->phase != SB_PHASE_DONE) {
            int64_t now = sb_now_ms();
            check_timers(&dm, now);
            check_phase(&dm);
            if (d->phase == SB_PHASE_DONE)
                break;
            sb_loop_run_once(&d->loop, poll_timeout(d, now));
        }
        daemon_fini(&dm);
        return 1;
    }
    sb_info(NULL, "stdio_bus %s ready: %d pool(s), %d worker(s), %s mode", SB_VERSION,
            cfg->pool_count, cfg->worker_count,
            opt->mode == SB_MODE_STDIO  ? "stdio"
            : opt->mode == SB_MODE_UNIX ? "unix"
                                        : "tcp");

    while (d->phase != SB_PHASE_DONE) {
        int64_t now = sb_now_ms();
        check_timers(&dm, now);
        finish_round(&dm);
        check_phase(&dm);
        if (d->phase == SB_PHASE_DONE)
            break;
        if (sb_log_backlog())
            sb_stderr_watch_tend(&dm.stderr_watch, &d->loop);
        if (sb_loop_run_once(&d->loop, poll_timeout(d, now)) < 0) {
            sb_error(NULL, "poll failed: %s", strerror(errno));
            begin_shutdown(&dm, "poll failure");
        }
        finish_round(&dm);
    }
    sb_relay_flush(d); /* what the last exits wrote, as far as clients take it */
    sb_info(NULL, "shutdown complete");
    daemon_fini(&dm);
    return 0; /* SB-10.2-6 */
}
