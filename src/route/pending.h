/* The pending Request table (spec 6.2, 6.3.1): requests in flight.
 *
 * A response comes back from the side that received the request, carrying
 * only the id, so entries are keyed by (receiver, raw id token) and hold the
 * sender. The same table type serves both directions: client requests
 * (receiver = worker, sender = client) and server-to-client requests
 * (receiver = client, sender = worker; SB-I-14).
 *
 * A slot table (slots.h) of fixed capacity; O(1) lookups. The router never records
 * two client requests with the same id value on one worker (SB-I-45), but
 * the table allows it (worker requests to one client may share an id): a
 * response then takes the oldest entry recorded with its own sessionId,
 * else the oldest without one, else the oldest of any session.
 *
 * When a sender leaves, its entries stay as orphans (sender
 * SB_PENDING_ORPHAN) until the receiver answers them, so a late answer is
 * swallowed instead of reaching a newcomer that reused the id (SB-I-23). */
#ifndef SB_PENDING_H
#define SB_PENDING_H

#include "bus_limits.h"
#include "idkey.h"
#include "slots.h"
#include "status.h"

#include <stddef.h>
#include <stdint.h>

typedef struct {
    int receiver;
    int sender;
    uint64_t seq;
    uint8_t id_len;                                 /* 0 = free slot */
    uint8_t id_plain;                               /* the id is its own canonical form (idkey.h) */
    uint16_t session_len;                           /* 0 = the request had no sessionId */
    char id[STDIO_BUS_MAX_REQUEST_ID_LEN + 2];      /* raw token */
    char session[STDIO_BUS_MAX_SESSION_ID_LEN + 2]; /* raw token */
} sb_request;

/* A request's owners on the two sides of its slot table: per receiver for
 * the fair shares (SB-I-52), per sender with orphans not counted (SB-I-51) */
enum { SB_PENDING_BY_RECEIVER = 0, SB_PENDING_BY_SENDER = 1 };

typedef struct {
    sb_slots slots; /* of sb_request */
    uint64_t next_seq;
} sb_pending;

#define SB_PENDING_ORPHAN STDIO_BUS_EOF /* the sender has left */

int sb_pending_init(sb_pending *t, int capacity, int receivers, int senders);
void sb_pending_fini(sb_pending *t);

/* Records a request. session may be NULL (len 0). Returns 0,
 * STDIO_BUS_EFULL when the table is full, STDIO_BUS_EINVAL when a token is
 * longer than its limit. */
int sb_pending_add(sb_pending *t, int receiver, int sender, sb_idkey id, const char *session,
                   size_t session_len);

/* sb_pending_add, unless receiver already holds an id of the same value
 * (sb_pending_holds): then STDIO_BUS_EAGAIN and nothing is recorded. */
int sb_pending_add_unique(sb_pending *t, int receiver, int sender, sb_idkey id, const char *session,
                          size_t session_len);

/* True when receiver has an entry whose id has the same value as this one
 * (idkey.h): the same token, or one a re-serialising worker would write the
 * same way (`1.0` and `1`). Used to keep such ids apart (SB-I-45). */
int sb_pending_holds(const sb_pending *t, int receiver, sb_idkey id);

/* Finds the entry a response from `receiver` with this id (and sessionId,
 * may be NULL) answers, removes it and returns its sender (>= 0),
 * SB_PENDING_ORPHAN when its sender has left, or STDIO_BUS_ENOTFOUND. */
int sb_pending_take(sb_pending *t, int receiver, sb_idkey id, const char *session,
                    size_t session_len);

/* How many entries this receiver / this sender holds (orphans belong to
 * no sender). */
static inline int sb_pending_count_receiver(const sb_pending *t, int receiver) {
    return sb_slots_owned(&t->slots, SB_PENDING_BY_RECEIVER, receiver);
}
static inline int sb_pending_count_sender(const sb_pending *t, int sender) {
    return sb_slots_owned(&t->slots, SB_PENDING_BY_SENDER, sender);
}

/* Removes every entry with this receiver / this sender, calling visit (may
 * be NULL) on each first. Returns how many were removed. */
int sb_pending_drop_receiver(sb_pending *t, int receiver,
                             void (*visit)(void *ctx, const sb_request *r), void *ctx);
int sb_pending_drop_sender(sb_pending *t, int sender, void (*visit)(void *ctx, const sb_request *r),
                           void *ctx);

/* Turns every entry of this sender into an orphan (see above), calling
 * visit first. Returns how many. */
int sb_pending_orphan_sender(sb_pending *t, int sender,
                             void (*visit)(void *ctx, const sb_request *r), void *ctx);

#endif
