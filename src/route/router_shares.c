/* The fair shares' bookkeeping (issue 32, SB-I-51..SB-I-53): the floors a
 * connected client holds, and the requests of departed clients: when there
 * are too many, and which worker may be failed to shed them. */
#include "router.h"

#include <stdbool.h>

void sb_router_add_client(sb_router *r, int client) {
    (void)client;
    r->clients++;
    r->floor_free += SB_ROUTER_FLOOR; /* a newcomer holds nothing yet */
    r->upstream_floor_free += SB_ROUTER_FLOOR;
}

/* SB-I-53: over their budget, or taking entries the connected clients'
 * floors need (issue 32 item 2). */
int sb_router_orphan_excess(const sb_router *r) {
    int over = r->orphans - r->orphan_budget;
    int short_of = r->floor_free - (r->requests.slots.capacity - r->requests.slots.count);
    if (short_of > r->orphans)
        short_of = r->orphans;
    return over > short_of ? over : short_of;
}

/* Failing a worker ends every request and session on it (5.3): only one
 * whose every pending request is a departed client's and that holds no
 * session is failed, so no connected client loses anything by it. */
static bool only_orphans_on(const sb_router *r, int w) {
    return sb_pending_count_receiver(&r->requests, w) == r->orphans_on[w] &&
           sb_slots_first(&r->sessions.slots, SB_SESSION_BY_WORKER, w) == SB_SLOT_NIL;
}

int sb_router_orphan_holder(const sb_router *r) {
    int holder = -1;
    for (int w = 0; w < r->worker_count; w++)
        if (r->running[w] && r->orphans_on[w] > 0 && only_orphans_on(r, w) &&
            (holder < 0 || r->orphans_on[w] > r->orphans_on[holder]))
            holder = w;
    return holder;
}
