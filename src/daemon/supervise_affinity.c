/* Worker supervision for connection affinity (SB-X-10..SB-X-16, SB-X-19..
 * SB-X-21): a connection's own worker and the end of a connection
 * reaching it. The connections a worker's exit ends: affinity_exit.c. */
#include "client_state.h"
#include "clock.h"
#include "log.h"
#include "supervise.h"

#include <signal.h>
#include <stdio.h>

/* Workers of the pool that serve a connection: bound to one, and not
 * retiring. A retiring one (its client left, SB-X-19) does not count
 * against instances while it exits (SB-X-21). */
static int serving(const sb_bus *d) {
    int n = 0;
    for (int i = 0; i < d->worker_count; i++)
        if (d->workers[i].pid > 0 && !d->workers[i].retired_ms)
            n++;
    return n;
}

/* A slot whose last worker has been reaped (SB-X-15), or NULL. */
static sb_worker *free_slot(const sb_bus *d) {
    for (int i = 0; i < d->worker_count; i++)
        if (d->workers[i].pid <= 0)
            return &d->workers[i];
    return NULL;
}

bool sb_supervise_has_room(const sb_bus *d) {
    return d->cfg->affinity != SB_AFFINITY_EXCLUSIVE ||
           (serving(d) < d->cfg->pools[0].instances && free_slot(d));
}

/* SB-X-23: fewer than `instances` workers serve, yet every slot holds one
 * still exiting after its client left (one that ignores the end of its
 * input and SIGTERM keeps its slot for stop_grace_ms + drain_timeout_sec):
 * the one retiring longest gives its slot up now, SIGKILL to its group,
 * rather than a client be refused while no one is served. */
void sb_supervise_make_room(sb_bus *d) {
    if (d->cfg->affinity != SB_AFFINITY_EXCLUSIVE || serving(d) >= d->cfg->pools[0].instances ||
        free_slot(d))
        return;
    sb_worker *oldest = NULL;
    for (int i = 0; i < d->worker_count; i++) {
        sb_worker *w = &d->workers[i];
        if (w->pid > 0 && !w->reaped && w->room_kill)
            return; /* room is on its way: one slot per waiting client is enough */
        if (w->pid > 0 && !w->reaped && w->retired_ms &&
            (!oldest || w->retired_ms < oldest->retired_ms))
            oldest = w;
    }
    if (!oldest)
        return;
    sb_warn(oldest->peer.name,
            "still exiting %lld ms after its client left: SIGKILL, to make room for a new client",
            (long long)(sb_now_ms() - oldest->retired_ms));
    oldest->room_kill = true;
    sb_worker_signal(oldest, SIGKILL);
}

/* SB-X-21: a client the daemon cannot serve is told why in a JSON-RPC
 * notification before it is closed, not reset silently. */
static void refuse(sb_bus *d, sb_client *c, const char *why) {
    sb_warn(c->peer.name, "refused: %s", why);
    (void)d;
    sb_relay_notify_refused(c, why);
}

/* SB-X-15: a connection to a per_connection pool gets a worker of its own,
 * spawned now, before its first line is read (as SB-I-38), in a slot whose
 * last process has been reaped; at most `instances` serve at once, and a
 * slot whose worker is exiting after its client left is not one of them
 * (SB-X-21: the pool has twice as many slots). Returns false when there is
 * none (every slot in use, or the spawn failed): the caller closes the
 * connection once the notice is written. */
bool sb_supervise_attach(sb_bus *d, sb_client *c) {
    if (d->cfg->affinity != SB_AFFINITY_EXCLUSIVE)
        return true;
    int instances = d->cfg->pools[0].instances;
    if (serving(d) >= instances) {
        char why[160];
        snprintf(why, sizeof why, "all %d worker(s) of the per_connection pool are in use",
                 instances);
        refuse(d, c, why);
        return false;
    }
    for (int i = 0; i < d->worker_count; i++) {
        sb_worker *w = &d->workers[i];
        if (w->pid > 0)
            continue;
        if (sb_supervise_spawn(d, w) < 0) {
            refuse(d, c, "its worker could not be started");
            return false;
        }
        sb_router_bind(&d->router, c->peer.index, w->id);
        sb_info(c->peer.name, "bound to %s, started for it", w->peer.name);
        return true;
    }
    refuse(d, c, "every slot of the per_connection pool holds a worker still exiting");
    return false;
}

/* SB-X-19: the client ended (its input, all of it forwarded, or it is
 * doomed): when it is the only client bound to its worker, the worker is
 * retired now, as the client's end would reach it were it spawned by the
 * client itself, and before another client's line is routed. */
static void sb_supervise_client_ended(sb_bus *d, sb_client *c) {
    if (d->cfg->affinity == SB_AFFINITY_NONE || d->phase >= SB_PHASE_DRAINING)
        return;
    int id = sb_affinity_worker(&d->router.affinity, c->peer.index);
    if (id >= 0 && sb_affinity_count(&d->router.affinity, id) == 1)
        sb_supervise_retire(d, &d->workers[id]);
}

/* The client leaves: it is unbound, and a worker it leaves with no client
 * is retired (SB-X-16, SB-X-19, SB-X-20). */
static void sb_supervise_detach(sb_bus *d, sb_client *c) {
    if (d->cfg->affinity == SB_AFFINITY_NONE)
        return;
    int id = sb_router_unbind(&d->router, c->peer.index);
    if (id >= 0 && d->phase < SB_PHASE_DRAINING && sb_affinity_count(&d->router.affinity, id) == 0)
        sb_supervise_retire(d, &d->workers[id]);
}

void sb_supervise_client_end(sb_bus *d, sb_client *c, sb_client_end how) {
    if (how == SB_CLIENT_END_GONE)
        sb_supervise_detach(d, c);
    else
        sb_supervise_client_ended(d, c);
}
