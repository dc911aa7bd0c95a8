#include "pending.h"
#include "idkey.h"
#include "status.h"

#include <stdlib.h>
#include <string.h>

#define NIL (-1)

int sb_pending_init(sb_pending *t, int capacity, int receivers, int senders) {
    memset(t, 0, sizeof *t);
    uint32_t buckets = sb_hash_pow2((uint32_t)capacity * 2);
    t->entries = calloc((size_t)capacity, sizeof *t->entries);
    t->buckets = malloc(buckets * sizeof *t->buckets);
    t->recv_head = malloc((size_t)receivers * sizeof *t->recv_head);
    t->send_head = malloc((size_t)senders * sizeof *t->send_head);
    t->recv_count = calloc((size_t)receivers, sizeof *t->recv_count);
    t->send_count = calloc((size_t)senders, sizeof *t->send_count);
    if (!t->entries || !t->buckets || !t->recv_head || !t->send_head || !t->recv_count ||
        !t->send_count) {
        sb_pending_fini(t);
        return STDIO_BUS_ERR;
    }
    t->capacity = capacity;
    t->bucket_mask = buckets - 1;
    t->recv_slots = receivers;
    t->send_slots = senders;
    for (uint32_t i = 0; i < buckets; i++)
        t->buckets[i] = NIL;
    for (int i = 0; i < receivers; i++)
        t->recv_head[i] = NIL;
    for (int i = 0; i < senders; i++)
        t->send_head[i] = NIL;
    /* Entries are handed out from fresh_next up, so the pages of a table
     * sized for the hard limit are touched only as far as traffic reaches
     * (RSS at start, issue 26); the free list holds returned entries only. */
    t->free_head = NIL;
    t->fresh_next = 0;
    return STDIO_BUS_OK;
}

void sb_pending_fini(sb_pending *t) {
    free(t->entries);
    free(t->buckets);
    free(t->recv_head);
    free(t->send_head);
    free(t->recv_count);
    free(t->send_count);
    memset(t, 0, sizeof *t);
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
    for (int32_t i = t->buckets[h & t->bucket_mask]; i != NIL; i = t->entries[i].next_in_bucket) {
        const sb_request *r = &t->entries[i];
        if (r->hash != h || r->receiver != receiver)
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
    if (id.len == 0 || id.len > sizeof t->entries[0].id ||
        session_len > sizeof t->entries[0].session)
        return STDIO_BUS_EINVAL;
    int32_t index;
    if (t->free_head != NIL) {
        index = t->free_head;
        t->free_head = t->entries[index].next_in_bucket;
    } else if (t->fresh_next < t->capacity) {
        index = t->fresh_next++;
    } else {
        return STDIO_BUS_EFULL;
    }
    sb_request *r = &t->entries[index];

    r->hash = h;
    r->receiver = receiver;
    r->sender = sender;
    r->seq = t->next_seq++;
    r->id_len = (uint8_t)id.len;
    r->id_plain = (uint8_t)id.plain;
    memcpy(r->id, id.raw, id.len);
    r->session_len = (uint16_t)session_len;
    if (session_len)
        memcpy(r->session, session, session_len);

    int32_t *bucket = &t->buckets[r->hash & t->bucket_mask];
    r->next_in_bucket = *bucket;
    *bucket = index;

    r->recv_prev = NIL;
    r->recv_next = t->recv_head[receiver];
    if (r->recv_next != NIL)
        t->entries[r->recv_next].recv_prev = index;
    t->recv_head[receiver] = index;
    t->recv_count[receiver]++;

    r->send_prev = NIL;
    r->send_next = t->send_head[sender];
    if (r->send_next != NIL)
        t->entries[r->send_next].send_prev = index;
    t->send_head[sender] = index;
    t->send_count[sender]++;

    t->count++;
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

static int matches(const sb_request *r, uint32_t hash, int receiver, const char *id,
                   size_t id_len) {
    return r->hash == hash && r->receiver == receiver && r->id_len == id_len &&
           sb_bytes_equal(r->id, id, id_len);
}

static void unlink_sender(sb_pending *t, int32_t index) {
    sb_request *r = &t->entries[index];
    if (r->send_prev != NIL)
        t->entries[r->send_prev].send_next = r->send_next;
    else
        t->send_head[r->sender] = r->send_next;
    if (r->send_next != NIL)
        t->entries[r->send_next].send_prev = r->send_prev;
    r->send_prev = r->send_next = NIL;
    t->send_count[r->sender]--;
}

static void unlink_entry(sb_pending *t, int32_t index) {
    sb_request *r = &t->entries[index];
    int32_t *link = &t->buckets[r->hash & t->bucket_mask];
    while (*link != index)
        link = &t->entries[*link].next_in_bucket;
    *link = r->next_in_bucket;

    if (r->recv_prev != NIL)
        t->entries[r->recv_prev].recv_next = r->recv_next;
    else
        t->recv_head[r->receiver] = r->recv_next;
    if (r->recv_next != NIL)
        t->entries[r->recv_next].recv_prev = r->recv_prev;
    t->recv_count[r->receiver]--;

    if (r->sender >= 0)
        unlink_sender(t, index);

    r->id_len = 0;
    r->next_in_bucket = t->free_head;
    t->free_head = index;
    t->count--;
}

int sb_pending_take(sb_pending *t, int receiver, sb_idkey id, const char *session,
                    size_t session_len) {
    uint32_t h = key_hash(receiver, id);
    int32_t chosen = NIL;
    int chosen_rank = 3;
    for (int32_t i = t->buckets[h & t->bucket_mask]; i != NIL; i = t->entries[i].next_in_bucket) {
        const sb_request *r = &t->entries[i];
        if (!matches(r, h, receiver, id.raw, id.len))
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
        if (rank < chosen_rank || (rank == chosen_rank && r->seq < t->entries[chosen].seq)) {
            chosen = i;
            chosen_rank = rank;
        }
    }
    if (chosen == NIL)
        return STDIO_BUS_ENOTFOUND;
    int sender = t->entries[chosen].sender;
    unlink_entry(t, chosen);
    return sender;
}

int sb_pending_drop_receiver(sb_pending *t, int receiver,
                             void (*visit)(void *ctx, const sb_request *r), void *ctx) {
    int dropped = 0;
    while (t->recv_head[receiver] != NIL) {
        int32_t index = t->recv_head[receiver];
        if (visit)
            visit(ctx, &t->entries[index]);
        unlink_entry(t, index);
        dropped++;
    }
    return dropped;
}

int sb_pending_drop_sender(sb_pending *t, int sender, void (*visit)(void *ctx, const sb_request *r),
                           void *ctx) {
    int dropped = 0;
    while (t->send_head[sender] != NIL) {
        int32_t index = t->send_head[sender];
        if (visit)
            visit(ctx, &t->entries[index]);
        unlink_entry(t, index);
        dropped++;
    }
    return dropped;
}

int sb_pending_orphan_sender(sb_pending *t, int sender,
                             void (*visit)(void *ctx, const sb_request *r), void *ctx) {
    int orphaned = 0;
    while (t->send_head[sender] != NIL) {
        int32_t index = t->send_head[sender];
        if (visit)
            visit(ctx, &t->entries[index]);
        unlink_sender(t, index);
        t->entries[index].sender = SB_PENDING_ORPHAN;
        orphaned++;
    }
    return orphaned;
}
