#include "pending.h"
#include "idkey.h"
#include "status.h"

#include <string.h>

int sb_pending_init(sb_pending *t, int capacity, int receivers, int senders) {
    t->next_seq = 0;
    return sb_slots_init(&t->slots, sizeof(sb_request), capacity, receivers, senders);
}

void sb_pending_fini(sb_pending *t) {
    sb_slots_fini(&t->slots);
}

/* The table's entries are sb_requests (init gives their size as the stride):
 * indexed as such, the per-message lookups multiply by a constant. */
static sb_request *entry(const sb_pending *t, int32_t index) {
    return &((sb_request *)t->slots.entries)[index];
}

/* Entries are hashed by the id's value (idkey.h), so ids that a
 * re-serialising worker could confuse share a bucket: sb_pending_holds
 * finds them, while responses still match the exact token (SB-I-3). */
static uint32_t key_hash(int receiver, sb_idkey id) {
    uint32_t h = id.hash ^ ((uint32_t)receiver * 2654435761u);
    return h ^ (h >> 15);
}

/* Off the per-message path: only reached when two ids of one receiver
 * share a hash but not their bytes. */
__attribute__((noinline)) static int same_value(sb_idkey a, sb_idkey b) {
    char buf_a[SB_IDKEY_MAX], buf_b[SB_IDKEY_MAX];
    const char *ca, *cb;
    size_t na = sb_idkey_canon(a, buf_a, &ca);
    size_t nb = sb_idkey_canon(b, buf_b, &cb);
    return na == nb && memcmp(ca, cb, na) == 0;
}

/* The bucket walk of holds and add_unique: an entry of this receiver with
 * an id of this value. */
static inline int find_value(const sb_pending *t, int receiver, sb_idkey id, uint32_t h) {
    for (int32_t i = sb_slots_bucket(&t->slots, h); i != SB_SLOT_NIL;
         i = sb_slots_link(&t->slots, i)->next_in_bucket) {
        const sb_request *r = entry(t, i);
        if (sb_slots_link(&t->slots, i)->hash != h || r->receiver != receiver)
            continue;
        if (r->id_len == id.len && sb_bytes_equal(r->id, id.raw, id.len))
            return 1;
        sb_idkey held = {r->id, r->id_len, r->id_plain, 0};
        if (same_value(held, id))
            return 1;
    }
    return 0;
}

int sb_pending_holds(const sb_pending *t, int receiver, sb_idkey id) {
    return find_value(t, receiver, id, key_hash(receiver, id));
}

static int insert(sb_pending *t, int receiver, int sender, sb_idkey id, uint32_t h,
                  const char *session, size_t session_len) {
    if (id.len == 0 || id.len > sizeof((sb_request *)0)->id ||
        session_len > sizeof((sb_request *)0)->session)
        return STDIO_BUS_EINVAL;
    int32_t index = sb_slots_take(&t->slots, h, receiver, sender);
    if (index == SB_SLOT_NIL)
        return STDIO_BUS_EFULL;
    sb_request *r = entry(t, index);
    r->receiver = receiver;
    r->sender = sender;
    r->seq = t->next_seq++;
    r->id_len = (uint8_t)id.len;
    r->id_plain = (uint8_t)id.plain;
    memcpy(r->id, id.raw, id.len);
    r->session_len = (uint16_t)session_len;
    if (session_len)
        memcpy(r->session, session, session_len);
    return STDIO_BUS_OK;
}

int sb_pending_add(sb_pending *t, int receiver, int sender, sb_idkey id, const char *session,
                   size_t session_len) {
    return insert(t, receiver, sender, id, key_hash(receiver, id), session, session_len);
}

int sb_pending_add_unique(sb_pending *t, int receiver, int sender, sb_idkey id, const char *session,
                          size_t session_len) {
    uint32_t h = key_hash(receiver, id);
    if (find_value(t, receiver, id, h))
        return STDIO_BUS_EAGAIN;
    return insert(t, receiver, sender, id, h, session, session_len);
}

/* An entry whose hash is the response's: whether the response answers it. */
static int matches(const sb_request *r, int receiver, const char *id, size_t id_len) {
    return r->receiver == receiver && r->id_len == id_len && sb_bytes_equal(r->id, id, id_len);
}

static inline void unlink_entry(sb_pending *t, int32_t index) {
    sb_request *r = entry(t, index);
    sb_slots_release(&t->slots, index, r->receiver, r->sender);
    r->id_len = 0;
}

int sb_pending_take(sb_pending *t, int receiver, sb_idkey id, const char *session,
                    size_t session_len) {
    uint32_t h = key_hash(receiver, id);
    int32_t chosen = SB_SLOT_NIL;
    int chosen_rank = 3;
    for (int32_t i = sb_slots_bucket(&t->slots, h); i != SB_SLOT_NIL;
         i = sb_slots_link(&t->slots, i)->next_in_bucket) {
        const sb_request *r = entry(t, i);
        if (sb_slots_link(&t->slots, i)->hash != h || !matches(r, receiver, id.raw, id.len))
            continue;
        /* SB-I-3: the request in the response's own session first, then one
         * without a session, then (6.3.1 routes by id) any other: orphans
         * left by departed clients keep their place in that order. */
        int rank;
        if (session_len && r->session_len == session_len &&
            sb_bytes_equal(r->session, session, session_len))
            rank = 0;
        else if (r->session_len == 0)
            rank = 1;
        else
            rank = 2;
        if (rank < chosen_rank || (rank == chosen_rank && r->seq < entry(t, chosen)->seq)) {
            chosen = i;
            chosen_rank = rank;
        }
    }
    if (chosen == SB_SLOT_NIL)
        return STDIO_BUS_ENOTFOUND;
    int sender = entry(t, chosen)->sender;
    unlink_entry(t, chosen);
    return sender;
}

static int drop_owner(sb_pending *t, int side, int owner,
                      void (*visit)(void *ctx, const sb_request *r), void *ctx) {
    int dropped = 0;
    int32_t index;
    while ((index = sb_slots_first(&t->slots, side, owner)) != SB_SLOT_NIL) {
        if (visit)
            visit(ctx, entry(t, index));
        unlink_entry(t, index);
        dropped++;
    }
    return dropped;
}

int sb_pending_drop_receiver(sb_pending *t, int receiver,
                             void (*visit)(void *ctx, const sb_request *r), void *ctx) {
    return drop_owner(t, SB_PENDING_BY_RECEIVER, receiver, visit, ctx);
}

int sb_pending_drop_sender(sb_pending *t, int sender, void (*visit)(void *ctx, const sb_request *r),
                           void *ctx) {
    return drop_owner(t, SB_PENDING_BY_SENDER, sender, visit, ctx);
}

int sb_pending_orphan_sender(sb_pending *t, int sender,
                             void (*visit)(void *ctx, const sb_request *r), void *ctx) {
    int orphaned = 0;
    int32_t index;
    while ((index = sb_slots_first(&t->slots, SB_PENDING_BY_SENDER, sender)) != SB_SLOT_NIL) {
        sb_request *r = entry(t, index);
        if (visit)
            visit(ctx, r);
        sb_slots_leave(&t->slots, index, SB_PENDING_BY_SENDER, sender);
        r->sender = SB_PENDING_ORPHAN;
        orphaned++;
    }
    return orphaned;
}
