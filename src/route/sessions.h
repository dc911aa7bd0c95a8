/* The Session table (spec 3.4, 6.1): sessionId -> (worker, owning client).
 *
 * A slot table (slots.h) of fixed capacity (STDIO_BUS_MAX_SESSIONS); lookups
 * are O(1) through a hash of the raw sessionId token; every entry is also
 * listed under its worker and its client, so invalidating all sessions of a
 * worker (SB-3.4-4) or of a client (SB-3.4-5) costs only their own count. */
#ifndef SB_SESSIONS_H
#define SB_SESSIONS_H

#include "bus_limits.h"
#include "slots.h"

#include <stddef.h>
#include <stdint.h>

typedef struct {
    int worker;
    int client;
    uint16_t key_len;                           /* 0 = free slot */
    char key[STDIO_BUS_MAX_SESSION_ID_LEN + 2]; /* raw token, quotes included */
} sb_session;

/* A session's owners on the two sides of its slot table */
enum { SB_SESSION_BY_WORKER = 0, SB_SESSION_BY_CLIENT = 1 };

typedef struct {
    sb_slots slots; /* of sb_session */
} sb_sessions;

/* Allocates the table for `capacity` sessions, `workers` worker ids and
 * `clients` client ids. Returns 0 or STDIO_BUS_ERR (out of memory). */
int sb_sessions_init(sb_sessions *t, int capacity, int workers, int clients);
void sb_sessions_fini(sb_sessions *t);

/* Returns the entry for the raw token key[0..len), or NULL. */
sb_session *sb_sessions_find(sb_sessions *t, const char *key, size_t len);

/* Adds a session bound to worker and owned by client. Returns the entry;
 * NULL when the table is full (STDIO_BUS_MAX_SESSIONS) or len is too long.
 * The key must not be present already. */
sb_session *sb_sessions_add(sb_sessions *t, const char *key, size_t len, int worker, int client);

/* Removes one entry. */
void sb_sessions_remove(sb_sessions *t, sb_session *s);

/* Removes every session of a worker / of a client; calls visit (may be
 * NULL) on each before removing it. Returns how many were removed. */
int sb_sessions_drop_worker(sb_sessions *t, int worker,
                            void (*visit)(void *ctx, const sb_session *s), void *ctx);
int sb_sessions_drop_client(sb_sessions *t, int client,
                            void (*visit)(void *ctx, const sb_session *s), void *ctx);

#endif
