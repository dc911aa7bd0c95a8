#include "router.h"
#include "bus_limits.h"
#include "status.h"

#include <stdlib.h>
#include <string.h>

int sb_router_init(sb_router *r, int workers, int client_slots) {
    memset(r, 0, sizeof *r);
    r->running = calloc((size_t)workers, sizeof *r->running);
    r->orphans_on = calloc((size_t)(workers ? workers : 1), sizeof *r->orphans_on);
    if (!r->running || !r->orphans_on ||
        sb_sessions_init(&r->sessions, STDIO_BUS_MAX_SESSIONS, workers, client_slots) < 0 ||
        sb_pending_init(&r->requests, STDIO_BUS_MAX_PENDING_REQUESTS, workers, client_slots) < 0 ||
        sb_pending_init(&r->upstream, STDIO_BUS_MAX_PENDING_REQUESTS, client_slots, workers) < 0) {
        sb_router_fini(r);
        return STDIO_BUS_ERR;
    }
    r->worker_count = workers;
    r->client_slots = client_slots;
    r->upstream_share = SB_ROUTER_UPSTREAM_SHARE;
    r->orphan_budget = SB_ROUTER_ORPHAN_BUDGET;
    return STDIO_BUS_OK;
}

void sb_router_fini(sb_router *r) {
    sb_sessions_fini(&r->sessions);
    sb_pending_fini(&r->requests);
    sb_pending_fini(&r->upstream);
    sb_affinity_fini(&r->affinity);
    free(r->running);
    free(r->orphans_on);
    memset(r, 0, sizeof *r);
}

void sb_router_recycling(sb_router *r, int delta) {
    r->recycling += delta;
}

void sb_router_bind(sb_router *r, int client, int worker) {
    sb_affinity_bind(&r->affinity, client, worker);
}

int sb_router_unbind(sb_router *r, int client) {
    return sb_affinity_unbind(&r->affinity, client);
}

void sb_router_set_running(sb_router *r, int worker, bool running) {
    r->running[worker] = running;
}

bool sb_router_client_has_pending(const sb_router *r, int client) {
    return sb_slots_first(&r->requests.slots, SB_PENDING_BY_SENDER, client) != SB_SLOT_NIL;
}

bool sb_router_requests_full(const sb_router *r) {
    return r->requests.slots.count >= r->requests.slots.capacity;
}

int sb_router_set_affinity(sb_router *r, sb_affinity_mode mode) {
    if (mode != SB_AFFINITY_NONE &&
        sb_affinity_init(&r->affinity, r->worker_count, r->client_slots) < 0)
        return STDIO_BUS_ERR;
    r->affinity_mode = mode;
    return STDIO_BUS_OK;
}

size_t sb_router_token_len(const sb_token *t) {
    return t->type == SB_JSON_STRING ? t->raw_len - 2 : t->raw_len;
}

static int is_blank(const char *line, size_t len) {
    for (size_t i = 0; i < len; i++)
        if (line[i] != ' ' && line[i] != '\t' && line[i] != '\r' && line[i] != '\n')
            return 0;
    return 1;
}

/* Parses the line and checks the routing fields (SB-4.3-2, SB-I-2, SB-I-18).
 * Returns false with d->action = IGNORE or REJECT when it must not be routed. */
static bool extract(sb_route *d, const char *line, size_t len) {
    if (is_blank(line, len)) {
        d->action = SB_ROUTE_IGNORE;
        return false;
    }
    int rc = sb_fields_parse(line, len, &d->fields);
    d->action = SB_ROUTE_REJECT;
    if (rc == STDIO_BUS_ERR) {
        d->why = SB_WHY_NOT_JSON;
        return false;
    }
    if (rc != STDIO_BUS_OK) {
        d->why = SB_WHY_NOT_OBJECT;
        return false;
    }
    const sb_token *id = &d->fields.id, *sid = &d->fields.session_id;
    if (id->type != SB_JSON_ABSENT && id->type != SB_JSON_STRING && id->type != SB_JSON_NUMBER &&
        id->type != SB_JSON_NULL) {
        d->why = SB_WHY_BAD_ID_TYPE;
        return false;
    }
    if (id->type != SB_JSON_ABSENT && sb_router_token_len(id) > STDIO_BUS_MAX_REQUEST_ID_LEN) {
        d->why = SB_WHY_ID_TOO_LONG;
        return false;
    }
    if (sid->type != SB_JSON_ABSENT && sid->type != SB_JSON_STRING) {
        d->why = SB_WHY_BAD_SESSION_TYPE;
        return false;
    }
    if (d->fields.method.type != SB_JSON_ABSENT && d->fields.method.type != SB_JSON_STRING) {
        d->why = SB_WHY_BAD_METHOD_TYPE; /* SB-I-27 */
        return false;
    }
    if (sid->type != SB_JSON_ABSENT && sb_router_token_len(sid) > STDIO_BUS_MAX_SESSION_ID_LEN) {
        d->why = SB_WHY_SESSION_TOO_LONG;
        return false;
    }
    d->action = SB_ROUTE_DROP;
    return true;
}

static void drop(sb_route *d, sb_route_why why) {
    d->action = SB_ROUTE_DROP;
    d->why = why;
}

static sb_idkey key_of(const sb_token *id) {
    return sb_idkey_of(id->raw, id->raw_len, id->plain);
}

#define SB_PICK_NONE (-1) /* no worker is running */
#define SB_PICK_BUSY (-2) /* every running worker holds this id (SB-I-45) */
#define SB_PICK_DOWN (-3) /* the connection's worker is not running (SB-X-11) */
#define SB_PICK_WAIT (-4) /* every running worker serves another client (SB-X-24) */

/* A request's pending entry, made as its worker is chosen (SB-6.2-1..3). */
typedef struct {
    int client;
    sb_idkey id;
    const char *session;
    size_t session_len;
} sb_request_key;

/* Records the request on worker w unless w holds an id of the same value:
 * a worker's answer carries only the id, so two such requests on one worker
 * could get each other's answers (SB-I-3, SB-I-45). */
static bool record_on(sb_router *r, int w, const sb_request_key *q) {
    return sb_pending_add_unique(&r->requests, w, q->client, q->id, q->session, q->session_len) !=
           STDIO_BUS_EAGAIN;
}

/* Round-robin over running workers (SB-6.1.1-1, SB-6.1.3-1, SB-I-11). A
 * request (q not NULL) skips workers that hold its id and is recorded on
 * the one chosen. The cursor moves only when a worker is chosen. */
static int pick_worker(sb_router *r, const sb_request_key *q) {
    int busy = SB_PICK_NONE;
    for (int n = 0; n < r->worker_count; n++) {
        int w = (r->rr_next + n) % r->worker_count;
        if (!r->running[w])
            continue;
        if (q && !record_on(r, w, q)) {
            busy = SB_PICK_BUSY;
            continue;
        }
        r->rr_next = (w + 1) % r->worker_count;
        return w;
    }
    return busy;
}

/* SB-X-20: the first running worker, from the round-robin cursor on, that
 * no client is bound to; a request is recorded on it. */
static int pick_idle(sb_router *r, const sb_request_key *q) {
    for (int n = 0; n < r->worker_count; n++) {
        int w = (r->rr_next + n) % r->worker_count;
        if (!r->running[w] || sb_affinity_count(&r->affinity, w) > 0)
            continue;
        if (q && !record_on(r, w, q))
            continue;
        r->rr_next = (w + 1) % r->worker_count;
        return w;
    }
    return SB_PICK_NONE;
}

static bool any_running(const sb_router *r) {
    for (int w = 0; w < r->worker_count; w++)
        if (r->running[w])
            return true;
    return false;
}

/* SB-X-11: a connection's messages without sessionId go to the worker it
 * is bound to; an unbound connection is bound, at its first one, to an
 * idle worker if one is running (SB-X-20), else it waits, held, for one
 * (a recycled worker back, SB-X-20, or a client gone, SB-X-24): it is never
 * bound beside another client. Under SB_AFFINITY_EXCLUSIVE the daemon binds
 * each connection as it spawns its worker, and nothing is picked for an
 * unbound one: every worker belongs to another connection (SB-X-15). */
static int pick_bound(sb_router *r, int client, const sb_request_key *q, sb_route *d) {
    int w = sb_affinity_worker(&r->affinity, client);
    if (w == SB_AFFINITY_UNBOUND) {
        if (r->affinity_mode == SB_AFFINITY_EXCLUSIVE)
            return SB_PICK_NONE;
        w = pick_idle(r, q);
        if (w < 0)
            return r->recycling || any_running(r) ? SB_PICK_WAIT : SB_PICK_NONE;
        sb_affinity_bind(&r->affinity, client, w);
        d->new_binding = true;
        return w;
    }
    if (!r->running[w])
        return SB_PICK_DOWN;
    if (q && !record_on(r, w, q))
        return SB_PICK_BUSY; /* SB-I-45 */
    return w;
}

static void hold_for(sb_route *d, sb_route_why why) {
    d->action = SB_ROUTE_HOLD;
    d->why = why;
}

static void hold(sb_route *d) {
    hold_for(d, SB_WHY_ID_IN_USE);
}

static bool is_response(const sb_fields *f) {
    return f->result.type != SB_JSON_ABSENT || f->error.type != SB_JSON_ABSENT;
}

/* SB-I-14: the client answers a server-to-client request: to the worker
 * that sent it, else to the worker of the client's session. */
static void route_answer(sb_router *r, int client, sb_route *d) {
    const sb_token *id = &d->fields.id, *sid = &d->fields.session_id;
    bool has_id = id->type != SB_JSON_ABSENT, has_sid = sid->type != SB_JSON_ABSENT;
    if (has_id) {
        int w = sb_pending_take(&r->upstream, client, key_of(id), has_sid ? sid->raw : NULL,
                                has_sid ? sid->raw_len : 0);
        if (w >= 0 && sb_pending_count_receiver(&r->upstream, client) < SB_ROUTER_FLOOR)
            r->upstream_floor_free++; /* issue 32: back to its floor */
        if (w >= 0 && r->running[w]) {
            d->action = SB_ROUTE_TO_WORKER;
            d->target = w;
            return;
        }
    }
    if (has_sid) {
        sb_session *s = sb_sessions_find(&r->sessions, sid->raw, sid->raw_len);
        if (s && s->client == client && r->running[s->worker]) {
            d->action = SB_ROUTE_TO_WORKER;
            d->target = s->worker;
            return;
        }
    }
    drop(d, SB_WHY_NO_REQUEST);
}

/* SB-I-54: answers pass a held request (its worker may wait for them
 * before it answers anything); what is not an answer, malformed lines
 * included, waits for its turn. */
sb_route sb_router_answer_from_client(sb_router *r, int client, const char *line, size_t len) {
    sb_route d = {0};
    if (!extract(&d, line, len) || !is_response(&d.fields) ||
        d.fields.method.type != SB_JSON_ABSENT) {
        hold(&d);
        return d;
    }
    route_answer(r, client, &d);
    return d;
}

sb_route sb_router_from_client(sb_router *r, int client, const char *line, size_t len) {
    sb_route d = {0};
    if (!extract(&d, line, len))
        return d;
    const sb_token *id = &d.fields.id, *sid = &d.fields.session_id;
    bool has_id = id->type != SB_JSON_ABSENT, has_sid = sid->type != SB_JSON_ABSENT;

    if (is_response(&d.fields) && d.fields.method.type == SB_JSON_ABSENT) {
        route_answer(r, client, &d);
        return d;
    }

    d.is_request = has_id; /* SB-6.2: a message with an id is a Request */
    sb_request_key q;
    if (has_id) {
        q.client = client;
        q.id = key_of(id);
        q.session = has_sid ? sid->raw : NULL;
        q.session_len = has_sid ? sid->raw_len : 0;
    }
    const sb_request_key *request = has_id ? &q : NULL;
    if (has_id) {
        /* SB-I-51: a client below its floor is always served; beyond it,
         * it takes what leaves every connected client's floor free, all the
         * table when it is alone; SB-I-54: else the request waits, never
         * dropped */
        int held = sb_pending_count_sender(&r->requests, client);
        int free = r->requests.slots.capacity - r->requests.slots.count;
        if (free <= 0) {
            hold_for(&d, SB_WHY_PENDING_FULL); /* SB-I-18, SB-I-54 */
            return d;
        }
        if (held >= SB_ROUTER_FLOOR && free <= r->floor_free) {
            hold_for(&d, SB_WHY_CLIENT_SHARE);
            return d;
        }
    }

    int target;
    if (has_sid) {
        sb_session *s = sb_sessions_find(&r->sessions, sid->raw, sid->raw_len);
        if (s) {
            if (s->client != client) { /* SB-I-4 */
                d.other = s->client;
                drop(&d, SB_WHY_FOREIGN_SESSION);
                return d;
            }
            target = s->worker; /* SB-6.1.2-1, SB-6.1.2-2 */
            if (request && !record_on(r, target, request)) {
                hold(&d); /* SB-I-45: the session's worker already holds this id */
                return d;
            }
        } else {
            if (r->sessions.slots.count >= r->sessions.slots.capacity) {
                drop(&d, SB_WHY_SESSIONS_FULL); /* SB-I-18 */
                return d;
            }
            /* SB-X-15: a connection with its own worker keeps its sessions there */
            target = r->affinity_mode == SB_AFFINITY_EXCLUSIVE ? pick_bound(r, client, request, &d)
                                                               : pick_worker(r, request);
            if (target == SB_PICK_BUSY) {
                hold(&d); /* SB-I-45 */
                return d;
            }
            if (target < 0) {
                drop(&d,
                     target == SB_PICK_DOWN ? SB_WHY_WORKER_DOWN : SB_WHY_NO_WORKER); /* SB-I-12 */
                return d;
            }
            /* SB-6.1.1-2, SB-6.1.1-3 */
            sb_sessions_add(&r->sessions, sid->raw, sid->raw_len, target, client);
            d.new_session = true;
        }
    } else {
        /* SB-6.1.3: no Session entry is created */
        target = r->affinity_mode ? pick_bound(r, client, request, &d) : pick_worker(r, request);
        if (target == SB_PICK_BUSY) {
            hold(&d); /* SB-I-45 */
            return d;
        }
        if (target == SB_PICK_WAIT) {
            hold_for(&d, SB_WHY_NO_FREE_WORKER); /* SB-X-20, SB-X-24 */
            return d;
        }
        if (target < 0) {
            drop(&d, target == SB_PICK_DOWN ? SB_WHY_WORKER_DOWN : SB_WHY_NO_WORKER);
            return d;
        }
    }

    /* A request was recorded on its worker as it was chosen (SB-6.2-1..3). */
    if (request && sb_pending_count_sender(&r->requests, client) <= SB_ROUTER_FLOOR)
        r->floor_free--; /* issue 32: an entry of its floor is taken */
    d.action = SB_ROUTE_TO_WORKER;
    d.target = target;
    return d;
}

/* SB-I-52: a worker's request to client d->target is recorded unless the
 * client already owes its share of answers, or the table is full: then it
 * is dropped (false), and goes nowhere. */
static bool record_upstream(sb_router *r, sb_route *d, int worker, const char *session,
                            size_t session_len) {
    /* issue 32: below its floor always, beyond it while every connected
     * client's floor stays free */
    int owed = sb_pending_count_receiver(&r->upstream, d->target);
    int free = r->upstream.slots.capacity - r->upstream.slots.count;
    if (owed >= r->upstream_share ||
        (owed >= SB_ROUTER_FLOOR && free > 0 && free <= r->upstream_floor_free)) {
        drop(d, SB_WHY_UPSTREAM_SHARE);
        return false;
    }
    if (sb_pending_add(&r->upstream, d->target, worker, key_of(&d->fields.id), session,
                       session_len) < 0) {
        drop(d, SB_WHY_UPSTREAM_FULL);
        return false;
    }
    if (owed < SB_ROUTER_FLOOR)
        r->upstream_floor_free--;
    return true;
}

sb_route sb_router_from_worker(sb_router *r, int worker, const char *line, size_t len) {
    sb_route d = {0};
    if (!extract(&d, line, len))
        return d;
    const sb_token *id = &d.fields.id, *sid = &d.fields.session_id;
    bool has_id = id->type != SB_JSON_ABSENT, has_sid = sid->type != SB_JSON_ABSENT;

    if (is_response(&d.fields)) { /* SB-6.3.1 */
        int client = has_id ? sb_pending_take(&r->requests, worker, key_of(id),
                                              has_sid ? sid->raw : NULL, has_sid ? sid->raw_len : 0)
                            : STDIO_BUS_ENOTFOUND;
        if (client < 0) { /* SB-6.3.1-4, SB-I-23 */
            if (client == SB_PENDING_ORPHAN) {
                r->orphans--; /* its entry is gone with the answer */
                r->orphans_on[worker]--;
            }
            drop(&d, client == SB_PENDING_ORPHAN ? SB_WHY_CLIENT_GONE : SB_WHY_UNKNOWN_ID);
            return d;
        }
        if (sb_pending_count_sender(&r->requests, client) < SB_ROUTER_FLOOR)
            r->floor_free++; /* issue 32: back to its client's floor */
        d.action = SB_ROUTE_TO_CLIENT;
        d.target = client;
        return d;
    }
    if (has_sid) { /* SB-6.3.2 */
        sb_session *s = sb_sessions_find(&r->sessions, sid->raw, sid->raw_len);
        if (!s) {
            drop(&d, SB_WHY_UNKNOWN_SESSION);
            return d;
        }
        d.target = s->client;
        if (has_id && d.fields.method.type != SB_JSON_ABSENT &&
            /* SB-I-15: remember the server-to-client request so the client's
             * reply finds its way back (SB-I-52: within the client's share). */
            !record_upstream(r, &d, worker, sid->raw, sid->raw_len))
            return d;
        d.action = SB_ROUTE_TO_CLIENT;
        return d;
    }
    if (r->affinity_mode) { /* SB-X-12 */
        int client = sb_affinity_client(&r->affinity, worker);
        if (client < 0) { /* never a guess, never a broadcast */
            drop(&d, client == SB_AFFINITY_SHARED ? SB_WHY_SHARED_WORKER : SB_WHY_UNBOUND_WORKER);
            return d;
        }
        d.target = client;
        if (has_id && d.fields.method.type != SB_JSON_ABSENT &&
            /* SB-X-13: the client's answer goes back to this worker (SB-I-14) */
            !record_upstream(r, &d, worker, NULL, 0))
            return d;
        d.action = SB_ROUTE_TO_CLIENT;
        return d;
    }
    drop(&d, SB_WHY_UNROUTABLE); /* SB-6.3.3 */
    return d;
}
