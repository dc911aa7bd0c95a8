/* The routing decision (spec 6): pure, no I/O, no allocation.
 *
 * Given one line from a client or a worker, decides where it goes and
 * updates the Session table and the pending tables. The caller does the
 * I/O and the logging; the decision carries what it needs for both. */
#ifndef SB_ROUTER_H
#define SB_ROUTER_H

#include "affinity.h"
#include "fields.h"
#include "pending.h"
#include "sessions.h"

#include <stdbool.h>

typedef enum {
    SB_ROUTE_IGNORE = 0, /* blank line (SB-I-6) */
    SB_ROUTE_TO_WORKER,
    SB_ROUTE_TO_CLIENT,
    SB_ROUTE_DROP,   /* discard and log a warning; the source stays */
    SB_ROUTE_REJECT, /* malformed: close the client (4.3) / fail the worker (5.3) */
    SB_ROUTE_HOLD    /* SB-I-45, SB-I-54: not now; nothing was recorded, offer it again
                          * after a pending request ends (the client's later lines wait
                          * behind it, but for its answers to workers' requests) */
} sb_route_action;

typedef enum {
    SB_WHY_NONE = 0,
    /* REJECT */
    SB_WHY_NOT_JSON,
    SB_WHY_NOT_OBJECT,
    SB_WHY_BAD_ID_TYPE,
    SB_WHY_BAD_SESSION_TYPE,
    SB_WHY_BAD_METHOD_TYPE,
    SB_WHY_ID_TOO_LONG,
    SB_WHY_SESSION_TOO_LONG,
    /* DROP */
    SB_WHY_NO_WORKER,
    SB_WHY_FOREIGN_SESSION,
    SB_WHY_SESSIONS_FULL,
    SB_WHY_UNKNOWN_ID,
    SB_WHY_CLIENT_GONE,
    SB_WHY_UNKNOWN_SESSION,
    SB_WHY_UNROUTABLE,
    SB_WHY_NO_REQUEST,
    SB_WHY_WORKER_DOWN,    /* SB-X-11: the connection's worker is not running */
    SB_WHY_UNBOUND_WORKER, /* SB-X-12: no sessionId, and no client is bound to the worker */
    SB_WHY_SHARED_WORKER,  /* SB-X-12: no sessionId, and several clients are bound to it */
    SB_WHY_UPSTREAM_SHARE, /* SB-I-52: the client holds its share of worker requests (target) */
    SB_WHY_UPSTREAM_FULL,  /* SB-I-52: the table of worker requests is full (target) */
    /* HOLD */
    SB_WHY_ID_IN_USE,
    SB_WHY_CLIENT_SHARE,  /* SB-I-51, SB-I-54: the client holds its share of the pending table */
    SB_WHY_PENDING_FULL,  /* SB-I-18, SB-I-54: the pending table is full */
    SB_WHY_NO_FREE_WORKER /* SB-X-24: every running worker serves another client */
} sb_route_why;

typedef struct {
    sb_route_action action;
    sb_route_why why;
    int target;       /* worker or client id for TO_WORKER / TO_CLIENT */
    int other;        /* FOREIGN_SESSION: the owning client */
    bool is_request;  /* a client line with an id and no result/error */
    bool new_session; /* SB-6.1.1: the line created its session */
    bool new_binding; /* SB-X-11: the line bound its connection to the worker */
    sb_fields fields; /* raw tokens point into the line */
} sb_route;

typedef struct {
    sb_sessions sessions;
    sb_pending requests; /* client -> worker requests, keyed by worker */
    sb_pending upstream; /* worker -> client requests, keyed by client (SB-I-14) */
    bool *running;       /* per worker: may receive messages */
    int worker_count;
    int client_slots;
    int clients;                    /* connected (sb_router_add_client): one alone has no share */
    int rr_next;                    /* round-robin cursor (SB-6.1.1-1, SB-6.1.3-1) */
    sb_affinity_mode affinity_mode; /* SB_AFFINITY_NONE unless sb_router_set_affinity */
    sb_affinity affinity;           /* allocated only when affinity_mode is set */
    int recycling;      /* SB-X-20: workers being restarted fresh after their client left */
    int orphans;        /* requests of clients that have left, still pending (SB-I-23, SB-I-47) */
    int *orphans_on;    /* per worker: how many of them it holds (SB-I-53) */
    int upstream_share; /* SB-I-52: most worker requests one client may owe answers to */
    int floor_free;     /* SB-I-51: entries the connected clients' floors still hold free */
    int upstream_floor_free; /* SB-I-52: likewise in the table of worker requests */
    int orphan_budget;       /* SB-I-53: most requests of departed clients before one is shed */
} sb_router;

/* Fair shares of the tables (SB-I-52, SB-I-53): 256 requests of workers
 * awaiting one client's answers (a client that owes more answers than that
 * is not answering); half the table for the requests of clients that have
 * left. SB-I-51's share of the pending table is the floors below. */
#define SB_ROUTER_UPSTREAM_SHARE 256
#define SB_ROUTER_ORPHAN_BUDGET  (STDIO_BUS_MAX_PENDING_REQUESTS / 2)
/* Floors (issue 32): entries of each table reserved for every connected
 * client, whatever the others hold: the table over MAX_CONNECTIONS, so
 * 1024 clients at their floor fill it and no more. Beyond its floor a
 * client takes only what leaves every connected client's floor free. */
#define SB_ROUTER_FLOOR (STDIO_BUS_MAX_PENDING_REQUESTS / STDIO_BUS_MAX_CONNECTIONS)

/* Allocates every table once, sized from the hard limits. Workers start
 * not running. Returns 0 or STDIO_BUS_ERR. */
int sb_router_init(sb_router *r, int workers, int client_slots);
void sb_router_fini(sb_router *r);

void sb_router_set_running(sb_router *r, int worker, bool running);

/* SB-X-20: one more worker (+1) is on its way back to idle after its
 * client left, or one fewer (-1): while any is, a client waiting for an
 * idle worker waits rather than being told none runs. */
void sb_router_recycling(sb_router *r, int delta);

/* Turns on connection affinity (SB-X-11..SB-X-15); call once, after init.
 * Returns 0 or STDIO_BUS_ERR (out of memory). With SB_AFFINITY_CONNECTION
 * a client is bound to the worker round-robin picks for its first message
 * without a sessionId; with SB_AFFINITY_EXCLUSIVE the caller binds it
 * (sb_router_bind) when it spawns the client's worker, and
 * the client's new sessions go to that worker too. The caller unbinds a
 * client that leaves. */
int sb_router_set_affinity(sb_router *r, sb_affinity_mode mode);
/* SB-X-11, SB-X-15: binds client to worker; unbinds client, returning its
 * worker or -1 (sb_affinity_bind, sb_affinity_unbind on r->affinity). */
void sb_router_bind(sb_router *r, int client, int worker);
int sb_router_unbind(sb_router *r, int client);

/* A client connected: it counts toward the shares until it leaves
 * (sb_router_drop_client). */
void sb_router_add_client(sb_router *r, int client);

sb_route sb_router_from_client(sb_router *r, int client, const char *line, size_t len);
/* SB-I-54: a line of a held client read past its held request. A client
 * response is routed as sb_router_from_client routes it (TO_WORKER or
 * DROP); anything else is left where it is (HOLD), to be routed in its
 * turn. */
sb_route sb_router_answer_from_client(sb_router *r, int client, const char *line, size_t len);
sb_route sb_router_from_worker(sb_router *r, int worker, const char *line, size_t len);

/* The router's bookkeeping when a peer leaves. Callbacks may be NULL.
 *
 * A client left (SB-7.2-1..3): its sessions end; its requests in flight
 * stay as orphans until their worker answers or exits, so a late answer
 * reaches no one, not a newcomer reusing the id (SB-I-23); the requests
 * workers sent it are dropped. on_request sees each request orphaned.
 * Returns the sessions ended; *requests = the requests orphaned. */
int sb_router_drop_client(sb_router *r, int client, void (*on_request)(void *, const sb_request *),
                          void *ctx, int *requests);
/* The worker's sessions end (SB-5.3, SB-7.1.2-3); on_session sees each
 * first. Returns how many. */
int sb_router_drop_sessions(sb_router *r, int worker,
                            void (*on_session)(void *, const sb_session *), void *ctx);
/* The worker exited (SB-7.1.2-4): its pending requests are discarded, and
 * the requests it sent to clients. on_request sees each discarded request
 * of a client still connected (those of departed clients leave the orphan
 * count). Returns how many requests were discarded. */
int sb_router_drop_worker(sb_router *r, int worker, void (*on_request)(void *, const sb_request *),
                          void *ctx);
/* SB-I-53: how far the requests of departed clients exceed their budget
 * (<= 0: within it), and the running worker holding the most of them (-1
 * when none does). */
int sb_router_orphan_excess(const sb_router *r);
int sb_router_orphan_holder(const sb_router *r);

/* Whether the client has a request pending on a worker. */
bool sb_router_client_has_pending(const sb_router *r, int client);
/* Whether the pending request table is full (SB-I-47). */
bool sb_router_requests_full(const sb_router *r);

/* Human-readable reason for logs. */
const char *sb_router_why(sb_route_why why);

/* Length of a raw token's value as the limits count it: strings without
 * their quotes. */
size_t sb_router_token_len(const sb_token *t);

#endif
