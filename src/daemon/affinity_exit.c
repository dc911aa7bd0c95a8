/* The connections a worker's exit ends under connection affinity (SB-X-14):
 * below supervision, which calls it when a worker has exited, and calling
 * nothing of supervision back. */
#include "affinity_exit.h"

#include "client_state.h"
#include "log.h"
#include "relay.h"

/* SB-X-14: a worker's exit ends the connections bound to it, whose server
 * state is gone with it (as the MCP stdio transport ends when its server
 * dies). What the worker wrote before exiting has been routed (SB-I-40):
 * the client is no longer read, and is closed once its output queue is
 * written, or after drain_timeout_sec. At shutdown the connections stay
 * until the end (SB-I-21). Returns true for a per_connection slot, which
 * is not restarted (SB-X-15). */
bool sb_supervise_affinity_exited(sb_bus *d, sb_worker *w, bool retired) {
    if (d->cfg->affinity == SB_AFFINITY_NONE)
        return false;
    int client;
    while ((client = sb_affinity_first(&d->router.affinity, w->id)) >= 0) {
        sb_router_unbind(&d->router, client);
        sb_client *c = &d->clients.at[client];
        if (d->phase >= SB_PHASE_DRAINING || c->state == SB_CLIENT_DOOMED ||
            c->state == SB_CLIENT_CLOSING)
            continue;
        /* retired: the client ended first (SB-X-19), its worker's exit is news */
        sb_log(retired ? SB_LOG_INFO : SB_LOG_WARN, c->peer.name,
               "its worker %d exited: closing the connection once its output is written", w->id);
        sb_client_enter(d, c, SB_CLIENT_CLOSING);
        if (!c->peer.dirty)
            sb_relay_close_if_flushed(d, c);
    }
    return w->pool->per_connection;
}
