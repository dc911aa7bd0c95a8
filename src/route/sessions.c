#include "sessions.h"
#include "hash.h"
#include "status.h"

#include <string.h>

int sb_sessions_init(sb_sessions *t, int capacity, int workers, int clients) {
    return sb_slots_init(&t->slots, sizeof(sb_session), capacity, workers, clients);
}

void sb_sessions_fini(sb_sessions *t) {
    sb_slots_fini(&t->slots);
}

/* The table's entries are sb_sessions (init gives their size as the stride):
 * indexed as such, the per-message lookups multiply by a constant. */
static sb_session *entry(const sb_sessions *t, int32_t index) {
    return &((sb_session *)t->slots.entries)[index];
}

sb_session *sb_sessions_find(sb_sessions *t, const char *key, size_t len) {
    uint32_t h = sb_hash_bytes(0, key, len);
    for (int32_t i = sb_slots_bucket(&t->slots, h); i != SB_SLOT_NIL;
         i = sb_slots_link(&t->slots, i)->next_in_bucket) {
        sb_session *s = entry(t, i);
        if (sb_slots_link(&t->slots, i)->hash == h && s->key_len == len &&
            sb_bytes_equal(s->key, key, len))
            return s;
    }
    return NULL;
}

sb_session *sb_sessions_add(sb_sessions *t, const char *key, size_t len, int worker, int client) {
    if (len == 0 || len > sizeof((sb_session *)0)->key)
        return NULL;
    int32_t index = sb_slots_take(&t->slots, sb_hash_bytes(0, key, len), worker, client);
    if (index == SB_SLOT_NIL)
        return NULL;
    sb_session *s = entry(t, index);
    s->key_len = (uint16_t)len;
    memcpy(s->key, key, len);
    s->worker = worker;
    s->client = client;
    return s;
}

void sb_sessions_remove(sb_sessions *t, sb_session *s) {
    sb_slots_release(&t->slots, sb_slots_index(&t->slots, s), s->worker, s->client);
    s->key_len = 0;
}

static int drop_owner(sb_sessions *t, int side, int owner,
                      void (*visit)(void *ctx, const sb_session *s), void *ctx) {
    int dropped = 0;
    int32_t index;
    while ((index = sb_slots_first(&t->slots, side, owner)) != SB_SLOT_NIL) {
        sb_session *s = entry(t, index);
        if (visit)
            visit(ctx, s);
        sb_sessions_remove(t, s);
        dropped++;
    }
    return dropped;
}

int sb_sessions_drop_worker(sb_sessions *t, int worker,
                            void (*visit)(void *ctx, const sb_session *s), void *ctx) {
    return drop_owner(t, SB_SESSION_BY_WORKER, worker, visit, ctx);
}

int sb_sessions_drop_client(sb_sessions *t, int client,
                            void (*visit)(void *ctx, const sb_session *s), void *ctx) {
    return drop_owner(t, SB_SESSION_BY_CLIENT, client, visit, ctx);
}
