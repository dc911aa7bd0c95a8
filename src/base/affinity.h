/* Connection affinity (SPEC.md SB-X-10..SB-X-16): which worker each client
 * connection is bound to, and which clients each worker serves.
 *
 * Pure bookkeeping, no I/O: fixed arrays allocated once, every operation
 * O(1). A client is bound to at most one worker; a worker may serve several
 * clients (a pool with fewer workers than connections), kept in a list so
 * that unbinding any one of them costs O(1) and the worker knows whether it
 * has exactly one client to send its own messages to (SB-X-12). */
#ifndef SB_AFFINITY_H
#define SB_AFFINITY_H

typedef enum {
    SB_AFFINITY_NONE = 0,   /* the spec: messages without sessionId go round-robin (6.1.3) */
    SB_AFFINITY_CONNECTION, /* SB-X-11: a connection's messages without sessionId go to one worker */
    SB_AFFINITY_EXCLUSIVE   /* SB-X-15: one worker spawned per connection, for all its messages */
} sb_affinity_mode;

#define SB_AFFINITY_UNBOUND (-1) /* no client / no worker */
#define SB_AFFINITY_SHARED  (-2) /* the worker serves several clients */

typedef struct {
    int *worker_of;   /* per client: its worker, or SB_AFFINITY_UNBOUND */
    int *next, *prev; /* per client: links in its worker's list */
    int *head;        /* per worker: first client of its list, or -1 */
    int *count;       /* per worker: clients bound to it */
    int workers, clients;
} sb_affinity;

/* Allocates the table for `workers` worker ids and `clients` client ids,
 * everything unbound. Returns 0 or STDIO_BUS_ERR (out of memory). */
int sb_affinity_init(sb_affinity *a, int workers, int clients);
void sb_affinity_fini(sb_affinity *a);

/* The worker the client is bound to, or SB_AFFINITY_UNBOUND. */
int sb_affinity_worker(const sb_affinity *a, int client);

/* Binds an unbound client to worker. */
void sb_affinity_bind(sb_affinity *a, int client, int worker);

/* Unbinds the client; returns the worker it was bound to, or
 * SB_AFFINITY_UNBOUND when it was not bound. */
int sb_affinity_unbind(sb_affinity *a, int client);

/* The one client bound to worker; SB_AFFINITY_UNBOUND when none is,
 * SB_AFFINITY_SHARED when several are. */
int sb_affinity_client(const sb_affinity *a, int worker);

/* Some client bound to worker (the most recently bound), or
 * SB_AFFINITY_UNBOUND: unbind it and ask again to visit them all. */
int sb_affinity_first(const sb_affinity *a, int worker);

/* How many clients are bound to worker. */
int sb_affinity_count(const sb_affinity *a, int worker);

#endif
