/* What a peer's departure takes from the router's tables: a client's
 * sessions, its worker requests and its floors, its pending requests kept
 * as a departed client's (SB-7.2, SB-I-47, SB-I-53); a worker's pending
 * requests and sessions (SB-7.1.2). */
#include "router.h"

typedef struct {
    sb_router *r;
    void (*on_request)(void *, const sb_request *);
    void *ctx;
} drop_visit;

static void orphan_visit_request(void *ctx, const sb_request *q) {
    drop_visit *v = ctx;
    v->r->orphans_on[q->receiver]++; /* SB-I-53: the worker that holds it */
    if (v->on_request)
        v->on_request(v->ctx, q);
}

/* What of a floor an entry count leaves free. */
static int below_floor(int held) {
    return held < SB_ROUTER_FLOOR ? SB_ROUTER_FLOOR - held : 0;
}

int sb_router_drop_client(sb_router *r, int client, void (*on_request)(void *, const sb_request *),
                          void *ctx, int *requests) {
    drop_visit v = {r, on_request, ctx};
    r->floor_free -= below_floor(sb_pending_count_sender(&r->requests, client));
    r->upstream_floor_free -= below_floor(sb_pending_count_receiver(&r->upstream, client));
    int sessions = sb_sessions_drop_client(&r->sessions, client, NULL, NULL);
    *requests = sb_pending_orphan_sender(&r->requests, client, orphan_visit_request, &v);
    r->orphans += *requests;
    sb_pending_drop_receiver(&r->upstream, client, NULL, NULL);
    r->clients--;
    return sessions;
}

int sb_router_drop_sessions(sb_router *r, int worker,
                            void (*on_session)(void *, const sb_session *), void *ctx) {
    return sb_sessions_drop_worker(&r->sessions, worker, on_session, ctx);
}

static void drop_visit_request(void *ctx, const sb_request *q) {
    drop_visit *v = ctx;
    if (q->sender < 0) {
        v->r->orphans--; /* its client left already */
        return;
    }
    if (sb_pending_count_sender(&v->r->requests, q->sender) <= SB_ROUTER_FLOOR)
        v->r->floor_free++; /* the entry goes back to its client's floor */
    if (v->on_request)
        v->on_request(v->ctx, q);
}

static void drop_visit_upstream(void *ctx, const sb_request *q) {
    sb_router *r = ctx;
    if (sb_pending_count_receiver(&r->upstream, q->receiver) <= SB_ROUTER_FLOOR)
        r->upstream_floor_free++;
}

int sb_router_drop_worker(sb_router *r, int worker, void (*on_request)(void *, const sb_request *),
                          void *ctx) {
    drop_visit v = {r, on_request, ctx};
    int n = sb_pending_drop_receiver(&r->requests, worker, drop_visit_request, &v);
    r->orphans_on[worker] = 0;
    sb_pending_drop_sender(&r->upstream, worker, drop_visit_upstream, r);
    return n;
}
