/* Worker supervision for connection affinity (SB-X-10..SB-X-16): a
 * connection's own worker, and the connections a worker's exit ends. */
#include "client_state.h"
#include "log.h"
#include "supervise.h"

/* SB-X-15: a connection to a per_connection pool gets a worker of its own,
 * spawned now, before its first line is read (as SB-I-38), in a slot whose
 * last process has been reaped. Returns false when there is none (every
 * slot in use, or the spawn failed): the caller closes the connection. */
bool sb_supervise_attach(sb_bus *d, sb_peer *c) {
    if (d->cfg->affinity != SB_AFFINITY_EXCLUSIVE)
        return true;
    for (int i = 0; i < d->worker_count; i++) {
        sb_worker *w = &d->workers[i];
        if (w->pid > 0)
            continue;
        if (sb_supervise_spawn(d, w) < 0) {
            sb_warn(c->name, "refused: its worker could not be started");
            return false;
        }
        sb_affinity_bind(&d->router.affinity, c->index, w->id);
        sb_info(c->name, "bound to %s, started for it", w->peer.name);
        return true;
    }
    sb_warn(c->name, "refused: all %d worker(s) of the per_connection pool are in use",
            d->worker_count);
    return false;
}

/* The client leaves: it is unbound, and (SB-X-16) its own worker is
 * stopped as at shutdown: stdin closed, SIGTERM, SIGKILL after
 * drain_timeout_sec. */
void sb_supervise_detach(sb_bus *d, sb_peer *c) {
    if (d->cfg->affinity == SB_AFFINITY_NONE)
        return;
    int id = sb_affinity_unbind(&d->router.affinity, c->index);
    if (id < 0 || d->cfg->affinity != SB_AFFINITY_EXCLUSIVE)
        return;
    sb_supervise_stop_own_worker(d, &d->workers[id]);
}

/* SB-X-14: a worker's exit ends the connections bound to it, whose server
 * state is gone with it (as the MCP stdio transport ends when its server
 * dies). What the worker wrote before exiting has been routed (SB-I-40):
 * the client is no longer read, and is closed once its output queue is
 * written, or after drain_timeout_sec. At shutdown the connections stay
 * until the end (SB-I-21). Returns true for a per_connection slot, which
 * is not restarted (SB-X-15). */
bool sb_supervise_affinity_exited(sb_bus *d, sb_worker *w) {
    if (d->cfg->affinity == SB_AFFINITY_NONE)
        return false;
    int client;
    while ((client = sb_affinity_first(&d->router.affinity, w->id)) >= 0) {
        sb_affinity_unbind(&d->router.affinity, client);
        sb_peer *c = &d->clients[client];
        if (d->phase >= SB_PHASE_DRAINING || c->state == SB_CLIENT_DOOMED ||
            c->state == SB_CLIENT_CLOSING)
            continue;
        sb_warn(c->name, "its worker %d exited: closing the connection once its output is written",
                w->id);
        sb_client_enter(d, c, SB_CLIENT_CLOSING);
        if (!c->dirty)
            sb_relay_close_if_flushed(d, c);
    }
    return w->pool->per_connection;
}
